"""The demo's benchmark cluster: public relative throughputs, noise, spot evictions, determinism."""

from __future__ import annotations

import statistics

from gpuconsole.backends.sim import SimBench
from gpuconsole.core.ops.experiments.spec import parse_text
from gpuconsole.core.ops.manifests import manifests
from gpuconsole.model import JobState
from tests.test_experiment_spec import EXAMPLE

TYPES = {"H100": "p5.48xlarge", "A100": "p4d.24xlarge", "A10G": "g5.xlarge", "L4": "g6.xlarge", "T4": "g4dn.xlarge"}


def rates(market: str = "on-demand", runs: int = 8, seed: int = 7) -> dict[str, list[float]]:
    arms = "".join(f'\n[[arms]]\ninstance_type = "{t}"\nmarket = "{market}"\n' for t in TYPES.values())
    spec = parse_text(EXAMPLE.split("[[arms]]")[0] + arms)
    bench = SimBench(seed=seed)
    for arm in spec.arms:
        for repeat in range(1, runs + 1):
            bench.submit(manifests(spec.job_request(arm, repeat, 1)))
    bench.advance(48 * 3600)
    out: dict[str, list[float]] = {gpu: [] for gpu in TYPES}
    for job in bench.poll_jobs().jobs:
        if job.state is JobState.SUCCEEDED:
            line = list(bench.logs(job.namespace, job.pod or ""))[-1]
            gpu = next(g for g, t in TYPES.items() if job.node and job.node.endswith(t))
            out[gpu].append(float(line.split(": ")[1]))
    return out


def test_relative_throughput_follows_public_resnet50_figures() -> None:
    medians = {gpu: statistics.median(values) for gpu, values in rates().items()}
    assert medians["H100"] > medians["A100"] > medians["A10G"] > medians["L4"] > medians["T4"]
    assert 1.5 < medians["H100"] / medians["A100"] < 2.1
    assert 2.8 < medians["A100"] / medians["A10G"] < 4.2
    assert 2.5 < medians["A10G"] / medians["T4"] < 4.0


def test_runs_vary_by_a_few_per_cent_and_the_same_seed_repeats_itself() -> None:
    first = rates()
    for values in first.values():
        spread = statistics.pstdev(values) / statistics.mean(values)
        assert 0.005 < spread < 0.08
    assert rates() == first
    assert rates(seed=8) != first


def test_spot_runs_are_now_and_then_evicted() -> None:
    spec = parse_text(EXAMPLE)
    bench = SimBench(seed=7)
    for repeat in range(1, 41):
        bench.submit(manifests(spec.job_request(spec.arms[2], repeat, 1)))  # g6.xlarge spot
        bench.submit(manifests(spec.job_request(spec.arms[1], repeat, 1)))  # g5.xlarge on-demand
    bench.advance(48 * 3600)
    jobs = bench.poll_jobs().jobs
    evicted = [j for j in jobs if j.state is JobState.FAILED]
    assert evicted and all("g6" in j.name for j in evicted) and len(evicted) < 15
    assert all("Evicted" in (j.pending_reason or "") for j in evicted)
