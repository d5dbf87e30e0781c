"""GPU history in the Store: ingest rate, 30 days of 64 GPUs on disk, and chart reads and draws.

    .venv/bin/python benchmarks/history.py [--runs N] [--setup-runs K] [--json]

Prints one table of medians:

- ingest: samples per second into a fresh Store at 64 and 1,024 GPUs per tick, one
  transaction per tick (``Store.record_gpus``), and the per-tick time; ``maintain`` (minute and
  hour rollups and retention, called once a minute by the console) timed on its own after a
  minute of ticks;
- 30 days: the time to set up 30 simulated days of 1 Hz samples of 64 GPUs
  (``gpuconsole.core.fleet.history_fill.fill_history``: minute rollups written a day at a time with
  ``maintain`` after each, the last hour through ``record_gpus``), and the file size with the
  WAL checkpointed, rollups and retention applied;
- reads: ``Store.gpu_history`` of one GPU over 5 minutes, 1 hour, 24 hours, 7 and 30 days
  (each picks its resolution), and the 24-hour chart drawn: read, then the four sparklines
  of the GPU detail view (utilization, memory, temperature, power; Textual's ``Sparkline``,
  100 cells wide) rendered on their own, and set and painted in a headless app (next to the
  time that app takes to paint the same frame with nothing changed: the harness's share).

``--json`` prints the same figures as numbers after the table.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpuconsole.core.fleet.history_fill import fill_history  # noqa: E402
from gpuconsole.core.fleet.store import Store  # noqa: E402
from gpuconsole.model import Gpu, GpuSample  # noqa: E402

END = 1_764_460_800  # 2025-11-30 00:00 UTC: any hour boundary does
DAY = 86400
SPANS = {"5 min": 300, "1 h": 3600, "24 h": DAY, "7 d": 7 * DAY, "30 d": 30 * DAY}


def fleet(n: int, tick: int) -> list[Gpu]:
    return [
        Gpu(f"GPU-bench-{g:05d}", f"node-{g // 8}", g % 8, "NVIDIA H100 80GB HBM3", float((g + tick) % 100),
            20000 + g, 81920, 40 + (g + tick) % 40, 300.0 + (g * 7 + tick) % 400, 700.0)
        for g in range(n)
    ]


def ingest(n: int, ticks: int) -> tuple[float, float, float]:
    """(samples/s, ms per tick, ms per maintain) for ``ticks`` ticks of ``n`` GPUs."""
    readings = [fleet(n, t) for t in range(60)]
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "ingest.db") as store:
        store.record_gpus(readings[0], END - 1)  # ids assigned, as on every tick but the first
        times, maintains = [], []
        for t in range(ticks):
            t0 = time.perf_counter()
            store.record_gpus(readings[t % 60], END + t)
            times.append(time.perf_counter() - t0)
            if (t + 1) % 60 == 0:
                t0 = time.perf_counter()
                store.maintain(END + t + 1 + 15)
                maintains.append(time.perf_counter() - t0)
    return n * ticks / sum(times), 1000 * statistics.median(times), 1000 * statistics.median(maintains or [0.0])


def setup_month(path: Path) -> tuple[float, float, list[str]]:
    """(seconds, MB on disk) of filling 30 days of 64 GPUs into a fresh file."""
    t0 = time.perf_counter()
    with Store(path) as store:
        uuids = fill_history(store, gpus=64, days=30, end=END)
        store.checkpoint()
    seconds = time.perf_counter() - t0
    size = sum(p.stat().st_size for p in path.parent.iterdir() if p.name.startswith(path.name))
    return seconds, size / 1e6, uuids


def median_ms(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


GETTERS: list[Callable[[GpuSample], float]] = [
    lambda s: s.utilization, lambda s: s.memory_used_mib, lambda s: s.temperature_c, lambda s: s.power_w
]


def render_ms(store: Store, uuids: list[str], runs: int) -> float:
    """Median ms to read a 24-hour history and render it as four 100-cell sparklines (no app)."""
    from rich.console import Console
    from textual.renderables.sparkline import Sparkline

    console = Console(file=io.StringIO(), width=100, color_system="truecolor")

    def once() -> None:
        samples = store.gpu_history(uuids[3], END - DAY, END)
        for get in GETTERS:
            console.print(Sparkline([float(get(s)) for s in samples], width=100))

    return median_ms(once, runs)


async def draw_ms(store: Store, uuids: list[str], runs: int) -> tuple[float, float]:
    """Median ms to read a 24-hour history, set four sparklines and paint the frame in a headless
    app; and the same frame painted with nothing changed (the harness's own cost)."""
    from textual.app import App, ComposeResult
    from textual.widgets import Sparkline

    class Chart(App[None]):
        CSS = "Sparkline { width: 100; height: 1; }"

        def compose(self) -> ComposeResult:
            for _ in GETTERS:
                yield Sparkline([])

    app = Chart()
    times: dict[bool, list[float]] = {True: [], False: []}
    async with app.run_test(size=(120, 10)) as pilot:
        sparks = list(app.query(Sparkline))
        await pilot.pause()
        for run in range(2 * runs):
            change = run % 2 == 0
            t0 = time.perf_counter()
            if change:
                samples = store.gpu_history(uuids[run % len(uuids)], END - DAY, END)
                for spark, get in zip(sparks, GETTERS, strict=True):
                    spark.data = [float(get(s)) for s in samples]
            await pilot.pause()
            app.screen._compositor.render_update(full=True)  # the frame, painted in full
            times[change].append(time.perf_counter() - t0)
    return 1000 * statistics.median(times[True]), 1000 * statistics.median(times[False])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="ingest runs, and reads per span x 4 (default 5)")
    parser.add_argument("--setup-runs", type=int, default=3, help="30-day set-ups, about 30 s each (default 3)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON after the table")
    args = parser.parse_args()

    rows: list[tuple[str, str]] = []
    figures: dict[str, float] = {}
    for n, ticks in ((64, 600), (1024, 120)):
        results = [ingest(n, ticks) for _ in range(args.runs)]
        rate, tick, maintain = (statistics.median(r[i] for r in results) for i in range(3))
        rows += [
            (f"ingest, {n:,} GPUs per tick", f"{rate:,.0f} samples/s ({tick:.2f} ms per tick)"),
            (f"maintain, {n:,} GPUs (once a minute)", f"{maintain:.1f} ms"),
        ]
        figures |= {f"ingest_{n}_samples_per_s": rate, f"ingest_{n}_tick_ms": tick, f"maintain_{n}_ms": maintain}

    with tempfile.TemporaryDirectory() as tmp:
        setups = [setup_month(Path(tmp) / f"month-{k}" / "gpuconsole.db") for k in range(args.setup_runs)]
        rows.append(("30 days x 64 GPUs: set-up", f"{statistics.median(s[0] for s in setups):.1f} s"))
        rows.append(("30 days x 64 GPUs: on disk", f"{statistics.median(s[1] for s in setups):.1f} MB"))
        figures |= {"month_setup_s": statistics.median(s[0] for s in setups),
                    "month_on_disk_mb": statistics.median(s[1] for s in setups)}
        path, uuids = Path(tmp) / "month-0" / "gpuconsole.db", setups[0][2]
        with Store(path) as store:
            for label, span in SPANS.items():
                points = len(store.gpu_history(uuids[0], END - span, END))
                ms = median_ms(lambda span=span: store.gpu_history(uuids[7], END - span, END), 4 * args.runs + 1)
                rows.append((f"read {label} ({points:,} points)", f"{ms:.1f} ms"))
                figures[f"read_{label.replace(' ', '')}_ms"] = ms
            chart = render_ms(store, uuids, 4 * args.runs + 1)
            rows.append(("24 h chart: read + render 4 sparklines", f"{chart:.1f} ms"))
            draw, floor = asyncio.run(draw_ms(store, uuids, 4 * args.runs + 1))
            figures |= {"chart_24h_ms": chart, "chart_24h_app_ms": draw, "chart_24h_app_unchanged_ms": floor}
            note = f"{draw:.1f} ms ({floor:.1f} ms to paint the same frame unchanged)"
            rows.append(("24 h chart: read + set + paint, headless app", note))

    width = max(len(label) for label, _ in rows)
    print(f"{'figure':<{width}}  median of runs")
    for label, value in rows:
        print(f"{label:<{width}}  {value}")
    if args.json:
        print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
