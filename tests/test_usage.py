"""Usage analysis: GPU-hours and cost per user and per namespace over a period."""

from __future__ import annotations

from gpuconsole.core.money.usage import UNKNOWN, usage_report
from gpuconsole.model import Instance, InstanceState, Job, JobState, Market

T0 = 1_800_000_000.0
H = 3600.0


def job(name: str, ns: str, owner: str | None, gpus: int, start: float, end: float | None, node: str = "n1",
        mig: str | None = None) -> Job:
    state = JobState.RUNNING if end is None else JobState.SUCCEEDED
    return Job(uid=name, name=name, namespace=ns, state=state, created=start, gpus=gpus, node=node, started=start,
               finished=end, owner=owner, mig_profile=mig)


def test_gpu_hours_and_cost_per_user_and_namespace_within_the_period() -> None:
    node = Instance("i-1", "p4d.24xlarge", "us-east-1", "us-east-1a", Market.ON_DEMAND, InstanceState.RUNNING,
                    T0 - 10 * H, 32.0, gpus=8, node="n1")  # $4 per GPU-hour
    jobs = [
        job("a", "team-nlp", "priya", 2, T0, T0 + 3 * H),           # 6 GPU-h, $24
        job("b", "team-nlp", "bob", 1, T0 - 2 * H, T0 + 1 * H),     # 1 GPU-h inside the period, $4
        job("c", "research", "priya", 4, T0 + 1 * H, None),         # running: 4 × 3 h = 12 GPU-h, $48
        job("d", "research", None, 1, T0, T0 + H, node="gone"),     # no priced node: GPU-hours, no cost
        job("e", "team-nlp", "bob", 1, T0 - 5 * H, T0 - 4 * H),     # before the period
    ]
    report = usage_report(jobs, [node], T0, T0 + 4 * H)
    assert [(u.key, round(u.gpu_hours, 3), round(u.cost, 2), u.jobs) for u in report.by_user] == [
        ("priya", 18.0, 72.0, 2), ("bob", 1.0, 4.0, 1), (UNKNOWN, 1.0, 0.0, 1)]
    assert [(n.key, round(n.gpu_hours, 3), round(n.cost, 2)) for n in report.by_namespace] == [
        ("research", 13.0, 48.0), ("team-nlp", 7.0, 28.0)]
    assert round(report.gpu_hours, 3) == 20.0 and round(report.cost, 2) == 76.0
    assert report.as_dict()["schema"] == "gpuconsole.usage/1"
    assert "total: 20.00 GPU-hours, $76.00" in report.text()


def test_a_mig_job_counts_its_share_of_a_gpu() -> None:
    node = Instance("i-1", "p4d.24xlarge", "us-east-1", "us-east-1a", Market.ON_DEMAND, InstanceState.RUNNING,
                    T0, 32.0, gpus=8, node="n1")
    report = usage_report([job("m", "ml", "ana", 1, T0, T0 + 7 * H, mig="1g.10gb")], [node], T0, T0 + 7 * H)
    [line] = report.by_user
    assert line.gpu_hours == 1.0  # 1/7 of a GPU for 7 hours
