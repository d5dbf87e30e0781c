"""The GPU host of ``device_check.sh --dry-run``: the tests' fake NVML layer in every child
process, and an ``nvidia-smi`` that describes the same fake GPUs.

    python -m benchmarks.device_fake shim DIR           # DIR/sitecustomize.py and DIR/bin/nvidia-smi
    python -m benchmarks.device_fake host FILE [--standin PID:MIB]
    python -m benchmarks.device_fake nvidia-smi -q -x   # what DIR/bin/nvidia-smi runs

With DIR first on ``PYTHONPATH`` and ``GPUCONSOLE_FAKE_NVML_HOST`` naming a host file, every
Python started (``gpuconsole gpus --once --json --gpus nvml``, ``process kill``, the console,
pytest's subprocesses) installs :class:`tests.fake_nvml.FakeNvml` over ``pynvml``'s functions, as
the tests do in-process; with DIR/bin first on ``PATH``, ``nvidia-smi -q -x`` prints the XML a
driver would print for those GPUs. The host file holds only what changes during a run: the
stand-in process the dry run starts in place of a CUDA load. A listed process that has exited is
no longer listed, as a driver frees a dead process's context.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

HOST_ENV = "GPUCONSOLE_FAKE_NVML_HOST"
HIDDEN_PID = 90_000_007  # a process NVML lists that this sandbox's /proc does not show
INSTALLED: Any = None  # the fake this process's sitecustomize installed

SITECUSTOMIZE = '''"""Written by benchmarks/device_fake.py: the fake NVML layer for device_check.sh --dry-run."""
import os

if os.environ.get("{env}"):
    from benchmarks import device_fake

    device_fake.INSTALLED = device_fake.install(os.environ["{env}"])
'''


def dry_run_host(standin: tuple[int, int] | None = None) -> Any:
    """Three boards: an idle H200 (a process the sandbox hides; the stand-in when it runs), an
    A100 in MIG mode with a process on one slice, and a T4 without power sensor or MIG."""
    import pynvml

    from tests.fake_nvml import FakeGpu, FakeNvml, FakeProcess, mig_gpu

    class LiveFakeNvml(FakeNvml):
        def _listed(self, dev: Any, kind: str) -> list[Any]:
            return [p for p in super()._listed(dev, kind) if _alive(int(p.pid))]

    processes = [FakeProcess(HIDDEN_PID, 512, "python3")]
    if standin is not None:
        processes.insert(0, FakeProcess(standin[0], standin[1], "python3"))
    h200 = FakeGpu("GPU-dry0h200-0000-4000-8000-000000000000", name="NVIDIA H200", bus_id="00000000:19:00.0",
                   util=(0, 0), total_mib=143771, used_mib=sum(p.used_mib for p in processes), temp=31,
                   power_mw=75_000, limit_mw=700_000, sm_clock=345, mem_clock=3201, processes=processes)
    a100 = mig_gpu("GPU-dry1a100-0000-4000-8000-000000000001",
                   {"3g.40gb": [FakeProcess(HIDDEN_PID + 1, 20000, "infer")]})
    t4 = FakeGpu("GPU-dry2t4-0000-4000-8000-000000000002", name="Tesla T4", bus_id="00000000:5E:00.0",
                 total_mib=15360, used_mib=0, util=(0, 0), temp=38, limit_mw=70_000, sm_clock=300, mem_clock=405,
                 persistence=0, mig=None, virtualization=pynvml.NVML_GPU_VIRTUALIZATION_MODE_PASSTHROUGH,
                 not_supported={"nvmlDeviceGetPowerUsage", "nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetFanSpeed"})
    fake = LiveFakeNvml([h200, a100, t4])
    fake.driver, fake.cuda, fake.library_version = "580.159.03", 13000, "13.580.159.03"
    return fake


def _alive(pid: int) -> bool:
    if pid >= 90_000_000:
        return True  # NVML's pid of a process this sandbox cannot see
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie has exited: only its parent has not reaped it yet
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def load_host(path: str | Path) -> Any:
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        doc = {}
    standin = doc.get("standin")
    return dry_run_host(tuple(standin) if standin else None)


class _Setter:
    """The one method of pytest's monkeypatch the fake's ``install`` calls (never undone here)."""

    @staticmethod
    def setattr(target: Any, name: str, value: Any) -> None:
        setattr(target, name, value)


def install(path: str | Path) -> Any:
    """Install the host in ``path`` over ``pynvml`` in this process (sitecustomize calls it)."""
    return load_host(path).install(_Setter())


# Not ``-m benchmarks.device_fake``: sitecustomize has imported the module by then.
SMI_MAIN = "import sys; from benchmarks.device_fake import fake_smi; sys.exit(fake_smi(sys.argv[1:]))"


def write_shim(where: Path) -> None:
    (where / "bin").mkdir(parents=True, exist_ok=True)
    (where / "sitecustomize.py").write_text(SITECUSTOMIZE.format(env=HOST_ENV))
    smi = where / "bin" / "nvidia-smi"
    smi.write_text(f'#!/bin/sh\nexec "{sys.executable}" -c "{SMI_MAIN}" "$@"\n')
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


# --------------------------------------------------------------------------- nvidia-smi

def _call(fake: Any, name: str, *args: Any) -> Any:
    """The fake's answer, or None where the board cannot say (as nvidia-smi prints N/A)."""
    import pynvml

    try:
        return getattr(pynvml, name)(*args)
    except pynvml.NVMLError:
        return None


def _el(tag: str, value: Any, unit: str = "", indent: int = 2) -> str:
    text = "N/A" if value is None else f"{value}{' ' + unit if unit else ''}"
    return "\t" * indent + f"<{tag}>{escape(str(text))}</{tag}>\n"


MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}
VIRT = {0: "None", 1: "Pass-Through", 2: "VGPU", 3: "Host VGPU", 4: "Host VSGA"}
MIB = 1024 * 1024


def smi_xml(fake: Any) -> str:
    """``nvidia-smi -q -x`` for the fake's GPUs: the elements gpuconsole is compared on, in the
    layout of driver 580 (``gpu_power_readings``, ``instant_``/``average_power_draw``)."""
    import pynvml

    fake.nvmlInit()
    out = ['<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n<nvidia_smi_log>\n',
           _el("timestamp", "dry run", indent=1), _el("driver_version", fake.driver, indent=1),
           _el("cuda_version", f"{fake.cuda // 1000}.{fake.cuda % 1000 // 10}", indent=1),
           _el("attached_gpus", len(fake.gpus), indent=1)]
    for h in fake.gpus:
        mig = _call(fake, "nvmlDeviceGetMigMode", h)
        util = _call(fake, "nvmlDeviceGetUtilizationRates", h)
        mem = _call(fake, "nvmlDeviceGetMemoryInfo", h, pynvml.nvmlMemory_v2)
        power = _call(fake, "nvmlDeviceGetPowerUsage", h)
        persistence = _call(fake, "nvmlDeviceGetPersistenceMode", h)
        words = {1: "Enabled", 0: "Disabled"}
        out.append(f'\t<gpu id="{h.bus_id}">\n')
        out.append(_el("product_name", h.name))
        out.append(_el("persistence_mode", None if persistence is None else words[int(persistence)]))
        out.append("\t\t<mig_mode>\n" + _el("current_mig", None if mig is None else words[mig[0]], indent=3)
                   + _el("pending_mig", None if mig is None else words[mig[1]], indent=3) + "\t\t</mig_mode>\n")
        out.append(_mig_devices(h) if mig and mig[0] else "\t\t<mig_devices>\n\t\t\tNone\n\t\t</mig_devices>\n")
        out.append(_el("uuid", h.uuid))
        virt = _call(fake, "nvmlDeviceGetVirtualizationMode", h)
        out.append("\t\t<gpu_virtualization_mode>\n" + _el("virtualization_mode", VIRT.get(virt), indent=3)
                   + "\t\t</gpu_virtualization_mode>\n")
        out.append("\t\t<pci>\n" + _el("pci_bus_id", h.bus_id, indent=3) + "\t\t</pci>\n")
        out.append("\t\t<fb_memory_usage>\n" + "".join(
            _el(tag, None if mem is None else value // MIB, "MiB", 3)
            for tag, value in (("total", getattr(mem, "total", 0)), ("reserved", getattr(mem, "reserved", 0)),
                               ("used", getattr(mem, "used", 0)), ("free", getattr(mem, "free", 0))))
                   + "\t\t</fb_memory_usage>\n")
        out.append(_el("compute_mode", MODES.get(_call(fake, "nvmlDeviceGetComputeMode", h))))
        out.append("\t\t<utilization>\n" + _el("gpu_util", None if util is None else util.gpu, "%", 3)
                   + _el("memory_util", None if util is None else util.memory, "%", 3) + "\t\t</utilization>\n")
        out.append("\t\t<temperature>\n" + _el("gpu_temp", _call(fake, "nvmlDeviceGetTemperature", h, 0), "C", 3)
                   + "\t\t</temperature>\n")
        watts = None if power is None else f"{power / 1000:.2f}"
        limit = _call(fake, "nvmlDeviceGetEnforcedPowerLimit", h)
        out.append("\t\t<gpu_power_readings>\n" + _el("power_state", "P0", indent=3)
                   + _el("average_power_draw", watts, "W", 3) + _el("instant_power_draw", watts, "W", 3)
                   + _el("current_power_limit", None if limit is None else f"{limit / 1000:.2f}", "W", 3)
                   + "\t\t</gpu_power_readings>\n")
        out.append("\t\t<clocks>\n" + _el("sm_clock", _call(fake, "nvmlDeviceGetClockInfo", h, pynvml.NVML_CLOCK_SM),
                                          "MHz", 3)
                   + _el("mem_clock", _call(fake, "nvmlDeviceGetClockInfo", h, pynvml.NVML_CLOCK_MEM), "MHz", 3)
                   + "\t\t</clocks>\n")
        out.append(_processes(fake, h))
        out.append("\t</gpu>\n")
    out.append("</nvidia_smi_log>\n")
    return "".join(out)


def _mig_devices(h: Any) -> str:
    rows = []
    for n, m in enumerate(h.migs):
        rows.append("\t\t\t<mig_device>\n" + _el("index", n, indent=4) + _el("gpu_instance_id", m.gi_id, indent=4)
                    + _el("compute_instance_id", m.ci_id, indent=4) + "\t\t\t\t<fb_memory_usage>\n"
                    + _el("total", m.total_mib, "MiB", 5) + _el("used", m.used_mib, "MiB", 5)
                    + "\t\t\t\t</fb_memory_usage>\n\t\t\t</mig_device>\n")
    return "\t\t<mig_devices>\n" + "".join(rows) + "\t\t</mig_devices>\n"


def _processes(fake: Any, h: Any) -> str:
    rows = []
    places = [(m.gi_id, m.ci_id, m) for m in h.migs] if h.migs else [(None, None, h)]
    for gi, ci, dev in places:
        for p in fake._listed(dev, "compute") + [q for q in fake._listed(dev, "graphics")
                                                 if q.pid not in {c.pid for c in fake._listed(dev, "compute")}]:
            rows.append("\t\t\t<process_info>\n" + _el("gpu_instance_id", gi, indent=4)
                        + _el("compute_instance_id", ci, indent=4) + _el("pid", p.pid, indent=4)
                        + _el("type", "C", indent=4) + _el("process_name", _name(fake, p.pid), indent=4)
                        + _el("used_memory", p.usedGpuMemory // MIB, "MiB", 4) + "\t\t\t</process_info>\n")
    return "\t\t<processes>\n" + "".join(rows) + "\t\t</processes>\n"


def _name(fake: Any, pid: int) -> str | None:
    try:
        return fake.nvmlSystemGetProcessName(pid)
    except Exception:  # noqa: BLE001 - NotFound: nvidia-smi prints N/A
        return None


QUERY_FIELDS = {
    "name": lambda fake, h: h.name,
    "uuid": lambda fake, h: h.uuid,
    "memory.total": lambda fake, h: h.total_mib,
    "memory.used": lambda fake, h: h.used_mib,
    "mig.mode.current": lambda fake, h: "[N/A]" if h.mig is None else ("Enabled" if h.mig[0] else "Disabled"),
    "pci.bus_id": lambda fake, h: h.bus_id,
}


def smi_query(fake: Any, fields: str) -> str:
    """``nvidia-smi --query-gpu=FIELDS --format=csv,noheader,nounits`` for the fields the device
    test asks for."""
    names = [f.strip() for f in fields.split(",")]
    return "".join(", ".join(str(QUERY_FIELDS[n](fake, h)) for n in names) + "\n" for h in fake.gpus)


def fake_smi(argv: list[str]) -> int:
    fake = INSTALLED if INSTALLED is not None else install(os.environ.get(HOST_ENV, ""))
    query = next((a.split("=", 1)[1] for a in argv if a.startswith("--query-gpu=")), None)
    if query is not None:
        sys.stdout.write(smi_query(fake, query))
    elif "-q" in argv and "-x" in argv:
        sys.stdout.write(smi_xml(fake))
    elif argv[:2] == ["mig", "-lgip"]:
        sys.stdout.write("(fake nvidia-smi) GPU 1 MIG profiles: 1g.10gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb\n")
    else:
        print(f"fake nvidia-smi (dry run): {' '.join(argv) or '(no arguments)'} is not answered", file=sys.stderr)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["nvidia-smi"]:
        return fake_smi(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    shim = sub.add_parser("shim", help="write DIR/sitecustomize.py and DIR/bin/nvidia-smi")
    shim.add_argument("dir", type=Path)
    host = sub.add_parser("host", help="write the host file (the stand-in process, if any)")
    host.add_argument("file", type=Path)
    host.add_argument("--standin", metavar="PID:MIB", help="a process NVML lists as a compute process of GPU 0")
    args = parser.parse_args(argv)
    if args.command == "shim":
        write_shim(args.dir)
    else:
        standin = [int(x) for x in args.standin.split(":")] if args.standin else None
        args.file.write_text(json.dumps({"standin": standin}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
