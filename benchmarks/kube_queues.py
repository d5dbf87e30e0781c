"""10,000 Kueue Workloads across 50 queues against 10,000 plain jobs: list and first render.

    .venv/bin/python benchmarks/kube_queues.py [--jobs N] [--queues Q] [--runs K]

Two Kubernetes API test servers (the tests' server, each in a process of its own as a real API
server would be) hold N Jobs in one namespace: the first plain Jobs with a Pod each, the second
the same Jobs queued by Kueue (``kueue.x-k8s.io`` served): Q ClusterQueues and their LocalQueues,
a Workload per Job, a third of them waiting on quota (suspended, no pod), the rest admitted and
running. Each run starts a fresh console watching the namespace, headless at 120×36 on the Jobs
pane, and times from building the Console to the first painted frame whose Jobs table holds
every job, on one server then the other, in the same run. Target: the queued cluster within
1.5× the plain one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests import kube_queues as kq  # noqa: E402
from tests import kube_server as ks  # noqa: E402


def fill(server: ks.KubeApiServer, count: int, queues: int, queued: bool) -> None:
    if queued:
        server.kueue = "v1beta2"
        for q in range(queues):
            server.add(kq.cluster_queue(f"team-{q:02d}", gpus=64, cohort="research", borrowing=16, used=64,
                                        pending=count // queues // 3, admitted=count // queues))
            server.add(kq.local_queue(f"team-{q:02d}", "ml", f"team-{q:02d}"))
    for n in range(count):
        spec = ks.job(f"train-{n:05d}", "ml", gpus=1 + n % 8, state="running")
        if not queued:
            job = server.add(spec)
            server.add(ks.pod_for(job, node=f"gpu-node-{n % 64}"))
            continue
        queue = f"team-{n % queues:02d}"
        if n % 3 == 0:
            job = server.add(kq.queued(spec, queue))
            server.add(kq.workload(job, queue, created=1_700_000_000 + n))
        else:
            spec["metadata"]["labels"][kq.QUEUE_LABEL] = queue
            job = server.add(spec)
            server.add(kq.workload(job, queue, state="admitted", cluster=queue))
            server.add(ks.pod_for(job, node=f"gpu-node-{n % 64}"))


def serve(count: int, queues: int, queued: bool, conn) -> None:  # noqa: ANN001 - a multiprocessing Connection
    server = ks.KubeApiServer().start()
    fill(server, count, queues, queued)
    conn.send(server.url)
    conn.recv()
    server.stop()


async def first_render(kubeconfig: Path, count: int) -> float:
    import os

    os.environ["KUBECONFIG"] = str(kubeconfig)
    from gpuconsole.core.fleet.console import Console, ConsoleOptions
    from gpuconsole.core.fleet.sources import SourceOptions
    from gpuconsole.ui.app import GpuConsoleApp
    from gpuconsole.ui.widgets.virtual_table import VirtualTable

    t0 = time.perf_counter()
    console = Console(ConsoleOptions(sources=SourceOptions(jobs="kube", gpus="off", cloud="off", namespaces=("ml",)),
                                     timeout=30))
    app = GpuConsoleApp(console)
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.press("3")
            while True:
                await asyncio.sleep(0.01)
                if time.perf_counter() - t0 > 180:
                    raise RuntimeError("the jobs did not all show within 3 minutes")
                try:
                    table = app.query_one("#job-table", VirtualTable)
                except Exception:  # noqa: BLE001 - the pane mounts lazily
                    continue
                if table.row_count >= count:
                    break
            await pilot.pause()
            return time.perf_counter() - t0
    finally:
        console.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--queues", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    import gpuconsole.backends.kube.source  # noqa: F401 - imported before either run is timed
    import gpuconsole.ui.app  # noqa: F401

    spawn = multiprocessing.get_context("spawn")
    ends, servers, urls = [], [], []
    for queued in (False, True):
        ours, theirs = multiprocessing.Pipe()
        process = spawn.Process(target=serve, args=(args.jobs, args.queues, queued, theirs), daemon=True)
        process.start()
        ends.append(ours)
        servers.append(process)
    try:
        urls = [end.recv() for end in ends]
        times: dict[str, list[float]] = {"plain": [], "queued": []}
        with tempfile.TemporaryDirectory() as tmp:
            configs = [ks.write_kubeconfig(Path(tmp) / name, url) for name, url in zip(("plain", "queued"), urls)]
            for _ in range(args.runs):
                for name, config in zip(("plain", "queued"), configs):
                    times[name].append(asyncio.run(first_render(config, args.jobs)))
    finally:
        for end in ends:
            end.send("stop")
        for process in servers:
            process.join(10)
    plain, queued = statistics.median(times["plain"]), statistics.median(times["queued"])
    print(f"{'list + first render':<44}{'median':>10}")
    print(f"{f'{args.jobs:,} plain jobs':<44}{plain:>9.2f}s")
    print(f"{f'{args.jobs:,} Workloads across {args.queues} queues':<44}{queued:>9.2f}s")
    print(f"{'ratio (target <= 1.5)':<44}{queued / plain:>10.2f}")
    if args.json:
        print(json.dumps({"jobs": args.jobs, "queues": args.queues, "plain_s": plain, "queued_s": queued,
                          "ratio": queued / plain, "runs": times}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
