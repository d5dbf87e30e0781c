"""Live refresh at fleet scale: CPU, per-tick latency and key latency, as one table of medians.

    .venv/bin/python benchmarks/fleet_refresh.py                 # 8, 64, 1,024 and 8,192 GPUs
    .venv/bin/python benchmarks/fleet_refresh.py --gpus 1024 --seconds 20

For each fleet size a child process runs the demo (``--demo --no-db --demo-nodes N``, the
smallest N with that many GPUs) at
the default 1 s interval, headless at 120×36 on the GPUs pane, waits for start-up to settle and
then measures, over ``--seconds``:

- CPU: percent of one core used by the whole process (UI, Hub threads, the simulated world
  ticking, snapshot composition, costs and budgets): the CPU time of every thread divided by
  the wall time;
- tick: the UI thread's time to take in one snapshot (top bar, pane strip, the GPUs pane's rows
  and the row under the cursor), median and worst;
- key → screen: input latency while the fleet refreshes. A key (``down`` in the GPUs table) is
  sent as the terminal driver sends it, and the clock stops at the end of the first frame that
  shows the cursor on the next row and the line under the table rewritten for it
  (``benchmarks/keylat.py``; no Pilot waits). Keys are spaced 0.37 s apart so they land at every
  phase of the 1 s refresh; median and worst, wall time, and the UI thread's CPU time (median).

``--json`` prints the table's rows as JSON after it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {8: "", 64: "", 1024: "≤ 8% · tick ≤ 50 ms", 8192: "≤ 20% · key ≤ 100 ms"}
KEYS = 9  # keys timed per fleet
KEY_SPACING_S = 0.37  # between keys, so they meet the 1 s refresh at different phases


def log(message: str) -> None:
    print(f"[fleet] {message}", file=sys.stderr, flush=True)


def nodes_for(gpus: int, seed: int = 7) -> int:
    """The smallest ``--demo-nodes N`` whose simulated fleet has at least ``gpus`` GPUs (1 for 8)."""
    from gpuconsole.backends.sim.world import SimWorld

    def count(nodes: int) -> int:
        return len(SimWorld(seed=seed, nodes=nodes).gpu_reading().gpus)

    if gpus <= 8:
        return 1
    per_node = count(64) / 64
    nodes = max(1, int(gpus / per_node) - 2)
    while count(nodes) < gpus:
        nodes += 1
    return nodes


async def measure(gpus: int, seconds: float, settle: float) -> dict[str, object]:
    from keylat import KeyLatency, time_ticks

    from gpuconsole.cli.main import make_console, parse_args
    from gpuconsole.ui.app import GpuConsoleApp
    from gpuconsole.ui.widgets.virtual_table import VirtualTable

    nodes = nodes_for(gpus)
    log(f"{gpus} GPUs: --demo-nodes {nodes}")
    argv = ["--demo", "--no-db", "--demo-nodes", str(nodes)]
    console = make_console(parse_args(argv))
    app = GpuConsoleApp(console)  # as the command line runs it
    ticks = time_ticks(app, time.perf_counter)
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.press("2")
            await asyncio.sleep(settle)
            table = app.query_one("#gpu-table", VirtualTable)
            shown = table.row_count
            log(f"settled: {shown} rows, {len(ticks)} ticks so far; measuring {seconds:g} s")
            ticks.clear()
            wall0, cpu0 = time.perf_counter(), time.process_time()
            await asyncio.sleep(seconds)
            cpu = 100.0 * (time.process_time() - cpu0) / (time.perf_counter() - wall0)
            tick_list = list(ticks)
            log(f"{len(tick_list)} ticks, CPU {cpu:.0f}%; pressing keys")
            table.focus()
            await pilot.pause()
            pane = app.query_one("#gpus-pane")
            keys = await KeyLatency.attach(app)
            try:
                times = await keys.walk_down(pane, table, KEYS, KEY_SPACING_S)
            finally:
                keys.close()
            fleet = len(app.snapshot.gpus)
    finally:
        console.close()
    return {"gpus": fleet, "rows": shown, "cpu": cpu, "ticks": len(tick_list),
            "tick_median": statistics.median(tick_list) if tick_list else None,
            "tick_max": max(tick_list) if tick_list else None,
            "key": statistics.median(t.wall for t in times), "key_max": max(t.wall for t in times),
            "key_cpu": statistics.median(t.cpu for t in times)}


def child(args: argparse.Namespace) -> int:
    result = asyncio.run(measure(args.child, args.seconds, args.settle))
    print(json.dumps(result))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, action="append", help="fleet size (repeatable; default 8, 64, 1024, 8192)")
    parser.add_argument("--seconds", type=float, default=15.0, help="seconds measured per fleet (default 15)")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds after start-up before measuring (default 5)")
    parser.add_argument("--runs", type=int, default=1, help="runs per fleet; the table shows medians (default 1)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON after the table")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        return child(args)
    rows = []
    for gpus in args.gpus or [8, 64, 1024, 8192]:
        runs = []
        for _ in range(args.runs):
            out = subprocess.run([sys.executable, __file__, "--child", str(gpus), "--seconds", str(args.seconds),
                                  "--settle", str(args.settle)], cwd=ROOT, capture_output=True, text=True, check=False,
                                 timeout=args.seconds + args.settle + 300)
            if out.returncode != 0:
                print(out.stderr[-2000:], file=sys.stderr)
                return 1
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        rows.append((gpus, runs))
    table = []
    for gpus, runs in rows:
        def med(name: str, runs: list[dict] = runs) -> float:
            return statistics.median(r[name] for r in runs if r[name] is not None)
        table.append({"fleet": gpus, "gpus": runs[0]["gpus"], "rows": int(med("rows")), "cpu_percent": med("cpu"),
                      "tick_median_ms": med("tick_median") * 1000, "tick_max_ms": med("tick_max") * 1000,
                      "key_ms": med("key") * 1000, "key_max_ms": med("key_max") * 1000,
                      "key_cpu_ms": med("key_cpu") * 1000, "target": TARGETS.get(gpus, "")})
    print(f"{'fleet':>12} {'rows':>7} {'CPU % of a core':>16} {'tick median':>12} {'tick worst':>11}"
          f" {'key → screen':>13} {'worst':>7} {'UI CPU':>7}   target")
    for r in table:
        print(f"{r['gpus']:>8} GPUs {r['rows']:>7} {r['cpu_percent']:>15.1f}% {r['tick_median_ms']:>10.1f}ms"
              f" {r['tick_max_ms']:>9.1f}ms {r['key_ms']:>11.0f}ms {r['key_max_ms']:>5.0f}ms {r['key_cpu_ms']:>5.0f}ms"
              f"   {r['target']}")
    if args.json:
        print(json.dumps(table, indent=2))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    sys.exit(main())
