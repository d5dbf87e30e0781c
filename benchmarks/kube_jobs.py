"""10,000 Kubernetes jobs: list and first render, a filter keystroke, and peak memory.

    .venv/bin/python benchmarks/kube_jobs.py [--jobs N] [--runs K]

A Kubernetes API test server (the one the tests use, on 127.0.0.1) holds N Jobs with a Pod
each in one namespace. Each run starts a fresh process-local console watching that namespace,
runs the app headless at 120×36 on the Jobs pane and measures:

- list + first render: from building the Console to the first painted frame whose Jobs table
  holds every job (the lists, the watch set-up, mapping, composing and drawing);
- filter keystroke: from a key press in the filter field to the frame with the narrowed table
  (median of several keys);
- peak RSS of the process (the server included, which holds the objects as JSON too).
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests import kube_server as ks  # noqa: E402


def fill(server: ks.KubeApiServer, count: int) -> None:
    for n in range(count):
        job = server.add(ks.job(f"train-{n:05d}", "ml", gpus=1 + n % 8, state="running" if n % 3 else "complete"))
        server.add(ks.pod_for(job, node=f"gpu-node-{n % 64}"))


async def one_run(kubeconfig: Path, count: int) -> dict[str, float]:
    import os

    os.environ["KUBECONFIG"] = str(kubeconfig)
    from gpuconsole.core.console import Console, ConsoleOptions
    from gpuconsole.core.sources import SourceOptions
    from gpuconsole.ui.app import GpuConsoleApp
    from gpuconsole.ui.panes.base import FilterInput
    from gpuconsole.ui.widgets.live_table import LiveTable

    t0 = time.perf_counter()
    console = Console(ConsoleOptions(sources=SourceOptions(jobs="kube", gpus="off", cloud="off", namespaces=("ml",)),
                                     timeout=30))
    app = GpuConsoleApp(console)
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.press("3")
            table = None
            while True:
                await asyncio.sleep(0.01)
                try:
                    table = app.query_one("#job-table", LiveTable)
                except Exception:  # noqa: BLE001 - the pane mounts lazily
                    continue
                if len(table.shown_keys) >= count:
                    break
                if time.perf_counter() - t0 > 120:
                    raise RuntimeError("the jobs did not all show within 2 minutes")
            await pilot.pause()
            first = time.perf_counter() - t0
            await pilot.press("slash")
            await pilot.pause()
            field = app.query_one("#jobs-pane").query_one(FilterInput)
            keys = []
            for text in ("train-0001", "train-0002", "train-0003", "train-000", "train-001"):
                field.value = text[:-1]
                await pilot.pause()
                before = len(table.shown_keys)
                k0 = time.perf_counter()
                await pilot.press(text[-1])
                while len(table.shown_keys) == before:
                    await asyncio.sleep(0.001)
                await pilot.pause()
                keys.append(time.perf_counter() - k0)
            return {"first": first, "key": statistics.median(keys)}
    finally:
        console.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    server = ks.KubeApiServer().start()
    try:
        t0 = time.perf_counter()
        fill(server, args.jobs)
        print(f"server holds {args.jobs:,} jobs and pods ({time.perf_counter() - t0:.1f} s to create)")
        with tempfile.TemporaryDirectory() as tmp:
            kubeconfig = ks.write_kubeconfig(Path(tmp) / "config", server.url)
            runs = [asyncio.run(one_run(kubeconfig, args.jobs)) for _ in range(args.runs)]
    finally:
        server.stop()
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    first = statistics.median(r["first"] for r in runs)
    key = statistics.median(r["key"] for r in runs)
    print(f"{'figure':<34}{'median':>10}   target")
    print(f"{'list + first render':<34}{first:>9.2f}s   <= 2 s")
    print(f"{'filter keystroke':<34}{key * 1000:>8.0f}ms   <= 100 ms")
    print(f"{'peak RSS (console + test server)':<34}{peak_mb:>8.0f}MB   <= 250 MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
