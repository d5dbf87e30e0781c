"""Live reads for benchmarks/device_check.sh: poll timing beside nvitop, what MIG mode reads, the
requirements the installed wheels and the host's packages leave unmet, and processes left running.

    python -m benchmarks.device_probe poll [--runs N]
    python -m benchmarks.device_probe mig --json GPUS.json --smi SMI.xml
    python -m benchmarks.device_probe requirements --site DIR [--pyproject pyproject.toml]
    python -m benchmarks.device_probe leftovers --marker WORD

``poll`` alternates one poll of every GPU by gpuconsole's NVML adapter with one
``nvitop.take_snapshots`` of the same devices (each with its processes), so both meet the same
moments of the same device; it prints the median and the spread (p10–p90, min–max) of each.
``mig`` only reads (``nvmlDeviceGetMigMode``, ``…GetMaxMigDeviceCount``,
``…GetMigDeviceHandleByIndex`` and the slices' own facts): it changes and resets nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


# --------------------------------------------------------------------------- poll timing

def interleaved(fns: dict[str, Callable[[], Any]], runs: int, warmup: int = 5) -> dict[str, list[float]]:
    """Milliseconds of each call, the functions taking turns ``runs`` times after ``warmup`` turns."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - t0) * 1000)
    return times


def spread(samples: list[float]) -> dict[str, float]:
    """Median, p10, p90, min and max of ``samples`` (ms)."""
    ordered = sorted(samples)
    deciles = statistics.quantiles(ordered, n=10, method="inclusive") if len(ordered) > 1 else ordered * 9
    return {"median": statistics.median(ordered), "p10": deciles[0], "p90": deciles[-1],
            "min": ordered[0], "max": ordered[-1]}


def spread_line(label: str, samples: list[float]) -> str:
    s = spread(samples)
    return (f"  {label:<40} median {s['median']:7.3f} ms   p10–p90 {s['p10']:.3f}–{s['p90']:.3f} ms   "
            f"min–max {s['min']:.3f}–{s['max']:.3f} ms   ({len(samples)} polls)")


def poll(runs: int) -> int:
    from gpuconsole.backends.nvml import source as nvml

    if not nvml.library_available():
        print("no NVML library here: nothing to time")
        return 1
    gpuconsole = nvml.NvmlSource(node="bench")
    count = len(gpuconsole.poll_gpus().gpus)
    fns: dict[str, Callable[[], Any]] = {"gpuconsole NvmlSource.poll_gpus": gpuconsole.poll_gpus}
    snapshot = nvitop_snapshot(count)
    if snapshot is not None:
        fns[snapshot[0]] = snapshot[1]
    print(f"{count} GPUs, every GPU and its processes per poll, the callers taking turns:")
    times = interleaved(fns, runs)
    gpuconsole.close()
    for label, samples in times.items():
        print(spread_line(label, samples))
    if len(times) == 2:
        ours, theirs = (statistics.median(t) for t in times.values())
        print(f"  gpuconsole / nvitop, medians: {ours / theirs:.2f}")
    return 0


def nvitop_snapshot(count: int) -> tuple[str, Callable[[], Any]] | None:
    """nvitop's snapshot of every device and its processes, ready to time; None (said why)
    where nvitop is missing, fails here, or does not see the ``count`` GPUs gpuconsole sees."""
    try:
        import nvitop
    except ImportError:
        print("nvitop not installed: gpuconsole's poll is timed alone")
        return None
    except Exception as exc:  # noqa: BLE001 - it may refuse this host's nvidia-ml-py
        print(f"nvitop did not import ({type(exc).__name__}: {exc}): gpuconsole's poll is timed alone")
        return None
    try:
        devices = nvitop.Device.all()
        nvitop.take_snapshots(devices)
    except Exception as exc:  # noqa: BLE001 - nvitop's failure is a finding, not the end
        print(f"nvitop failed here ({type(exc).__name__}: {exc}): gpuconsole's poll is timed alone")
        return None
    if len(devices) != count:
        print(f"nvitop sees {len(devices)} GPUs where gpuconsole sees {count}: gpuconsole's poll is timed alone")
        return None
    return f"nvitop {nvitop.__version__} take_snapshots", lambda: nvitop.take_snapshots(devices)


# --------------------------------------------------------------------------- MIG, read only

def mig(gpus_json: Path, smi_xml: Path) -> int:
    from benchmarks.device_compare import parse_smi

    import pynvml

    doc = json.loads(gpus_json.read_text()) if gpus_json.exists() else {"gpus": []}
    smi = parse_smi(smi_xml.read_text(errors="replace")) if smi_xml.exists() and smi_xml.stat().st_size else {"gpus": []}
    theirs = {g["uuid"]: g for g in smi["gpus"]}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        print(f"NVML did not start: {exc}")
        return 1
    try:
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            uuid = _text(_read(pynvml.nvmlDeviceGetUUID, handle))
            ours = next((g for g in doc.get("gpus") or () if g["uuid"] == uuid), {})
            smi_gpu = theirs.get(uuid, {})
            print(f"GPU {index} {uuid}")
            print(f"  NVML nvmlDeviceGetMigMode:      {_modes(_read(pynvml.nvmlDeviceGetMigMode, handle))}")
            print(f"  nvidia-smi current / pending:   {smi_gpu.get('mig_mode') or 'N/A'} / "
                  f"{smi_gpu.get('mig_pending') or 'N/A'}")
            print(f"  gpuconsole mig_mode / pending:  {ours.get('mig_mode')} / {ours.get('mig_pending') or 'same'}")
            most = _read(pynvml.nvmlDeviceGetMaxMigDeviceCount, handle)
            print(f"  NVML most MIG devices:          {most}")
            for slot in range(most if isinstance(most, int) else 0):
                dev = _read(pynvml.nvmlDeviceGetMigDeviceHandleByIndex, handle, slot)
                if isinstance(dev, str):
                    continue  # an empty slot (NotFound) or not in MIG mode
                mem = _read(pynvml.nvmlDeviceGetMemoryInfo, dev)
                print(f"    slot {slot}: {_text(_read(pynvml.nvmlDeviceGetUUID, dev))}  "
                      f"gi {_read(pynvml.nvmlDeviceGetGpuInstanceId, dev)} ci "
                      f"{_read(pynvml.nvmlDeviceGetComputeInstanceId, dev)}  "
                      f"{_text(_read(pynvml.nvmlDeviceGetName, dev))}  "
                      f"{getattr(mem, 'total', 0) // (1024 * 1024) if not isinstance(mem, str) else mem} MiB")
            for s in ours.get("mig_slices") or ():
                print(f"    gpuconsole slice {s['profile']} gi {s['gi_id']} ci {s['ci_id']}  {s['memory_total_mib']} MiB"
                      f"  {s['uuid']}")
    finally:
        pynvml.nvmlShutdown()
    print("changed nothing: only MIG mode, device count and MIG handles were read")
    return 0


def _read(fn: Callable[..., Any], *args: Any) -> Any:
    """The answer, or the NVML error's name (NotSupported on a board without MIG)."""
    import pynvml

    try:
        return fn(*args)
    except pynvml.NVMLError as exc:
        return type(exc).__name__.removeprefix("NVMLError_") or str(exc)


def _modes(answer: Any) -> str:
    if isinstance(answer, str):
        return answer
    words = {0: "disabled", 1: "enabled"}
    return f"current {words.get(int(answer[0]), answer[0])}, pending {words.get(int(answer[1]), answer[1])}"


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


# --------------------------------------------------------------------------- requirements, leftovers

def unmet(requirements: list[str], where: str, version_of: Callable[[str], str | None]) -> list[str]:
    """The requirements (``Requires-Dist`` lines) that the installed versions do not meet."""
    from packaging.requirements import InvalidRequirement, Requirement

    out = []
    for line in requirements:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        have = version_of(req.name)
        if have is None:
            out.append(f"{where} needs {req}: not installed")
        elif req.specifier and not req.specifier.contains(have, prereleases=True):
            out.append(f"{where} needs {req}: {req.name} {have} is installed")
    return out


def requirements(site: Path | None, pyproject: Path | None) -> int:
    import importlib.metadata as md

    def version_of(name: str) -> str | None:
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            return None

    problems: list[str] = []
    installed = sorted(site.glob("*.dist-info")) if site else []
    for info in installed:
        dist = md.Distribution.at(info)
        problems += unmet(list(dist.requires or ()), f"{dist.metadata['Name']} {dist.version}", version_of)
    if pyproject is not None and pyproject.exists():
        import tomllib

        project = tomllib.loads(pyproject.read_text())["project"]
        problems += unmet(list(project.get("dependencies", ())), "gpuconsole", version_of)
    print(f"{len(installed)} packages installed from the wheels; "
          + ("every requirement is met" if not problems else f"{len(problems)} requirements not met:"))
    for line in problems:
        print(f"  {line}")
    return 1 if problems else 0


def leftovers(marker: str, env: str = "GPUCONSOLE_DEVICE_CHECK_RUN") -> int:
    """Processes of this run still running: ``marker`` in the command line, or ``env`` set to it
    (every process the run starts inherits it)."""
    import os

    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        if proc.pid == os.getpid() or proc.info.get("status") == psutil.STATUS_ZOMBIE:
            continue
        cmdline = " ".join(proc.info.get("cmdline") or ())
        try:
            ours = marker in cmdline or proc.environ().get(env) == marker
        except psutil.Error:
            ours = marker in cmdline
        if ours:
            found.append(f"  pid {proc.pid}: {cmdline[:160]}")
    print("nothing of this run is left running" if not found else "still running:\n" + "\n".join(found))
    return 1 if found else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_poll = sub.add_parser("poll", help="gpuconsole's poll and nvitop's snapshot, taking turns")
    p_poll.add_argument("--runs", type=int, default=200)
    p_mig = sub.add_parser("mig", help="what MIG mode reads (read only)")
    p_mig.add_argument("--json", type=Path, required=True)
    p_mig.add_argument("--smi", type=Path, required=True)
    p_req = sub.add_parser("requirements", help="requirements of the wheels in --site and of gpuconsole not met here")
    p_req.add_argument("--site", type=Path)
    p_req.add_argument("--pyproject", type=Path)
    p_left = sub.add_parser("leftovers", help="processes whose command line holds WORD")
    p_left.add_argument("--marker", required=True)
    args = parser.parse_args(argv)
    if args.command == "poll":
        return poll(args.runs)
    if args.command == "mig":
        return mig(args.json, args.smi)
    if args.command == "requirements":
        return requirements(args.site, args.pyproject)
    return leftovers(args.marker)


if __name__ == "__main__":
    raise SystemExit(main())
