"""What one NVML poll costs the adapter itself, per GPU, and what a real driver adds.

    .venv/bin/python benchmarks/nvml_poll.py [--runs N] [--json]

With the fake NVML layer of the tests (tests/fake_nvml.py, installed at the pynvml function
level, answering in well under a microsecond) the time measured is the adapter's own work: the
query helper, the MIG and process joins, building the frozen snapshot. Where the NVIDIA driver
is present it also times, on GPU 0, the eight fields of a plain poll (utilization, memory,
temperature, power, power limit, SM and memory clocks, fan) through the query helper, and the
adapter's full poll of every GPU. Prints the median of ``--runs`` polls after a warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Self

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pynvml

from gpuconsole.backends.nvml import source as nvml
from gpuconsole.backends.nvml.query import query
from tests.fake_nvml import GONE_PID_BASE, FakeGpu, FakeNvml, FakeProcess, mig_gpu

FAKE_TARGET_MS = 0.2
REAL_TARGET_MS = 2.0


class Patch:
    """The part of pytest's monkeypatch the fake needs, undone on exit."""

    def __init__(self) -> None:
        self._undo: list[tuple[Any, str, Any]] = []

    def setattr(self, target: Any, name: str, value: Any) -> None:
        self._undo.append((target, name, getattr(target, name)))
        setattr(target, name, value)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        for target, name, value in reversed(self._undo):
            setattr(target, name, value)


def median_ms(fn: Any, runs: int, warmup: int = 20) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def fake_hosts() -> dict[str, list[FakeGpu]]:
    me = os.getpid()  # a process the OS shows: the psutil join is measured too
    return {
        "8 whole GPUs, no processes": [FakeGpu(f"GPU-{i}") for i in range(8)],
        "8 whole GPUs, 2 processes each (one visible here)": [
            FakeGpu(f"GPU-{i}", processes=[FakeProcess(me, 1000), FakeProcess(GONE_PID_BASE + i, 2000)],
                    sm_samples=[(me, 1, 50)]) for i in range(8)],
        "8 A100s in MIG mode, 4 slices, 2 processes": [
            mig_gpu(f"GPU-mig-{i}", {"3g.40gb": [FakeProcess(GONE_PID_BASE + 10 + i, 2000)],
                                     "1g.10gb": [FakeProcess(me, 100)]}) for i in range(8)],
    }


def measure_fake(runs: int) -> list[dict[str, Any]]:
    rows = []
    for label, gpus in fake_hosts().items():
        with Patch() as patch:
            FakeNvml(gpus).install(patch)
            source = nvml.NvmlSource(node="bench")
            source.poll_gpus()
            ms = median_ms(source.poll_gpus, runs)
            source.close()
        rows.append({"case": f"fake NVML: {label}", "gpus": len(gpus), "poll ms": ms, "per GPU ms": ms / len(gpus),
                     "target": f"≤ {FAKE_TARGET_MS} ms per GPU"})
    return rows


def measure_real(runs: int) -> list[dict[str, Any]]:
    if not nvml.library_available():
        return [{"case": "real NVML", "gpus": 0, "poll ms": None, "per GPU ms": None,
                 "target": "n/a: no NVIDIA driver here"}]
    pynvml.nvmlInit()
    try:
        count = pynvml.nvmlDeviceGetCount()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)

        def eight_fields() -> None:
            query("nvmlDeviceGetUtilizationRates", handle)
            query("nvmlDeviceGetMemoryInfo", handle)
            query("nvmlDeviceGetTemperature", handle, pynvml.NVML_TEMPERATURE_GPU)
            query("nvmlDeviceGetPowerUsage", handle)
            query("nvmlDeviceGetEnforcedPowerLimit", handle)
            query("nvmlDeviceGetClockInfo", handle, pynvml.NVML_CLOCK_SM)
            query("nvmlDeviceGetClockInfo", handle, pynvml.NVML_CLOCK_MEM)
            query("nvmlDeviceGetFanSpeed", handle)

        eight = median_ms(eight_fields, runs)
    finally:
        pynvml.nvmlShutdown()
    source = nvml.NvmlSource(node="bench")
    source.poll_gpus()
    full = median_ms(source.poll_gpus, runs, warmup=5)
    source.close()
    return [
        {"case": "real NVML: 8-field poll of GPU 0", "gpus": 1, "poll ms": eight, "per GPU ms": eight,
         "target": f"≤ {REAL_TARGET_MS} ms"},
        {"case": "real NVML: the adapter's full poll", "gpus": count, "poll ms": full,
         "per GPU ms": full / max(count, 1), "target": "(no target)"},
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2000, help="polls timed per case (default 2000)")
    parser.add_argument("--real-runs", type=int, default=200, help="polls timed on a real GPU (default 200)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON too")
    args = parser.parse_args(argv)
    rows = measure_fake(args.runs) + measure_real(args.real_runs)
    width = max(len(r["case"]) for r in rows)
    print(f"{'case':<{width}}  {'GPUs':>4}  {'poll':>9}  {'per GPU':>9}  target")
    for r in rows:
        poll = "-" if r["poll ms"] is None else f"{r['poll ms']:.3f} ms"
        per = "-" if r["per GPU ms"] is None else f"{r['per GPU ms']:.3f} ms"
        print(f"{r['case']:<{width}}  {r['gpus']:>4}  {poll:>9}  {per:>9}  {r['target']}")
    if args.json:
        print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
