"""A reading's live jobs and counts are made once and agree with counting every job: the
autopilot, the alerts, the budgets and the panes read them from the same reading."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from gpuconsole.model import Job, JobState, unfinished
from gpuconsole.ui.panes.job_rows import JobTally

jobs_st = st.lists(st.tuples(st.sampled_from(list(JobState)), st.integers(0, 8)), max_size=60).map(
    lambda rows: tuple(Job(uid=f"u{i}", name=f"j{i}", namespace="ns", state=state, created=float(i), gpus=gpus)
                       for i, (state, gpus) in enumerate(rows)))


@given(jobs_st)
def test_the_tally_counts_every_state_and_the_gpus_pending_jobs_wait_for(jobs) -> None:
    tally = JobTally(jobs)
    assert tally.counts == {state: Counter(j.state for j in jobs)[state] for state in JobState}
    assert tally.waiting_gpus == sum(max(j.gpus, 1) for j in jobs if j.state is JobState.PENDING)


@given(jobs_st)
def test_the_live_jobs_are_the_unfinished_ones_in_order_made_once_a_reading(jobs) -> None:
    live = unfinished(jobs)
    assert live == tuple(j for j in jobs if j.state not in (JobState.SUCCEEDED, JobState.FAILED))
    assert unfinished(jobs) is live
    copy = tuple(list(jobs))
    assert unfinished(copy) == live
