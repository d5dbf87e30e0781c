"""What the autopilot costs each refresh: 50 rules decided over a ~1,024-GPU simulated fleet.

    .venv/bin/python benchmarks/autopilot_rules.py [--runs N] [--json]

Builds the seeded demo fleet of 139 nodes (about 1,024 GPUs), answers every source once, and
times :meth:`Engine.tick` (plan only: no actuator) with 50 rules: 30 scale rules on pools of the
fleet's Owner tags and on the whole fleet, 10 idle-stop and 10 spot-recover. Prints the median
and the spread (p10–p90) in milliseconds, of the thread's CPU time (what a refresh costs; on a
shared machine the wall time also counts the waits for a core) and of the wall time. Target: at
most 5 ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msgspec  # noqa: E402

from tests.showcase import FrozenClock, showcase_console  # noqa: E402
from gpuconsole.core.ops.autopilot.engine import Engine  # noqa: E402
from gpuconsole.core.ops.autopilot.rules import rule_from_table  # noqa: E402
from gpuconsole.core.ops.autopilot.state import AutopilotState  # noqa: E402

TARGET_MS = 5.0


def fifty_rules(owners: list[str]) -> list:
    tables = []
    for n in range(30):
        pool = f"tag:Owner={owners[n % len(owners)]}" if owners and n % 3 else "all"
        tables.append({"name": f"pool-{n}", "kind": "scale", "pool": pool,
                       "launch": {"type": "g5.xlarge", "region": "us-east-1", "ami": "ami-0abc1234"},
                       "scale_out": "gpu_util > 80 for 10m or pending_gpus > 0 for 5m",
                       "scale_in": "gpu_util < 20 for 30m", "max": 64})
    for n in range(10):
        tables.append({"name": f"idle-{n}", "kind": "idle-stop", "scope": "all", "idle_for": "30m"})
    for n in range(10):
        tables.append({"name": f"spot-{n}", "kind": "spot-recover", "scope": "all"})
    return [rule_from_table(t) for t in tables]


def measure(runs: int) -> dict[str, float]:
    clock = FrozenClock()
    console = showcase_console(nodes=139, clock=clock)
    try:
        console.hub.poll_once()  # one answer from every source, no supervisor threads
        snap = console.compose()
        owners = sorted({i.tag("Owner") for i in snap.instances if i.tag("Owner")})
        engine = Engine(fifty_rules(owners), AutopilotState())
        engine.tick(snap)  # warm: the first tick fills the histories
        wall, cpu = [], []
        for n in range(runs):
            step = msgspec.structs.replace(snap, taken_at=snap.taken_at + n + 1)
            t0, c0 = time.perf_counter(), time.thread_time()
            engine.tick(step)
            cpu.append((time.thread_time() - c0) * 1000)
            wall.append((time.perf_counter() - t0) * 1000)
        qw, qc = statistics.quantiles(wall, n=10), statistics.quantiles(cpu, n=10)
        return {"gpus": len(snap.gpus), "instances": len(snap.instances), "rules": len(engine.rules),
                "median ms": statistics.median(wall), "p10 ms": qw[0], "p90 ms": qw[-1],
                "cpu median ms": statistics.median(cpu), "cpu p10 ms": qc[0], "cpu p90 ms": qc[-1]}
    finally:
        console.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = measure(args.runs)
    print(f"{figures['rules']} rules over {figures['gpus']} GPUs / {figures['instances']} instances, per refresh: "
          f"CPU median {figures['cpu median ms']:.2f} ms (p10 {figures['cpu p10 ms']:.2f}, p90 {figures['cpu p90 ms']:.2f}); "
          f"wall median {figures['median ms']:.2f} ms (p10 {figures['p10 ms']:.2f}, p90 {figures['p90 ms']:.2f}); "
          f"target ≤ {TARGET_MS} ms CPU: {'ok' if figures['cpu median ms'] <= TARGET_MS else 'MISSED'}")
    if args.json:
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
