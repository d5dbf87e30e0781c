"""The experiment book on the demo's benchmark cluster: re-run an arm, stop and go on, names."""

from __future__ import annotations

import pytest

from gpuconsole.core.ops.actions import ActionError, ActionLog
from gpuconsole.core.ops.experiments.demo import FINISHED, RUNNING, demo_book
from gpuconsole.core.ops.experiments.spec import parse_text
from tests.helpers import START


@pytest.fixture
def book():
    actions = ActionLog()
    book, _bench = demo_book(actions, "ana", START)
    return book


def test_the_demo_opens_with_one_finished_and_one_running(book) -> None:
    done, running = book.progress("resnet50-epoch"), book.progress("resnet50-infer")
    assert (done.state, done.done, done.planned) == ("done", 18, 18)
    assert running.state == "running" and 0 < running.done < running.planned and running.running + running.pending > 0
    assert 0 < done.spent < 200 and done.max_cost == 200


def test_rerun_an_arm_sets_its_runs_aside_and_runs_it_again(book) -> None:
    before = book.analysis("resnet50-epoch").arm("g5-xl-od")
    runner = book.rerun_arm("resnet50-epoch", "g5-xl-od")
    assert book.analysis("resnet50-epoch").arm("g5-xl-od").runs == 0
    spent_before = book.progress("resnet50-epoch").spent
    runner.run(sleep=book.sleep, interval=book.interval)
    after = book.analysis("resnet50-epoch").arm("g5-xl-od")
    assert after.runs == 3 and after.median != before.median
    jobs = [r.job for r in book.runs("resnet50-epoch") if r.arm == "g5-xl-od"]
    assert len(jobs) == len(set(jobs)) == 6  # new Job names, old runs kept
    assert book.progress("resnet50-epoch").spent > spent_before  # the old runs still count as spent
    with pytest.raises(ActionError, match="has no arm"):
        book.rerun_arm("resnet50-epoch", "nope")


def test_stop_then_start_goes_on_where_it_stopped(book) -> None:
    assert book.stop("resnet50-infer") == []
    stopped = book.progress("resnet50-infer")
    assert stopped.state == "stopped" and stopped.running == stopped.pending == 0
    assert book.runner("resnet50-infer").tick() is False  # a stopped experiment schedules nothing
    runner = book.start(parse_text(RUNNING), RUNNING)
    runner.run(sleep=book.sleep, interval=book.interval)
    final = book.progress("resnet50-infer")
    assert final.state in ("done", "budget") and final.done > stopped.done


def test_a_name_is_one_experiment(book) -> None:
    with pytest.raises(ActionError, match="exists with another file"):
        book.start(parse_text(FINISHED.replace("repeats = 3", "repeats = 4")), FINISHED.replace("repeats = 3", "repeats = 4"))
    with pytest.raises(ActionError, match="running already"):
        book.start(parse_text(RUNNING), RUNNING)
    with pytest.raises(ActionError, match="no experiment named"):
        book.progress("nope")
