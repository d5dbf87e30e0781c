"""The NVML adapter against a fake NVML layer installed at the pynvml function level."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading

import pynvml
import pytest

from gpuconsole.backends.base import BackendError, BackendUnavailable
from gpuconsole.backends.nvml import source as nvml
from gpuconsole.backends.nvml.procs import parse_cgroup
from gpuconsole.backends.nvml.query import NA, mig_profile, query
from gpuconsole.backends.nvml.source import NvmlSource
from gpuconsole.backends.unconfigured import Unconfigured
from gpuconsole.core.fleet.hub import Hub, PollPolicy
from gpuconsole.core.fleet.sources import SourceOptions, build_sources
from gpuconsole.model import MigMode, SourceKind, SourceState
from tests.fake_nvml import (
    GONE_PID_BASE,
    FakeGpu,
    FakeNvml,
    FakeProcess,
    mig_gpu,
    standard_host,
)
from tests.helpers import wait_for

POD = "8dbc5577-d0e2-4706-8787-57d52c03ddf2"
CONTAINER = "0e5c0b5f" * 8


@pytest.fixture
def fake(monkeypatch) -> FakeNvml:
    return standard_host().install(monkeypatch)


@pytest.fixture
def source(fake):
    src = NvmlSource(node="gpu-host")
    yield src
    src.close()


def test_reads_every_field_of_a_whole_card(source):
    reading = source.poll_gpus()
    assert dict(reading.versions) == {"driver": "550.54.15", "cuda": "12.4", "nvml": "12.550.54.15"}
    h100 = reading.gpus[0]
    assert (h100.uuid, h100.index, h100.node, h100.name) == ("GPU-h100-0000", 0, "gpu-host", "NVIDIA H100 80GB HBM3")
    assert h100.pci_bus_id == "00000000:1B:00.0"
    assert (h100.utilization, h100.memory_utilization) == (87.0, 41.0)
    assert (h100.memory_used_mib, h100.memory_total_mib) == (40000, 81559)
    assert (h100.temperature_c, h100.power_w, h100.power_limit_w) == (61, 412.0, 700.0)
    assert (h100.sm_clock_mhz, h100.memory_clock_mhz, h100.fan_percent) == (1980, 2619, 0)
    assert (h100.pcie_rx_kbps, h100.pcie_tx_kbps, h100.ecc_volatile_errors) == (1200, 800, 0)
    assert h100.persistence_mode is True and h100.compute_mode == "default"
    assert h100.throttle_reasons == ("sw_power_cap",)
    assert h100.mig_mode is MigMode.DISABLED and h100.mig_pending is None
    assert h100.virtualization == "none" and h100.not_reported == ()


def test_not_supported_and_no_permission_read_as_na_per_device(source):
    reading = source.poll_gpus()
    t4 = reading.gpus[2]
    assert t4.not_reported == ("power_w",) and t4.power_w == 0.0
    assert t4.ecc_volatile_errors is None and t4.fan_percent is None
    assert (t4.pcie_rx_kbps, t4.pcie_tx_kbps) == (None, None)  # NoPermission
    assert t4.mig_mode is MigMode.NOT_SUPPORTED and t4.virtualization == "passthrough"
    # The same fields on the other boards are read normally.
    assert reading.gpus[0].ecc_volatile_errors == 0


def test_query_helper_turns_na_errors_into_na_and_logs_missing_functions_once(fake, caplog):
    fake.missing.add("nvmlDeviceGetFanSpeed")
    fake.initialised = 1
    gpu = fake.gpus[0]
    with caplog.at_level(logging.INFO, logger="gpuconsole.backends.nvml.query"):
        assert query("nvmlDeviceGetFanSpeed", gpu) is NA
        assert query("nvmlDeviceGetFanSpeed", gpu) is NA
    assert sum("nvmlDeviceGetFanSpeed" in r.message for r in caplog.records) == 1
    gpu.not_supported.add("nvmlDeviceGetTemperature")
    assert query("nvmlDeviceGetTemperature", gpu, 0) is NA
    assert str(NA) == "N/A" and not NA


def test_versioned_function_falls_back_once_to_the_older_driver_call(fake, source, caplog):
    fake.missing.add("nvmlDeviceGetCurrentClocksEventReasons")
    with caplog.at_level(logging.INFO, logger="gpuconsole.backends.nvml.query"):
        for _ in range(3):
            reading = source.poll_gpus()
    assert reading.gpus[0].throttle_reasons == ("sw_power_cap",)
    assert fake.calls["nvmlDeviceGetCurrentClocksEventReasons"] == 1
    assert sum("nvmlDeviceGetCurrentClocksEventReasons" in r.message for r in caplog.records) == 1


def test_nvml_starts_once_handles_are_fetched_once_and_close_shuts_down(fake, source):
    for _ in range(3):
        source.poll_gpus()
    assert fake.calls["nvmlInit"] == 1
    assert fake.calls["nvmlDeviceGetHandleByIndex"] == 3
    assert fake.calls["nvmlDeviceGetUUID"] == 3 + 4  # three GPUs and four MIG devices, once each
    source.close()
    assert fake.initialised == 0 and fake.calls["nvmlShutdown"] == 1
    source.close()
    assert fake.calls["nvmlShutdown"] == 1


def test_mig_topology_with_several_profiles(source):
    a100 = source.poll_gpus().gpus[1]
    assert a100.mig_mode is MigMode.ENABLED
    assert "utilization" in a100.not_reported
    profiles = [(s.profile, s.gi_id, s.ci_id, s.memory_total_mib) for s in a100.mig_slices]
    assert profiles == [("3g.40gb", 1, 0, 40192), ("2g.20gb", 2, 0, 19968), ("1c.2g.20gb", 5, 1, 19968),
                        ("1g.10gb", 9, 0, 9728)]
    assert all(s.uuid.startswith("MIG-") and s.gpu_uuid == a100.uuid for s in a100.mig_slices)
    by_profile = {s.profile: s for s in a100.mig_slices}
    assert by_profile["3g.40gb"].memory_used_mib == 20000 and by_profile["2g.20gb"].memory_used_mib == 0
    procs = {p.name: p for p in a100.processes}
    assert procs["infer"].mig_uuid == by_profile["3g.40gb"].uuid
    assert procs["notebook"].mig_uuid == by_profile["1g.10gb"].uuid
    assert procs["infer"].sm_utilization is None  # not per process under MIG


def test_pending_mig_mode_is_reported_until_reset(fake, source):
    fake.gpus[0].mig = (0, 1)
    assert source.poll_gpus().gpus[0].mig_pending is MigMode.ENABLED


def test_unsupported_fields_are_asked_once_until_the_mig_mode_changes(fake, source):
    for _ in range(3):
        source.poll_gpus()
    assert fake.calls["nvmlDeviceGetPowerUsage"] == 3 * 2 + 1  # two boards every poll; the T4 once
    a100 = fake.gpus[1]
    a100.mig, a100.migs = (0, 0), []
    a100.not_supported.discard("nvmlDeviceGetUtilizationRates")
    a100.util = (55, 20)
    gpu = source.poll_gpus().gpus[1]
    assert gpu.mig_mode is MigMode.DISABLED and gpu.mig_slices == ()
    assert source.poll_gpus().gpus[1].utilization == 55.0


@pytest.mark.parametrize(("mode", "word"), [
    (pynvml.NVML_GPU_VIRTUALIZATION_MODE_NONE, "none"),
    (pynvml.NVML_GPU_VIRTUALIZATION_MODE_PASSTHROUGH, "passthrough"),
    (pynvml.NVML_GPU_VIRTUALIZATION_MODE_VGPU, "vgpu"),
    (pynvml.NVML_GPU_VIRTUALIZATION_MODE_HOST_VSGA, "host_vsga"),
])
def test_virtualization_modes(monkeypatch, mode, word):
    FakeNvml([FakeGpu("GPU-v", virtualization=mode)]).install(monkeypatch)
    src = NvmlSource()
    gpu = src.poll_gpus().gpus[0]
    src.close()
    assert gpu.virtualization == word and gpu.vgpu_instances == ()


def test_vgpu_host_lists_its_active_vgpus(monkeypatch):
    host = FakeGpu("GPU-host", virtualization=pynvml.NVML_GPU_VIRTUALIZATION_MODE_HOST_VGPU,
                   vgpus=[(7, "GRID A100-4C", "vm-42", 3000), (8, "GRID A100-8C", "vm-43", 100)])
    FakeNvml([host]).install(monkeypatch)
    src = NvmlSource()
    gpu = src.poll_gpus().gpus[0]
    src.close()
    assert gpu.virtualization == "host_vgpu"
    assert [(v.vgpu_id, v.type_name, v.vm_id, v.memory_used_mib) for v in gpu.vgpu_instances] == [
        (7, "GRID A100-4C", "vm-42", 3000), (8, "GRID A100-8C", "vm-43", 100)]


def test_processes_that_vanish_between_calls_are_dropped(fake, source):
    h100 = fake.gpus[0]
    h100.processes.append(FakeProcess(GONE_PID_BASE + 9, 100, "short-lived", vanishes=True))
    gpu = source.poll_gpus().gpus[0]
    assert sorted(p.pid for p in gpu.processes) == [GONE_PID_BASE + 1, GONE_PID_BASE + 2]
    assert {p.kind for p in gpu.processes} == {"compute", "graphics"}
    # Not visible to the OS here (another PID namespace): NVML's name is kept.
    assert {p.name for p in gpu.processes} == {"train.py", "Xorg"}
    h100.processes[:] = [p for p in h100.processes if p.pid != GONE_PID_BASE + 1]
    assert [p.pid for p in source.poll_gpus().gpus[0].processes] == [GONE_PID_BASE + 2]


def test_process_sm_utilization_carries_the_last_seen_timestamp(fake, source):
    seen: list[int] = []
    original = pynvml.nvmlDeviceGetProcessUtilization

    def spy(handle, since):
        if handle is fake.gpus[0]:
            seen.append(since)
        return original(handle, since)

    pynvml.nvmlDeviceGetProcessUtilization = spy
    try:
        first = {p.pid: p.sm_utilization for p in source.poll_gpus().gpus[0].processes}
        assert first == {GONE_PID_BASE + 1: 81.0, GONE_PID_BASE + 2: 0.0}
        second = {p.pid: p.sm_utilization for p in source.poll_gpus().gpus[0].processes}
        assert second[GONE_PID_BASE + 1] == 0.0  # no sample since the last poll: idle
        fake.gpus[0].sm_samples.append((GONE_PID_BASE + 1, 3_000, 64))
        third = {p.pid: p.sm_utilization for p in source.poll_gpus().gpus[0].processes}
        assert third[GONE_PID_BASE + 1] == 64.0
    finally:
        pynvml.nvmlDeviceGetProcessUtilization = original
    assert seen == [0, 2_000, 2_000]


def test_a_real_process_is_joined_with_the_os_and_its_pod(monkeypatch, tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / str(child.pid)).mkdir()
        (tmp_path / str(child.pid) / "cgroup").write_text(
            f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{POD.replace('-', '_')}.slice/"
            f"cri-containerd-{CONTAINER}.scope\n")
        FakeNvml([FakeGpu("GPU-x", processes=[FakeProcess(child.pid, 2048)])]).install(monkeypatch)
        src = NvmlSource(proc=tmp_path)
        first = src.poll_gpus().gpus[0].processes[0]
        assert first.pid == child.pid and first.memory_used_mib == 2048
        assert "time.sleep(60)" in first.command and first.user
        assert (first.pod_uid, first.container_id) == (POD, CONTAINER)
        assert first.cpu_percent is None  # no interval yet
        assert src.poll_gpus().gpus[0].processes[0].cpu_percent is not None
        src.close()
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize(("text", "expected"), [
    (f"12:memory:/kubepods/burstable/pod{POD}/{CONTAINER}\n1:name=systemd:/kubepods/burstable/pod{POD}/{CONTAINER}\n",
     (POD, CONTAINER)),
    (f"0::/kubepods/pod{POD}/{CONTAINER}\n", (POD, CONTAINER)),
    ((f"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{POD.replace('-', '_')}.slice/"
      f"cri-containerd-{CONTAINER}.scope\n"), (POD, CONTAINER)),
    (f"11:devices:/kubepods.slice/kubepods-pod{POD.replace('-', '_')}.slice/crio-{CONTAINER}.scope\n", (POD, CONTAINER)),
    (f"0::/system.slice/docker-{CONTAINER}.scope\n", (None, CONTAINER)),
    (f"4:cpu:/docker/{CONTAINER}\n", (None, CONTAINER)),
    ("0::/user.slice/user-1000.slice/session-3.scope\n", (None, None)),
    ("0::/\n", (None, None)),
    ("", (None, None)),
    ("garbage without colons\n", (None, None)),
    (f"0::/kubepods/besteffort/pod{'ab' * 16}/{CONTAINER}\n", ("ab" * 16, CONTAINER)),  # a static pod's hash
])
def test_cgroup_parser(text, expected):
    assert parse_cgroup(text) == expected


@pytest.mark.parametrize(("name", "slices", "memory", "profile"), [
    ("NVIDIA A100-SXM4-80GB MIG 1g.10gb", None, None, "1g.10gb"),
    ("NVIDIA H100 80GB HBM3 MIG 1g.20gb", None, None, "1g.20gb"),
    ("", (1, 1), 9728, "1g.10gb"),
    ("", (7, 7), 40192, "7g.40gb"),
    ("", (2, 1), 19968, "1c.2g.20gb"),
    ("", (1, 1), 4864, "1g.5gb"),
])
def test_mig_profile_names(name, slices, memory, profile):
    gi, ci = slices or (None, None)
    assert mig_profile(name, gi, ci, memory) == profile


def test_a_lost_gpu_fails_the_poll_in_one_line(fake, source):
    source.poll_gpus()
    fake.gpus[1].lost = True
    with pytest.raises(BackendError) as err:
        source.poll_gpus()
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("GPU 1 (GPU-a100-0001, 00000000:3B:00.0) is lost")
    assert "nvidia-smi -r" in message
    fake.gpus[1].lost = False
    assert len(source.poll_gpus().gpus) == 3


def test_library_not_found_and_driver_not_loaded_say_what_to_do(monkeypatch):
    fake = FakeNvml([FakeGpu("GPU-x")]).install(monkeypatch)
    fake.library = False
    assert not nvml.library_available()
    with pytest.raises(BackendUnavailable) as err:
        NvmlSource().poll_gpus()
    assert "no NVIDIA driver found" in str(err.value) and "--demo" in (err.value.hint or "")
    fake.library = True
    fake.driver_loaded = False
    assert nvml.library_available()
    with pytest.raises(BackendUnavailable) as err:
        NvmlSource().poll_gpus()
    assert "not loaded" in str(err.value) and "--demo" in (err.value.hint or "")


def test_the_driver_going_away_restarts_nvml_on_the_next_poll(fake, source):
    source.poll_gpus()
    fake.gpus[0].not_supported.clear()
    original = pynvml.nvmlDeviceGetUtilizationRates

    def gone(handle):
        raise pynvml.NVMLError_DriverNotLoaded()

    pynvml.nvmlDeviceGetUtilizationRates = gone
    try:
        with pytest.raises(BackendError, match="driver went away"):
            source.poll_gpus()
    finally:
        pynvml.nvmlDeviceGetUtilizationRates = original
    assert len(source.poll_gpus().gpus) == 3
    assert fake.calls["nvmlInit"] == 2


def test_a_hung_driver_is_waited_for_and_the_hub_goes_on(fake):
    fake.hang_on = "nvmlDeviceGetTemperature"
    updates: list[SourceKind] = []
    hub = Hub({SourceKind.GPUS: NvmlSource()}, updates.append, {SourceKind.GPUS: PollPolicy(interval=0.05, timeout=0.2)})
    hub.start()
    try:
        # the first poll hangs: nothing was read, so it is still waiting for an answer (not stale)
        wait_for(lambda: hub.runners[SourceKind.GPUS].status.waiting_since is not None)
        assert hub.runners[SourceKind.GPUS].status.state is SourceState.CONNECTING
        assert fake.hanging.is_set()
        assert "no answer" in (hub.runners[SourceKind.GPUS].status.error or "")
        fake.hang_on = None
        fake.release.set()
        wait_for(lambda: hub.runners[SourceKind.GPUS].status.state is SourceState.LIVE)
    finally:
        fake.release.set()
        hub.stop()


def test_auto_uses_nvml_when_its_library_loads(monkeypatch):
    assert isinstance(build_sources(SourceOptions())[SourceKind.GPUS], Unconfigured)  # no library here
    FakeNvml([mig_gpu()]).install(monkeypatch)
    assert isinstance(build_sources(SourceOptions())[SourceKind.GPUS], NvmlSource)
    assert build_sources(SourceOptions(demo=True))[SourceKind.GPUS].name == "sim"
    assert build_sources(SourceOptions(gpus="sim"))[SourceKind.GPUS].name == "sim"
    assert build_sources(SourceOptions(gpus="off"))[SourceKind.GPUS].name == "off"
    assert isinstance(build_sources(SourceOptions(demo=True, gpus="nvml"))[SourceKind.GPUS], NvmlSource)


def test_forced_nvml_without_a_driver_is_unconfigured_with_a_hint():
    gpus = build_sources(SourceOptions(gpus="nvml"))[SourceKind.GPUS]
    assert isinstance(gpus, NvmlSource)
    hub = Hub({SourceKind.GPUS: gpus}, lambda _k: None)
    runner = hub.runners[SourceKind.GPUS]
    runner.run_once(gpus.poll_gpus)
    assert runner.status.state is SourceState.UNCONFIGURED
    assert "NVIDIA driver" in (runner.status.error or "") and "--demo" in (runner.status.hint or "")
    hub.stop()


def test_no_thread_is_left_behind_by_polls(fake, source):
    before = threading.active_count()
    for _ in range(5):
        source.poll_gpus()
    assert threading.active_count() == before
