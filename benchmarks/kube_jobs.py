"""10,000 Kubernetes jobs: list and first render, a filter keystroke, and peak memory.

    .venv/bin/python benchmarks/kube_jobs.py [--jobs N] [--runs K]

A Kubernetes API test server (the one the tests use, on 127.0.0.1, in a process of its own as a
real API server would be) holds N Jobs with a Pod each in one namespace. Each run starts a
fresh console watching that namespace, runs the app headless at 120×36 on the Jobs pane and
measures:

- list + first render: from building the Console to the first painted frame whose Jobs table
  holds every job (the lists, the watch set-up, mapping, composing and drawing);
- filter keystroke: from a key press in the filter field (sent as the terminal driver sends it)
  to the end of the first frame that shows the narrowed table: its row count, ``filter: …`` on
  the status line and the first rows' names on screen (``benchmarks/keylat.py``), median of
  several keys; the UI thread's CPU time over the same span beside it;
- the same keystroke timed with the Pilot (press, wait for the rows, pause), as before, and a
  key that changes nothing timed the same way (the Pilot's own cost per key);
- peak RSS of the console's process.

``--json`` prints the figures as JSON after the table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "benchmarks"))

from keylat import KeyLatency

from tests import kube_server as ks  # noqa: E402

FILTERS = ("train-0001", "train-0002", "train-0003", "train-000", "train-001")


def fill(server: ks.KubeApiServer, count: int) -> None:
    for n in range(count):
        job = server.add(ks.job(f"train-{n:05d}", "ml", gpus=1 + n % 8, state="running" if n % 3 else "complete"))
        server.add(ks.pod_for(job, node=f"gpu-node-{n % 64}"))


def serve(count: int, conn) -> None:  # noqa: ANN001 - a multiprocessing Connection
    """The API server's process: fill it, hand back its URL, serve until told to stop."""
    server = ks.KubeApiServer().start()
    t0 = time.perf_counter()
    fill(server, count)
    conn.send((server.url, time.perf_counter() - t0))
    conn.recv()
    server.stop()


async def one_run(kubeconfig: Path, count: int) -> dict[str, float]:
    import os

    os.environ["KUBECONFIG"] = str(kubeconfig)
    from gpuconsole.core.fleet.console import Console, ConsoleOptions
    from gpuconsole.core.fleet.sources import SourceOptions
    from gpuconsole.ui.app import GpuConsoleApp
    from gpuconsole.ui.panes.base import FilterInput
    from gpuconsole.ui.widgets.virtual_table import VirtualTable

    t0 = time.perf_counter()
    console = Console(ConsoleOptions(sources=SourceOptions(jobs="kube", gpus="off", cloud="off", namespaces=("ml",)),
                                     timeout=30))
    app = GpuConsoleApp(console)  # as the command line runs it
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.press("3")
            table = None
            while True:
                await asyncio.sleep(0.01)
                if time.perf_counter() - t0 > 120:
                    raise RuntimeError("the jobs did not all show within 2 minutes")
                try:
                    table = app.query_one("#job-table", VirtualTable)
                except Exception:  # noqa: BLE001 - the pane mounts lazily
                    continue
                if table.row_count >= count:
                    break
            await pilot.pause()
            first = time.perf_counter() - t0
            await pilot.press("slash")
            await pilot.pause()
            field = app.query_one("#jobs-pane").query_one(FilterInput)
            pane = app.query_one("#jobs-pane")
            pilot_keys = []
            for text in FILTERS:
                field.value = text[:-1]
                field.cursor_position = len(field.value)
                await pilot.pause()
                before = table.row_count
                k0 = time.perf_counter()
                await pilot.press(text[-1])
                while table.row_count == before:
                    await asyncio.sleep(0.001)
                await pilot.pause()
                pilot_keys.append(time.perf_counter() - k0)
            keys = await KeyLatency.attach(app)
            try:
                precise = []
                for text in FILTERS:
                    precise.append(await keys.type_filter(pilot, field, table, text, lambda k: pane.jobs.by_key[k].name))
            finally:
                keys.close()
            idle = []
            for _ in range(5):
                k0 = time.perf_counter()
                await pilot.press("right")  # moves the caret in the field: nothing to filter
                await pilot.pause()
                idle.append(time.perf_counter() - k0)
            return {"first": first, "key": statistics.median(t.wall for t in precise),
                    "key_cpu": statistics.median(t.cpu for t in precise),
                    "pilot": statistics.median(pilot_keys), "idle": statistics.median(idle)}
    finally:
        console.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON after the table")
    args = parser.parse_args()
    ours, theirs = multiprocessing.Pipe()
    server = multiprocessing.get_context("spawn").Process(target=serve, args=(args.jobs, theirs), daemon=True)
    server.start()
    try:
        url, took = ours.recv()
        print(f"server holds {args.jobs:,} jobs and pods ({took:.1f} s to create)")
        with tempfile.TemporaryDirectory() as tmp:
            kubeconfig = ks.write_kubeconfig(Path(tmp) / "config", url)
            runs = [asyncio.run(one_run(kubeconfig, args.jobs)) for _ in range(args.runs)]
    finally:
        ours.send("stop")
        server.join(10)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    figures = {name: statistics.median(r[name] for r in runs) for name in runs[0]}
    print(f"{'figure':<38}{'median':>10}   target")
    print(f"{'list + first render':<38}{figures['first']:>9.2f}s   <= 2 s")
    print(f"{'filter keystroke → screen':<38}{figures['key'] * 1000:>8.0f}ms   <= 100 ms")
    print(f"{'  of which UI thread CPU':<38}{figures['key_cpu'] * 1000:>8.0f}ms")
    print(f"{'filter keystroke (Pilot)':<38}{figures['pilot'] * 1000:>8.0f}ms")
    print(f"{'  Pilot, a key that changes nothing':<38}{figures['idle'] * 1000:>8.0f}ms")
    print(f"{'peak RSS of the console':<38}{peak_mb:>8.0f}MB   <= 250 MB")
    if args.json:
        print(json.dumps({"jobs": args.jobs, "runs": args.runs, **figures, "peak_rss_mb": peak_mb}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
