"""What the cost and budget work adds to every refresh, measured on the simulated fleet.

    .venv/bin/python benchmarks/costs.py [--runs N] [--json]

For the default demo fleet, about 1,024 GPUs and about 8,192 GPUs it prints the median time of
one snapshot composition (spend with billing spans, idle tracking, budgets and their pending
actions, CronJob pricing, alerts) and of its parts, with every source answered. ``--json``
prints the same figures as JSON after the table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpuconsole.core.money import costs
from gpuconsole.core.money.idle import IdleTracker  # noqa: E402
from tests.showcase import FrozenClock, showcase_console  # noqa: E402

FLEETS = {"default": None, "~1,024 GPUs": 139, "~8,192 GPUs": 1110}


def median_ms(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def measure(nodes: int | None, runs: int) -> dict[str, float]:
    clock = FrozenClock()
    console = showcase_console(nodes=nodes, clock=clock)
    try:
        console.hub.poll_once()  # one answer from every source, no supervisor threads
        snap = console.compose()
        instances, gpus = snap.instances, snap.gpus
        tracker = IdleTracker()
        tracker.update(gpus, instances, clock())
        now = clock()
        month = costs.month_start(now)
        return {
            "gpus": len(gpus),
            "instances": len(instances),
            "compose ms": median_ms(console.compose, runs),
            "spend (month) ms": median_ms(lambda: costs.spend(instances, month, now), runs),
            "idle tracker ms": median_ms(lambda: tracker.update(gpus, instances, now), runs),
            "budgets ms": median_ms(lambda: console.services.budget_ops.evaluate(snap), runs),
        }
    finally:
        console.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="compositions per fleet (default 21)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON after the table")
    args = parser.parse_args()
    rows = {name: measure(nodes, args.runs) for name, nodes in FLEETS.items()}
    keys = list(next(iter(rows.values())))
    print(f"{'':<18}" + "".join(f"{name:>14}" for name in rows))
    for key in keys:
        print(f"{key:<18}" + "".join(f"{rows[name][key]:>14,.1f}" if 'ms' in key else f"{rows[name][key]:>14,.0f}" for name in rows))
    if args.json:
        print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
