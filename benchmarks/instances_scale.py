"""The Instances pane with 1,000 cloud instances across regions: first render, refresh, keys.

    .venv/bin/python benchmarks/instances_scale.py                    # 1,000 nodes: 1,000 instances
    .venv/bin/python benchmarks/instances_scale.py --nodes 2000 --seconds 20

A child process runs the demo (``--demo --no-db --demo-nodes N --demo-at 2026-11-16T14:00Z``:
N nodes, one EC2 instance each, in us-east-1 and us-west-2) headless at 120×36, switched to
the Instances pane at once, at the default 1 s interval, and measures:

- first render: from building the Console (the world included) to the end of the first frame in
  which the Instances table holds every instance and its first rows' ids are on screen
  (``benchmarks/keylat.py`` hooks the frames); wall and process CPU time;
- tick: the UI thread's CPU time to take in one snapshot on the Instances pane (re-ordering the
  instances, diffing their cells into the table, the status line), median and worst over
  ``--seconds``; the UI thread's CPU and the whole process's CPU (the simulated world stepping
  N nodes' GPUs, jobs and instances, composing snapshots, costs and budgets), percent of one core;
- key → screen: ``down`` in the Instances table, sent as the terminal driver sends it, to the end
  of the first frame with the cursor on the next row and the line under the table rewritten for
  it, while the pane refreshes; median and worst of nine keys 0.37 s apart, and the UI thread's
  CPU time (median);
- peak RSS of the process.

``--json`` prints the figures as JSON after the table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AT = "2026-11-16T14:00Z"
KEYS = 9
KEY_SPACING_S = 0.37
TARGETS = {"tick_ms": 50.0, "key_ms": 100.0}


def log(message: str) -> None:
    print(f"[instances] {message}", file=sys.stderr, flush=True)


async def measure(nodes: int, seconds: float, settle: float) -> dict[str, object]:
    from keylat import KeyLatency, time_ticks

    from gpuconsole.cli.main import make_console, parse_args
    from gpuconsole.ui.app import GpuConsoleApp
    from gpuconsole.ui.widgets.live_table import LiveTable

    wall0, cpu0, thread0 = time.perf_counter(), time.process_time(), time.thread_time()
    console = make_console(parse_args(["--demo", "--no-db", "--demo-nodes", str(nodes), "--demo-at", AT]))
    app = GpuConsoleApp(console)  # as the command line runs it
    ticks = time_ticks(app)
    keys = KeyLatency(app)
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            keys.send("4")

            def loaded() -> bool:
                found = app.query("#instance-table")
                count = len(app.snapshot.instances)
                if not found or count < nodes:
                    return False
                table = found.first()
                return table.row_count == count and all(keys.on_screen(k) for k in table.shown_keys[:3])

            first = await keys.frame(loaded, (wall0, thread0))
            first_cpu = time.process_time() - cpu0
            pane = app.query_one("#instances-pane")
            table = pane.query_one("#instance-table", LiveTable)
            instances = app.snapshot.instances
            log(f"{len(instances):,} instances: first render {first.wall:.2f} s; settling {settle:g} s")
            await asyncio.sleep(settle)

            ticks.clear()
            w0, c0, t0 = time.perf_counter(), time.process_time(), time.thread_time()
            await asyncio.sleep(seconds)
            wall = time.perf_counter() - w0
            cpu = 100.0 * (time.process_time() - c0) / wall
            ui = 100.0 * (time.thread_time() - t0) / wall
            tick_list = list(ticks)
            log(f"{len(tick_list)} ticks, CPU {cpu:.0f}%; pressing keys")

            table.focus()
            await pilot.pause()
            times = await keys.walk_down(pane, table, KEYS, KEY_SPACING_S)
    finally:
        keys.close()
        console.close()
    return {"nodes": nodes, "instances": len(instances), "regions": dict(Counter(i.region for i in instances)),
            "first_s": first.wall, "first_cpu_s": first_cpu, "ticks": len(tick_list),
            "tick_ms": 1000 * statistics.median(tick_list) if tick_list else float("nan"),
            "tick_max_ms": 1000 * max(tick_list) if tick_list else float("nan"),
            "ui_percent": ui, "cpu_percent": cpu,
            "key_ms": 1000 * statistics.median(t.wall for t in times), "key_max_ms": 1000 * max(t.wall for t in times),
            "key_cpu_ms": 1000 * statistics.median(t.cpu for t in times),
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000, help="simulated nodes, one instance each (default 1000)")
    parser.add_argument("--seconds", type=float, default=15.0, help="seconds of 1 Hz refresh measured (default 15)")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds after the first render before measuring (default 3)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON after the table")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(measure(args.nodes, args.seconds, args.settle))))
        return 0
    out = subprocess.run([sys.executable, __file__, "--child", "--nodes", str(args.nodes), "--seconds", str(args.seconds),
                          "--settle", str(args.settle)], cwd=ROOT, capture_output=True, text=True, check=False,
                         timeout=args.seconds + args.settle + 600)
    if out.returncode != 0:
        print(out.stderr[-3000:], file=sys.stderr)
        return 1
    r = json.loads(out.stdout.strip().splitlines()[-1])
    regions = ", ".join(f"{n:,} in {region}" for region, n in sorted(r["regions"].items()))
    print(f"{r['instances']:,} instances ({regions}), --demo-nodes {r['nodes']}")
    print(f"{'figure':<40}{'measured':>14}   target")
    print(f"{'first render (wall / CPU)':<40}{r['first_s']:>7.2f} / {r['first_cpu_s']:.2f}s")
    print(f"{'tick: UI thread, median / worst':<40}{r['tick_ms']:>6.1f} / {r['tick_max_ms']:.1f}ms   <= {TARGETS['tick_ms']:g} ms")
    print(f"{'UI thread, % of one core':<40}{r['ui_percent']:>13.1f}%")
    print(f"{'whole process, % of one core':<40}{r['cpu_percent']:>13.1f}%")
    print(f"{'key → screen, median / worst':<40}{r['key_ms']:>6.0f} / {r['key_max_ms']:.0f}ms   <= {TARGETS['key_ms']:g} ms")
    print(f"{'  of which UI thread CPU':<40}{r['key_cpu_ms']:>12.0f}ms")
    print(f"{'peak RSS':<40}{r['rss_mb']:>12.0f}MB")
    if args.json:
        print(json.dumps(r, indent=2))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    sys.exit(main())
