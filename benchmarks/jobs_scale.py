"""The Jobs pane at 1,000, 10,000 and 100,000 jobs of the simulated world, as one table.

    .venv/bin/python benchmarks/jobs_scale.py                  # 1k, 10k and 100k jobs
    .venv/bin/python benchmarks/jobs_scale.py --jobs 10000 --seconds 5

Each size runs in a child process of its own (so peak memory is its own): the demo
(``--demo --no-db --demo-jobs N --demo-at 2026-11-16T14:00Z``, the default fleet and about N
jobs, nearly all of them static history) headless at 120×36, switched to the Jobs pane at once.
Measured:

- world: building the simulated world with its N jobs (part of the load);
- load + first render: from building the Console to the end of the first frame in which the Jobs
  table holds every job and its first rows' names are on screen (``benchmarks/keylat.py`` hooks
  the frames); wall time, and the process's CPU time beside it;
- filter keystroke: the last letter of a filter word typed into the ``/`` field, sent as the
  terminal driver sends it, to the end of the first frame that shows the narrowed table (its
  row count, ``filter: …`` and the first rows' names); median over five words, wall and the UI
  thread's CPU time;
- re-order: the Jobs pane has no sort key (its order is fixed: pending, running, suspended,
  failed, succeeded, newest first). What exists is that order re-applied to every new jobs
  reading, once a second: the time the pane's row index takes to order a new reading of N jobs
  (CPU time of the UI thread, median of five);
- tick: the UI thread's time to take in one snapshot on the Jobs pane (median and worst) and the
  process's CPU, percent of one core, over ``--seconds`` at the default 1 s interval;
- peak RSS of the process.

``--json`` prints the rows as JSON after the table.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIZES = (1_000, 10_000, 100_000)
AT = "2026-11-16T14:00Z"
WORDS = ("bert", "yolo", "failed", "team-vision", "whisper")
TARGETS = {10_000: {"load_s": 1.0, "key_ms": 50.0}, 100_000: {"rss_mb": 300.0}}


def log(message: str) -> None:
    print(f"[jobs] {message}", file=sys.stderr, flush=True)


async def measure(count: int, seconds: float, settle: float) -> dict[str, float]:
    from keylat import KeyLatency, time_ticks

    from gpuconsole.cli.main import make_console, parse_args
    from gpuconsole.ui.app import GpuConsoleApp
    from gpuconsole.ui.panes.base import FilterInput
    from gpuconsole.ui.widgets.virtual_table import VirtualTable

    wall0, cpu0, thread0 = time.perf_counter(), time.process_time(), time.thread_time()
    console = make_console(parse_args(["--demo", "--no-db", "--demo-jobs", str(count), "--demo-at", AT]))
    world = time.perf_counter() - wall0
    app = GpuConsoleApp(console)  # as the command line runs it
    ticks = time_ticks(app)
    keys = KeyLatency(app)
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            keys.send("3")

            def loaded() -> bool:
                pane = app.query("#jobs-pane")
                if not pane or not pane.first().query("#job-table"):
                    return False
                index = pane.first().jobs
                table = pane.first().query_one("#job-table", VirtualTable)
                roles = len(pane.first().roles.rows)  # a distributed job's roles: rows under it
                if table.row_count < 0.99 * count or table.row_count != len(index.by_key) + roles:
                    return False
                return all(keys.on_screen(index.by_key[k].name[:20]) for k in table._keys[:3] if k in index.by_key)

            first = await keys.frame(loaded, (wall0, thread0))
            load_cpu = time.process_time() - cpu0
            pane = app.query_one("#jobs-pane")
            table = pane.query_one("#job-table", VirtualTable)
            log(f"{count:,} jobs: first render {first.wall:.2f} s ({table.row_count:,} rows); settling {settle:g} s")
            await asyncio.sleep(settle)

            ticks.clear()
            w0, c0 = time.perf_counter(), time.process_time()
            await asyncio.sleep(seconds)
            cpu = 100.0 * (time.process_time() - c0) / (time.perf_counter() - w0)
            tick_list = list(ticks)

            reorder = []
            for _ in range(5):
                items = tuple(iter(app.snapshot.jobs))  # a new tuple: the index orders it afresh
                t0 = time.thread_time()
                pane.jobs.update(items)
                pane.jobs.keys(pane.filter_text)
                reorder.append(time.thread_time() - t0)

            keys.send("slash")
            field = pane.query_one(FilterInput)
            while not field.has_focus:
                await asyncio.sleep(0.01)
            filtered = []
            for word in WORDS:
                try:
                    filtered.append(await keys.type_filter(pilot, field, table, word, lambda k: pane.jobs.by_key[k].name if k in pane.jobs.by_key else k,
                                                           settle=0.1, timeout=5))
                except TimeoutError:
                    log(keys.text())
                    log(repr(field.value) + repr(table._keys[:3]) + repr([pane.jobs.by_key[k].name for k in table._keys[:3] if k in pane.jobs.by_key]))
                    raise
                if abs(table.row_count - len(pane.jobs.keys(word))) > 5:
                    raise AssertionError(f"filter {word!r}: {table.row_count} rows shown")
    finally:
        keys.close()
        console.close()
    return {"jobs": len(app.snapshot.jobs), "world_s": world, "load_s": first.wall, "load_cpu_s": load_cpu,
            "key_ms": 1000 * statistics.median(k.wall for k in filtered),
            "key_cpu_ms": 1000 * statistics.median(k.cpu for k in filtered),
            "reorder_ms": 1000 * statistics.median(reorder),
            "tick_ms": 1000 * statistics.median(tick_list) if tick_list else float("nan"),
            "tick_max_ms": 1000 * max(tick_list) if tick_list else float("nan"),
            "cpu_percent": cpu, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def met(size: int, row: dict[str, float]) -> str:
    targets = TARGETS.get(size)
    if not targets:
        return ""
    words = {"load_s": "load ≤ {:g} s", "key_ms": "key ≤ {:g} ms", "rss_mb": "RSS ≤ {:g} MB"}
    parts = [f"{words[k].format(v)}: {'met' if row[k] <= v else 'NOT met'}" for k, v in targets.items()]
    return " · ".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, action="append", help="jobs listed (repeatable; default 1000, 10000, 100000)")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds of 1 Hz refresh measured per size (default 10)")
    parser.add_argument("--settle", type=float, default=2.0, help="seconds after the first render before measuring (default 2)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON after the table")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(asyncio.run(measure(args.child, args.seconds, args.settle))))
        return 0
    rows = []
    for size in args.jobs or SIZES:
        out = subprocess.run([sys.executable, __file__, "--child", str(size), "--seconds", str(args.seconds),
                              "--settle", str(args.settle)], cwd=ROOT, capture_output=True, text=True, check=False,
                             timeout=args.seconds + args.settle + 600)
        if out.returncode != 0:
            print(out.stderr[-3000:], file=sys.stderr)
            return 1
        row = json.loads(out.stdout.strip().splitlines()[-1])
        row["size"] = size
        row["targets"] = met(size, row)
        rows.append(row)
    print(f"{'jobs':>8} {'world':>7} {'load+1st frame':>15} {'(CPU)':>7} {'filter key':>11} {'(UI CPU)':>9}"
          f" {'re-order':>9} {'tick med/worst':>15} {'CPU %':>6} {'peak RSS':>9}   targets")
    for r in rows:
        print(f"{r['jobs']:>8,} {r['world_s']:>6.2f}s {r['load_s']:>14.2f}s {r['load_cpu_s']:>6.2f}s"
              f" {r['key_ms']:>9.0f}ms {r['key_cpu_ms']:>7.0f}ms {r['reorder_ms']:>7.0f}ms"
              f" {r['tick_ms']:>6.0f}/{r['tick_max_ms']:>4.0f} ms {r['cpu_percent']:>5.1f}% {r['rss_mb']:>7.0f}MB   {r['targets']}")
    if args.json:
        print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    sys.exit(main())
