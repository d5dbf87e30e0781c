"""Signalling GPU processes through the core, and ``gpuconsole gpus --once``."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from gpuconsole.backends.nvml import source as nvml
from gpuconsole.backends.nvml.source import NvmlSource
from gpuconsole.backends.sim import make_sim
from gpuconsole.cli import main as cli
from gpuconsole.core.ops.actions import ActionError, ActionKind, ActionLog
from gpuconsole.core.ops.gpu_ops import GpuOps, GpuRing
from gpuconsole.model import Gpu, GpuReading, JobState
from tests.fake_nvml import GONE_PID_BASE, FakeGpu, FakeNvml, FakeProcess, standard_host
from tests.helpers import START, FrozenClock


@pytest.fixture
def child():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def ops_for(source) -> tuple[GpuOps, ActionLog]:
    log = ActionLog()
    return GpuOps(lambda: source, lambda: None, log=log), log


def test_sigterm_ends_a_gpu_process_after_a_yes(monkeypatch, child):
    FakeNvml([FakeGpu("GPU-x", processes=[FakeProcess(child.pid, 1024)])]).install(monkeypatch)
    source = NvmlSource()
    source.poll_gpus()
    ops, log = ops_for(source)
    with pytest.raises(ActionError, match="needs a yes"):
        ops.kill("GPU-x", child.pid, "SIGTERM", "")
    assert child.poll() is None
    result = ops.kill("GPU-x", child.pid, "SIGTERM", "yes")
    assert result.ok and f"sent SIGTERM to pid {child.pid}" in result.message
    assert child.wait(timeout=10) == -signal.SIGTERM
    kinds = [(r.request.kind, r.ok) for r in log.recent()]
    assert kinds == [(ActionKind.KILL_PROCESS, False), (ActionKind.KILL_PROCESS, True)]
    source.close()


def test_the_os_refusing_is_one_clean_line(monkeypatch, child):
    FakeNvml([FakeGpu("GPU-x", processes=[FakeProcess(child.pid, 1024)])]).install(monkeypatch)

    def refuse(pid: int, sig: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(nvml, "send_signal", refuse)
    source = NvmlSource()
    source.poll_gpus()
    ops, log = ops_for(source)
    with pytest.raises(ActionError) as err:
        ops.kill("GPU-x", child.pid, "SIGKILL", "yes")
    assert str(err.value).startswith(f"denied: the operating system refused to send SIGKILL to pid {child.pid}")
    assert "\n" not in str(err.value)
    assert child.poll() is None
    assert log.recent()[-1].message.startswith("denied: the operating system refused")  # the owner refused
    source.close()


def test_only_processes_seen_on_that_gpu_can_be_signalled(monkeypatch, child):
    fake = standard_host().install(monkeypatch)
    fake.gpus[0].processes.append(FakeProcess(child.pid, 10))
    source = NvmlSource()
    source.poll_gpus()
    ops, _ = ops_for(source)
    with pytest.raises(ActionError, match="not a process of GPU GPU-a100-0001"):
        ops.kill("GPU-a100-0001", child.pid, "SIGTERM", "yes")
    with pytest.raises(ActionError, match="not visible from here"):
        ops.kill("GPU-h100-0000", GONE_PID_BASE + 1, "SIGTERM", "yes")
    with pytest.raises(ActionError, match="not a signal the console sends"):
        ops.kill("GPU-h100-0000", child.pid, "SIGHUP", "yes")
    child.kill()
    child.wait()
    with pytest.raises(ActionError, match="already exited"):
        ops.kill("GPU-h100-0000", child.pid, "SIGTERM", "yes")
    source.close()


def test_a_source_that_cannot_signal_refuses():
    ops, _ = ops_for(object())
    assert not ops.available
    with pytest.raises(ActionError, match="cannot signal processes"):
        ops.kill("GPU-x", 1, "SIGTERM", "yes")


def test_killing_a_simulated_process_fails_its_job_and_frees_the_gpu():
    clock = FrozenClock()
    gpus, jobs, _ = make_sim(seed=7, start=START, clock=clock)
    ops, _ = ops_for(gpus)
    assert ops.available
    gpu = next(g for g in gpus.poll_gpus().gpus if g.processes and not g.mig_slices)
    proc = gpu.processes[0]
    result = ops.kill(gpu.uuid, proc.pid, "SIGKILL", "yes")
    assert "failed and freed its GPUs" in result.message
    after = next(g for g in gpus.poll_gpus().gpus if g.uuid == gpu.uuid)
    assert after.processes == ()
    failed = [j for j in jobs.poll_jobs().jobs if j.owns_pod(proc.pod_uid)]
    assert failed and failed[0].state is JobState.FAILED
    with pytest.raises(ActionError, match="it has exited"):
        ops.kill(gpu.uuid, proc.pid, "SIGKILL", "yes")


def test_killing_a_process_on_a_simulated_mig_slice():
    clock = FrozenClock()
    gpus, _, _ = make_sim(seed=7, start=START, clock=clock)
    ops, _ = ops_for(gpus)
    gpu = next(g for g in gpus.poll_gpus().gpus if g.mig_slices and g.processes)
    proc = gpu.processes[0]
    ops.kill(gpu.uuid, proc.pid, "SIGTERM", "yes")
    after = next(g for g in gpus.poll_gpus().gpus if g.uuid == gpu.uuid)
    assert proc.pid not in {p.pid for p in after.processes}
    assert next(s for s in after.mig_slices if s.uuid == proc.mig_uuid).memory_used_mib == 0


def _gpu(uuid: str, util: float) -> Gpu:
    return Gpu(uuid, "n", 0, "g", util, 1, 2, 30, 100.0, 200.0)


def test_the_ring_keeps_five_minutes_and_bounds_large_fleets():
    ring = GpuRing(seconds=300, all_up_to=2)
    for t in range(400):
        ring.record(GpuReading((_gpu("a", t), _gpu("b", 0)), float(t)))
        ring.record(GpuReading((_gpu("a", t), _gpu("b", 0)), float(t)))  # published twice: kept once
    samples = ring.samples("a", 300, 399.0)
    assert len(samples) == 301 and samples[0].ts == 99.0 and samples[-1].utilization == 399
    assert len(ring.samples("a", 60, 399.0)) == 61
    big = GpuRing(seconds=300, all_up_to=1)
    big.watch("b")
    big.record(GpuReading((_gpu("a", 1), _gpu("b", 2)), 1.0))
    assert big.samples("a", 300, 1.0) == [] and len(big.samples("b", 300, 1.0)) == 1


# --------------------------------------------------------------------------- gpus --once


def test_gpus_once_json_from_nvml(monkeypatch, capsys):
    standard_host().install(monkeypatch)
    assert cli.main(["gpus", "--once", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "gpuconsole.gpus/1" and doc["source"]["state"] == "live"
    assert doc["versions"] == {"driver": "550.54.15", "cuda": "12.4", "nvml": "12.550.54.15"}
    assert [g["uuid"] for g in doc["gpus"]] == ["GPU-h100-0000", "GPU-a100-0001", "GPU-t4-0002"]
    a100 = doc["gpus"][1]
    assert a100["mig_mode"] == "enabled" and a100["mig_slices"][0]["profile"] == "3g.40gb"
    assert {p["name"] for p in a100["processes"]} == {"infer", "notebook"}
    assert doc["gpus"][2]["not_reported"] == ["power_w"] and doc["gpus"][2]["fan_percent"] is None
    assert doc["gpus"][2]["power_w"] is None, "a figure the board cannot report is null, never 0"
    assert doc["gpus"][0]["power_w"] is not None
    assert a100["utilization"] is None  # a MIG-enabled GPU reports no whole-GPU utilization


def test_gpus_once_text_lists_slices_and_processes(monkeypatch, capsys):
    standard_host().install(monkeypatch)
    assert cli.main(["gpus", "--once"]) == 0
    out = capsys.readouterr().out
    assert "driver 550.54.15" in out and "CUDA 12.4" in out
    assert "└ MIG 1c.2g.20gb" in out and "train.py" in out
    t4 = next(line for line in out.splitlines() if "Tesla T4" in line)
    assert "N/A/700 W" in t4


def test_gpus_once_with_the_demo(capsys):
    assert cli.main(["gpus", "--once", "--json", "--demo"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["source"]["name"] == "sim" and doc["gpus"]
    assert any(g["mig_slices"] for g in doc["gpus"]) and any(g["processes"] for g in doc["gpus"])


def test_gpus_once_without_a_driver_says_so_and_exits_1(capsys):
    assert cli.main(["gpus", "--once", "--gpus", "nvml"]) == 1
    err = capsys.readouterr().err
    assert "no NVIDIA driver found" in err and "--demo" in err and "Traceback" not in err


def test_gpus_bad_input_exits_2(capsys):
    assert cli.main(["gpus"]) == 2
    assert "add --once" in capsys.readouterr().err
    assert cli.main(["gpus", "--once", "--gpus", "cuda"]) == 2
    assert cli.main(["--gpu-util-thresh", "90", "10", "--demo"]) == 2
    assert "LOW must be below HIGH" in capsys.readouterr().err
    assert cli.main(["--mem-util-thresh", "10", "101", "--demo"]) == 2
