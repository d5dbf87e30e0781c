"""Fleet mode against a real Prometheus: the simulated fleet's DCGM exporter, scraped every second
by a Prometheus server this module starts on 127.0.0.1, read by the console's Prometheus source.

The simulated world runs on a frozen clock, so what the exporter serves changes only when a test
moves the clock; the GPUs pane must then show the simulator's values once Prometheus has scraped
them. Jobs and instances come from the same world, so the pane's line can join each GPU's pod to
its job and its instance's price. A proxy between the console and Prometheus fails on demand.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest

from gpuconsole.backends.prometheus.source import PrometheusGpus, PrometheusSettings
from gpuconsole.cli.metrics_server import MetricsServer, sim_metrics
from gpuconsole.core.fleet.hub import PollPolicy
from gpuconsole.model import Gpu, Job, SourceKind, SourceState
from gpuconsole.ui.app import GpuConsoleApp
from gpuconsole.ui.panes.gpus import gib_pair
from gpuconsole.ui.widgets.virtual_table import VirtualTable
from tests.helpers import FrozenClock, demo_console, wait_until
from tests.prometheus_peer import FaultProxy, PrometheusProcess, find_prometheus
from tests.driving import pane_text

BINARY = find_prometheus()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.peer,
    pytest.mark.skipif(BINARY is None, reason="no prometheus binary: install Debian's prometheus package "
                                              "(.ci/run does) to run the fleet-mode tests against a real server"),
]
SIZE = (160, 48)
WAIT = 60.0  # generous: a loaded CI machine; nothing here asserts on how long anything takes


class _Current:
    """The world the module's exporter serves (each test's console has its own)."""

    metrics = None

    def __call__(self) -> str:
        if self.metrics is None:
            return ""
        return self.metrics()


@dataclass
class Server:
    prometheus: PrometheusProcess
    current: _Current


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    current = _Current()
    exporter = MetricsServer(current).start()
    prometheus = PrometheusProcess(BINARY, tmp_path_factory.mktemp("prometheus"), [f"127.0.0.1:{exporter.port}"])
    try:
        yield Server(prometheus, current)
    finally:
        prometheus.stop()
        exporter.stop()


@dataclass
class Fleet:
    console: object
    clock: FrozenClock
    sim: object
    proxy: FaultProxy

    def gpus(self) -> tuple[Gpu, ...]:
        return self.sim.act(lambda w: w.gpu_reading().gpus)

    def jobs(self) -> tuple[Job, ...]:
        return self.sim.act(lambda w: w.jobs_reading().jobs)


@asynccontextmanager
async def fleet_app(server: Server):
    """A demo console whose GPU source is the Prometheus that scrapes its own world."""
    clock = FrozenClock()
    console = demo_console(clock=clock, interval=0.25, timeout=1.0)
    sim = console.hub.runners[SourceKind.GPUS].source.sim
    server.current.metrics = sim_metrics(sim)
    fleet = Fleet(console, clock, sim, FaultProxy(server.prometheus.url))
    series = sum(1 + len(g.mig_slices) for g in fleet.gpus())
    server.prometheus.wait_for("count(DCGM_FI_DEV_FB_USED)",
                               lambda r: bool(r) and int(float(r[0]["value"][1])) == series, WAIT)
    await_scrape_of(server, fleet)
    source = PrometheusGpus(PrometheusSettings(fleet.proxy.url, timeout=5.0))
    console.hub.replace(SourceKind.GPUS, source, PollPolicy(interval=0.25, timeout=1.0, max_backoff=2.0))
    app = GpuConsoleApp(console)
    try:
        async with app.run_test(size=SIZE) as pilot:
            yield app, pilot, fleet
    finally:
        console.close()
        fleet.proxy.stop()
        server.current.metrics = None


def await_scrape_of(server: Server, fleet: Fleet) -> None:
    """Until Prometheus holds the world's present temperatures (a scrape since it last moved)."""
    want = {g.uuid: float(g.temperature_c) for g in fleet.gpus()}
    server.prometheus.wait_for(
        "DCGM_FI_DEV_GPU_TEMP",
        lambda r: {s["metric"].get("UUID"): float(s["value"][1]) for s in r} == want, WAIT)


def table(app) -> VirtualTable:
    return app.query_one("#gpu-table", VirtualTable)


def cell(app, key: str, column: str) -> str:
    return str(table(app).get_cell(key, column))


def shows_the_simulator(app, fleet: Fleet) -> bool:
    """Every GPU and MIG instance of the world is a row, with the simulator's values."""
    expected = fleet.gpus()
    keys = set(table(app).shown_keys)
    want = {g.uuid for g in expected} | {f"{g.uuid}/MIG-{g.uuid}/{s.gi_id}/0" for g in expected for s in g.mig_slices}
    if keys != want:
        return False
    shown = {g.uuid: g for g in app.snapshot.gpus}
    for gpu in expected:
        got = shown.get(gpu.uuid)
        if got is None:
            return False
        if (got.utilization, got.memory_used_mib, got.memory_total_mib, got.temperature_c, got.power_w) != (
                gpu.utilization, gpu.memory_used_mib, gpu.memory_total_mib, gpu.temperature_c, gpu.power_w):
            return False
        if f"{gpu.utilization:4.0f}%" not in cell(app, gpu.uuid, "util"):
            return False
        if cell(app, gpu.uuid, "temp") != f"{gpu.temperature_c}°" or cell(app, gpu.uuid, "memory") != gib_pair(
                gpu.memory_used_mib, gpu.memory_total_mib):
            return False
        for mig in gpu.mig_slices:
            key = f"{gpu.uuid}/MIG-{gpu.uuid}/{mig.gi_id}/0"
            if mig.profile not in cell(app, key, "model"):
                return False
            if cell(app, key, "memory") != gib_pair(mig.memory_used_mib, mig.memory_total_mib):
                return False
            if mig.utilization is not None and f"{mig.utilization:4.0f}%" not in cell(app, key, "util"):
                return False
    return True


async def select(app, pilot, key: str) -> None:
    t = table(app)
    t.move_cursor(row=t.shown_keys.index(key), animate=False)
    await pilot.pause()


def status(app):
    return app.snapshot.source(SourceKind.GPUS)


async def test_gpus_pane_shows_every_simulated_gpu_from_prometheus_with_its_job_and_price(server):
    async with fleet_app(server) as (app, pilot, fleet):
        await pilot.press("2")
        await wait_until(lambda: shows_the_simulator(app, fleet), WAIT)
        assert "GPU telemetry: prometheus 127.0.0.1:" in pane_text(app, "gpus")
        assert any(g.mig_slices for g in app.snapshot.gpus)
        assert all(g.processes == () for g in app.snapshot.gpus), "the exporter names pods, not processes"

        # Pod attribution, joined with the world's jobs and instances.
        jobs = {j.pod_uid: j for j in fleet.jobs() if j.pod_uid}
        held = next(g for g in fleet.gpus() if not g.mig_slices and g.processes and g.processes[0].pod_uid in jobs
                    and g.utilization >= 5)
        job = jobs[held.processes[0].pod_uid]
        shown = next(g for g in app.snapshot.gpus if g.uuid == held.uuid)
        assert (shown.pod, shown.namespace) == (job.pod, job.namespace)
        await select(app, pilot, held.uuid)
        await wait_until(lambda: f"held by job {job.name} of ns {job.namespace}, costing $" in pane_text(app, "gpus"))
        assert f"GPU {held.index} on " in pane_text(app, "gpus")

        mig_gpu = next(g for g in fleet.gpus() if any(s.pod_uid in jobs for s in g.mig_slices))
        mig = next(s for s in mig_gpu.mig_slices if s.pod_uid in jobs)
        await select(app, pilot, f"{mig_gpu.uuid}/MIG-{mig_gpu.uuid}/{mig.gi_id}/0")
        mig_job = jobs[mig.pod_uid]
        await wait_until(lambda: f"MIG {mig.profile} (GI {mig.gi_id}) of GPU {mig_gpu.index}" in pane_text(app, "gpus"))
        assert f"held by job {mig_job.name} of ns {mig_job.namespace}" in pane_text(app, "gpus")

        # The world moves on: the pane follows once Prometheus has scraped it.
        before = {g.uuid: g.utilization for g in fleet.gpus()}
        fleet.clock.advance(45)
        assert {g.uuid: g.utilization for g in fleet.gpus()} != before
        await wait_until(lambda: shows_the_simulator(app, fleet), WAIT)

        # Charts come from Prometheus's own range history of the GPU (the console's clock is
        # frozen in the past here, so the source is asked for the real last minutes directly).
        source = fleet.console.hub.runners[SourceKind.GPUS].source
        now = time.time()
        samples = await asyncio.to_thread(source.history, held.uuid, now - 600, now, 1.0)
        assert samples and all(0.0 <= s.utilization <= 100.0 for s in samples)
        assert samples[-1].temperature_c == held.temperature_c or len({s.temperature_c for s in samples}) > 1


async def test_prometheus_down_slow_or_failing_marks_the_source_and_recovers(server):
    async with fleet_app(server) as (app, pilot, fleet):
        await pilot.press("2")
        await wait_until(lambda: status(app).state is SourceState.LIVE and len(app.snapshot.gpus) > 0, WAIT)
        rows = len(table(app).shown_keys)

        for mode, state, words in [
            ("error", SourceState.ERROR, "unavailable: the storage is not ready"),
            ("down", SourceState.ERROR, "closed the connection"),
            ("slow", SourceState.STALE, "· stale for"),
        ]:
            fleet.proxy.set(mode)
            await wait_until(lambda state=state: status(app).state is state, WAIT)
            await pilot.press("2")
            await wait_until(lambda words=words: words in pane_text(app, "gpus"), WAIT)
            # The last data stays on screen, and the keys still answer.
            assert len(table(app).shown_keys) == rows
            await pilot.press("3")
            assert app.active_pane == "jobs"
            await pilot.press("2")
            assert app.active_pane == "gpus"
            fleet.proxy.set("pass")
            await pilot.press("r")
            await wait_until(lambda: status(app).state is SourceState.LIVE, WAIT)
            await wait_until(lambda: "GPU telemetry: prometheus" in pane_text(app, "gpus")
                             and " · live" in pane_text(app, "gpus"), WAIT)
        await wait_until(lambda: shows_the_simulator(app, fleet), WAIT)
