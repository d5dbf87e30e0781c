"""The demo's experiments: a simulated benchmark cluster, one experiment finished, one running.

The seeded history (the finished ResNet-50 epoch on p4d / g5 / g6, on-demand and spot, and the
first rounds of an inference benchmark) is the simulated world's past, like the demo's finished
jobs: it is run on the bench with an action log of its own. Everything done after the console
opens goes through the console's job path, with its role checks and audit.
"""

from __future__ import annotations

from gpuconsole.backends.registry import sim_bench
from gpuconsole.core.ops.actions import ActionLog
from gpuconsole.core.ops.experiments.book import ExperimentBook
from gpuconsole.core.ops.experiments.spec import parse_text
from gpuconsole.core.ops.experiments.store import ExperimentStore
from gpuconsole.core.ops.job_ops import JobOps

FINISHED = """\
name = "resnet50-epoch"
namespace = "team-vision"
image = "nvcr.io/nvidia/pytorch:24.05-py3"
command = ["python", "bench.py", "--epochs", "1"]
gpus = 1
metric = { regex = "samples/s: ([0-9.]+)", unit = "samples/s", better = "higher" }
work = { amount = 1281167, unit = "samples", per = "epoch" }     # one ImageNet epoch
repeats = 3
max_cost = 200

[[arms]]
instance_type = "p4d.24xlarge"
market = "on-demand"
gpus = 8

[[arms]]
instance_type = "p4d.24xlarge"
market = "spot"
gpus = 8

[[arms]]
instance_type = "g5.xlarge"

[[arms]]
instance_type = "g5.xlarge"
market = "spot"

[[arms]]
instance_type = "g6.xlarge"

[[arms]]
instance_type = "g6.xlarge"
market = "spot"
"""

RUNNING = """\
name = "resnet50-infer"
namespace = "inference"
image = "nvcr.io/nvidia/tritonserver:24.05-py3"
command = ["python", "infer_bench.py", "--batch", "64"]
env = { BENCH_WORK = "1000000", BENCH_SPEEDUP = "3.2", BENCH_LABEL = "images/s" }
gpus = 1
metric = { regex = "images/s: ([0-9.]+)", unit = "images/s", better = "higher" }
work = { amount = 1000000, unit = "inferences", per = "1M inferences" }
repeats = 4
max_cost = 50

[[arms]]
instance_type = "g4dn.xlarge"

[[arms]]
instance_type = "g5.xlarge"

[[arms]]
instance_type = "g6.xlarge"
market = "spot"
"""

SEED = 7
HISTORY_S = 8 * 3600.0  # the bench's clock starts this long before the console
STEP_S = 30.0
RUNNING_DONE = 5  # results the running experiment has when the demo opens


def demo_book(actions: ActionLog, owner: str, now: float) -> tuple[ExperimentBook, SimBench]:
    """A book on a fresh bench with the seeded experiments; later runs use ``actions``."""
    bench = sim_bench(SEED, round(now - HISTORY_S))
    store = ExperimentStore(":memory:")
    past = JobOps(bench, bench.clock, ActionLog())
    book = ExperimentBook(store, past, lambda: bench.poll_jobs().jobs, owner="demo", clock=bench.clock,
                          sleep=bench.advance, interval=STEP_S)
    book.start(parse_text(FINISHED), FINISHED).run(sleep=bench.advance, interval=STEP_S)
    running = book.start(parse_text(RUNNING), RUNNING)
    running.run(sleep=bench.advance, interval=STEP_S, until=lambda: book.results("resnet50-infer") >= RUNNING_DONE)
    book.jobs = JobOps(bench, bench.clock, actions)
    book.owner = owner
    return book, bench
