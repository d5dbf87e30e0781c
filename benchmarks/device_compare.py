"""gpuconsole's reading of a GPU host beside ``nvidia-smi -q -x``, field by field.

    python -m benchmarks.device_compare trim SMI.xml
    python -m benchmarks.device_compare compare --json GPUS.json --smi SMI.xml [--smi LATER.xml]
    python -m benchmarks.device_compare find-load --json GPUS.json --pid PID --marker WORD --pid-file FILE
    python -m benchmarks.device_compare gpu-lines --json GPUS.json

Used by benchmarks/device_check.sh. ``compare`` prints, for every GPU, each field as ``match``,
``differs (gpuconsole X, nvidia-smi Y)`` or ``N/A on this board`` (neither side can read it).
The two programs read the board a few seconds apart, so a figure that moves (power, clocks,
utilization) matches when gpuconsole's value lies within a tolerance of the nvidia-smi readings
taken before and after it; fixed facts (name, UUID, modes) must be equal, memory total within 1 MiB.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# What nvidia-smi prints where the board or the driver cannot give a field.
NA_WORDS = frozenset({"n/a", "[n/a]", "not supported", "[not supported]", "unknown error", "[unknown error]",
                      "insufficient permissions", "[insufficient permissions]", "no permission", "",
                      "requested functionality has been deprecated"})
VIRTUALIZATION = {"none": "none", "pass-through": "passthrough", "passthrough": "passthrough", "vgpu": "vgpu",
                  "host vgpu": "host_vgpu", "host vsga": "host_vsga"}
ON_OFF = {"enabled": True, "disabled": False}
# The elements ``trim`` keeps, as paths under <gpu> (a folder keeps all below it).
KEPT = ("product_name", "uuid", "pci/pci_bus_id", "fb_memory_usage", "utilization/gpu_util",
        "utilization/memory_util", "temperature/gpu_temp", "gpu_power_readings", "power_readings",
        "clocks/sm_clock", "clocks/mem_clock", "persistence_mode", "compute_mode", "mig_mode",
        "mig_devices/mig_device/gpu_instance_id", "mig_devices/mig_device/compute_instance_id",
        "mig_devices/mig_device/fb_memory_usage", "gpu_virtualization_mode/virtualization_mode", "processes")
TOP = ("timestamp", "driver_version", "cuda_version", "attached_gpus")


# --------------------------------------------------------------------------- nvidia-smi's XML

def word(text: str | None) -> str | None:
    """An element's text, or None for nvidia-smi's N/A words."""
    if text is None:
        return None
    text = " ".join(text.split())
    return None if text.lower() in NA_WORDS else text


def number(text: str | None) -> float | None:
    """``"143771 MiB"`` → 143771.0; N/A → None."""
    found = re.match(r"\s*(-?\d+(?:\.\d+)?)", word(text) or "")
    return float(found.group(1)) if found else None


def _first(el: ET.Element, *paths: str) -> str | None:
    for path in paths:
        found = el.find(path)
        if found is not None and word(found.text) is not None:
            return found.text
    return None


def parse_gpu(gpu: ET.Element) -> dict[str, Any]:
    """One <gpu> as gpuconsole's field names and units (None where nvidia-smi says N/A)."""
    readings = gpu.find("gpu_power_readings")
    if readings is None:
        readings = gpu.find("power_readings")
    readings = readings if readings is not None else ET.Element("none")
    mig = gpu.find("mig_mode")
    current = word(mig.findtext("current_mig")) if mig is not None else None
    pending = word(mig.findtext("pending_mig")) if mig is not None else None
    processes: dict[int, float | None] = {}
    for p in gpu.findall("processes/process_info"):
        pid = number(p.findtext("pid"))
        if pid is not None:
            processes[int(pid)] = number(p.findtext("used_memory"))
    slices = {}
    for m in gpu.findall("mig_devices/mig_device"):
        gi, ci = number(m.findtext("gpu_instance_id")), number(m.findtext("compute_instance_id"))
        if gi is not None and ci is not None:
            slices[(int(gi), int(ci))] = (number(m.findtext("fb_memory_usage/total")),
                                          number(m.findtext("fb_memory_usage/used")))
    persistence = word(gpu.findtext("persistence_mode"))
    virtualization = word(gpu.findtext("gpu_virtualization_mode/virtualization_mode"))
    compute_mode = word(gpu.findtext("compute_mode"))
    return {
        "name": word(gpu.findtext("product_name")),
        "uuid": word(gpu.findtext("uuid")),
        "pci_bus_id": word(gpu.findtext("pci/pci_bus_id")) or gpu.get("id"),
        "memory_total_mib": number(gpu.findtext("fb_memory_usage/total")),
        "memory_used_mib": number(gpu.findtext("fb_memory_usage/used")),
        "utilization": number(gpu.findtext("utilization/gpu_util")),
        "memory_utilization": number(gpu.findtext("utilization/memory_util")),
        "temperature_c": number(gpu.findtext("temperature/gpu_temp")),
        # nvmlDeviceGetPowerUsage is the one-second average on Ampere and newer (the instant
        # reading on older boards): nvidia-smi's average first, then its older single reading.
        "power_w": number(_first(readings, "average_power_draw", "power_draw", "instant_power_draw")),
        "power_limit_w": number(_first(readings, ".//enforced_power_limit", ".//current_power_limit",
                                       ".//power_limit")),
        "sm_clock_mhz": number(gpu.findtext("clocks/sm_clock")),
        "memory_clock_mhz": number(gpu.findtext("clocks/mem_clock")),
        "persistence_mode": ON_OFF.get((persistence or "").lower()),
        "compute_mode": compute_mode.lower() if compute_mode else None,
        "mig_mode": current.lower() if current else None,
        "mig_pending": pending.lower() if pending else None,
        "virtualization": VIRTUALIZATION.get(virtualization.lower(), virtualization) if virtualization else None,
        "processes": processes,
        "mig_slices": slices,
    }


def parse_smi(text: str) -> dict[str, Any]:
    root = ET.fromstring(_xml_only(text))
    return {"driver": word(root.findtext("driver_version")), "cuda": word(root.findtext("cuda_version")),
            "gpus": [parse_gpu(g) for g in root.findall("gpu")]}


def _xml_only(text: str) -> str:
    """nvidia-smi can print a warning line before the XML: start at the declaration."""
    at = text.find("<?xml")
    return text[at:] if at > 0 else text


def trim(text: str) -> str:
    """The XML with only the elements the comparison reads (``TOP``, and ``KEPT`` in each GPU)."""
    root = ET.fromstring(_xml_only(text))
    for child in list(root):
        if child.tag == "gpu":
            _prune(child, "", KEPT)
        elif child.tag not in TOP:
            root.remove(child)
    ET.indent(root, space="  ")
    return ET.tostring(root, encoding="unicode") + "\n"


def _prune(el: ET.Element, path: str, keep: Iterable[str]) -> None:
    """Remove what no kept path leads to or lies under."""
    for child in list(el):
        at = f"{path}/{child.tag}" if path else child.tag
        if any(at == k or k.startswith(at + "/") or at.startswith(k + "/") for k in keep):
            child.text = child.text.strip() if child.text and child.text.strip() else child.text
            _prune(child, at, keep)
        else:
            el.remove(child)


# --------------------------------------------------------------------------- gpuconsole's JSON

def gpuconsole_values(gpu: dict[str, Any]) -> dict[str, Any]:
    """One GPU of ``gpuconsole gpus --json`` in the same shape as :func:`parse_gpu`."""
    missing = set(gpu.get("not_reported") or ())
    out = {key: gpu.get(key) for key in ("name", "uuid", "pci_bus_id", "memory_utilization", "sm_clock_mhz",
                                         "memory_clock_mhz", "persistence_mode", "compute_mode", "virtualization")}
    for key, reported_as in (("memory_total_mib", "memory"), ("memory_used_mib", "memory"),
                             ("utilization", "utilization"), ("temperature_c", "temperature_c"),
                             ("power_w", "power_w"), ("power_limit_w", "power_limit_w")):
        out[key] = None if reported_as in missing else gpu.get(key)
    mode = gpu.get("mig_mode")
    out["mig_mode"] = None if mode in (None, "n/a") else mode
    out["mig_pending"] = gpu.get("mig_pending") or out["mig_mode"]
    out["processes"] = {int(p["pid"]): p.get("memory_used_mib") for p in gpu.get("processes") or ()}
    out["mig_slices"] = {(int(s["gi_id"]), int(s["ci_id"])): (s.get("memory_total_mib"), s.get("memory_used_mib"))
                         for s in gpu.get("mig_slices") or ()}
    return out


# --------------------------------------------------------------------------- verdicts

@dataclass(frozen=True)
class Field:
    label: str
    key: str
    unit: str = ""
    tolerance: float = 0.0  # absolute, in the unit
    relative: float = 0.0  # of the nvidia-smi value; the larger of the two applies
    text: bool = False  # compared as words (case and spacing aside)


FIELDS = (
    Field("name", "name", text=True), Field("UUID", "uuid", text=True), Field("PCI bus id", "pci_bus_id", text=True),
    Field("memory total", "memory_total_mib", "MiB", 1), Field("memory used", "memory_used_mib", "MiB", 16),
    Field("utilization", "utilization", "%", 10), Field("memory utilization", "memory_utilization", "%", 10),
    Field("temperature", "temperature_c", "C", 2), Field("power draw", "power_w", "W", 10, 0.10),
    Field("power limit", "power_limit_w", "W", 1), Field("SM clock", "sm_clock_mhz", "MHz", 50, 0.10),
    Field("memory clock", "memory_clock_mhz", "MHz", 10, 0.02),
    Field("persistence mode", "persistence_mode", text=True), Field("compute mode", "compute_mode", text=True),
    Field("MIG mode, current", "mig_mode", text=True), Field("MIG mode, pending", "mig_pending", text=True),
    Field("virtualization mode", "virtualization", text=True),
)
MATCH, NA_HERE = "match", "N/A on this board"


def shown(value: Any, unit: str = "") -> str:
    if value is None:
        return "N/A"
    if isinstance(value, bool):
        return "enabled" if value else "disabled"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value} {unit}".strip()


def differs(gc: Any, smi: Iterable[Any], unit: str = "") -> str:
    """``differs (gpuconsole X, nvidia-smi Y)``; Y is a range where the readings moved."""
    seen = sorted({v for v in smi if v is not None}, key=lambda v: (str(type(v)), v)) or [None]
    if len(seen) == 1:
        theirs = shown(seen[0], unit)
    elif all(isinstance(v, (int, float)) for v in seen):
        theirs = f"{shown(seen[0])}–{shown(seen[-1], unit)}"
    else:
        theirs = " / ".join(shown(v, unit) for v in seen)
    return f"differs (gpuconsole {shown(gc, unit)}, nvidia-smi {theirs})"


_PCI = re.compile(r"([0-9a-f]+):([0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f])")


def same_word(a: Any, b: Any) -> bool:
    """Equal as words, case and spacing aside; PCI bus ids equal whatever the domain's width
    (``00000000:19:00.0`` and ``0000:19:00.0``)."""
    def norm(value: Any) -> str:
        text = " ".join(str(value).lower().split())
        pci = _PCI.fullmatch(text)
        return f"{int(pci.group(1), 16)}:{pci.group(2)}" if pci else text

    return norm(a) == norm(b)


def verdict(field: Field, gc: Any, smi: list[Any]) -> str:
    """``match``, ``differs (…)`` or ``N/A on this board`` for one field; ``smi`` holds each
    nvidia-smi reading's value (taken before and after gpuconsole's)."""
    known = [v for v in smi if v is not None]
    if gc is None and not known:
        return NA_HERE
    if gc is None or not known:
        return differs(gc, smi, field.unit)
    if field.text or isinstance(gc, (bool, str)):
        return MATCH if any(same_word(gc, v) for v in known) else differs(gc, smi, field.unit)
    slack = max(field.tolerance, field.relative * max(abs(v) for v in known))
    return MATCH if min(known) - slack <= float(gc) <= max(known) + slack else differs(gc, smi, field.unit)


def _processes_text(procs: dict[int, Any]) -> str:
    return ", ".join(f"pid {pid} {shown(mib, 'MiB')}" for pid, mib in sorted(procs.items())) or "none"


def process_verdict(gc: dict[int, Any], smi: list[dict[int, Any]]) -> str:
    """The same PIDs, each holding the same memory (16 MiB aside), as one nvidia-smi reading."""
    for theirs in smi:
        if set(theirs) == set(gc) and all(theirs[p] is None or gc[p] is None or abs(theirs[p] - gc[p]) <= 16
                                          for p in gc):
            return MATCH
    return f"differs (gpuconsole {_processes_text(gc)}, nvidia-smi {' / '.join(_processes_text(t) for t in smi)})"


@dataclass
class Row:
    label: str
    verdict: str
    value: str = ""


def compare_gpu(gc: dict[str, Any], smi: list[dict[str, Any]]) -> list[Row]:
    rows = []
    for field in FIELDS:
        got = gc.get(field.key)
        rows.append(Row(field.label, verdict(field, got, [s.get(field.key) for s in smi]), shown(got, field.unit)))
    rows.append(Row("processes", process_verdict(gc["processes"], [s["processes"] for s in smi]),
                    _processes_text(gc["processes"])))
    for gi_ci in sorted(set(gc["mig_slices"]) | {k for s in smi for k in s["mig_slices"]}):
        ours = gc["mig_slices"].get(gi_ci)
        for n, what, field in ((0, "total", FIELDS[3]), (1, "used", FIELDS[4])):
            theirs = [s["mig_slices"][gi_ci][n] if gi_ci in s["mig_slices"] else None for s in smi]
            value = None if ours is None else ours[n]
            rows.append(Row(f"MIG {gi_ci[0]}/{gi_ci[1]} memory {what}", verdict(field, value, theirs),
                            shown(value, "MiB")))
    return rows


def compare(doc: dict[str, Any], smi_docs: list[dict[str, Any]]) -> tuple[str, dict[str, int]]:
    """The table for every GPU of ``doc`` (gpuconsole's JSON) against nvidia-smi's readings, and
    the count of each kind of verdict."""
    lines: list[str] = []
    counts = {"match": 0, "differs": 0, "N/A": 0}
    host = [Row("driver version", verdict(Field("", "", text=True), doc.get("versions", {}).get("driver"),
                                          [s["driver"] for s in smi_docs]), str(doc.get("versions", {}).get("driver"))),
            Row("CUDA version", verdict(Field("", "", text=True), doc.get("versions", {}).get("cuda"),
                                        [s["cuda"] for s in smi_docs]), str(doc.get("versions", {}).get("cuda")))]
    lines.append("host")
    lines += _rows(host, counts)
    smi_by_uuid = [{g["uuid"]: g for g in s["gpus"]} for s in smi_docs]
    ours = {g["uuid"]: g for g in doc.get("gpus") or ()}
    for gpu in doc.get("gpus") or ():
        theirs = [by.get(gpu["uuid"]) for by in smi_by_uuid]
        lines.append(f"GPU {gpu.get('index')}  {gpu.get('name')}  {gpu['uuid']}")
        if not any(theirs):
            lines.append("  differs (gpuconsole lists it, nvidia-smi does not)")
            counts["differs"] += 1
            continue
        lines += _rows(compare_gpu(gpuconsole_values(gpu), [t for t in theirs if t]), counts)
    for uuid in sorted({u for by in smi_by_uuid for u in by} - set(ours)):
        lines.append(f"GPU ?  {uuid}\n  differs (nvidia-smi lists it, gpuconsole does not)")
        counts["differs"] += 1
    if not ours and not any(smi_by_uuid):
        lines.append("no GPU on either side")
    lines.append(f"{counts['match']} match · {counts['differs']} differ · {counts['N/A']} N/A on this board")
    return "\n".join(lines) + "\n", counts


def _rows(rows: list[Row], counts: dict[str, int]) -> list[str]:
    out = []
    for row in rows:
        kind = "match" if row.verdict == MATCH else "N/A" if row.verdict == NA_HERE else "differs"
        counts[kind] += 1
        out.append(f"  {row.label:<22} {row.verdict}" + (f"  ({row.value})" if row.verdict == MATCH else ""))
    return out


# --------------------------------------------------------------------------- the CUDA load

def find_load(doc: dict[str, Any], pid: int, marker: str) -> tuple[list[str], int | None, str]:
    """Where the load is in gpuconsole's reading: by its pid (``visible``), by its command line
    (``visible``, another pid), or, where the sandbox hides it, the one process NVML lists
    without a user or command line (``hidden``); else ``absent``. Returns lines to print, the
    pid to ask gpuconsole to signal, and which."""
    lines: list[str] = []
    found: tuple[dict[str, Any], dict[str, Any]] | None = None
    unseen = []
    for gpu in doc.get("gpus") or ():
        for proc in gpu.get("processes") or ():
            if int(proc["pid"]) == pid or (marker and marker in (proc.get("command") or "")):
                found = (gpu, proc)
            elif not proc.get("user") and not proc.get("command"):
                unseen.append((gpu, proc))
    if found is not None:
        gpu, proc = found
        lines += [_gpu_line(gpu), _proc_line(proc)]
        if int(proc["pid"]) != pid:
            lines.append(f"  (NVML's pid {proc['pid']}, the load's pid here {pid})")
        return lines, int(proc["pid"]), "visible"
    lines.append(f"the load (pid {pid} here) is not among the processes gpuconsole shows; what NVML reports:")
    for gpu in doc.get("gpus") or ():
        lines.append(_gpu_line(gpu))
        lines += [_proc_line(p) for p in gpu.get("processes") or ()] or ["  (no process)"]
    if len(unseen) == 1:
        lines.append(f"  pid {unseen[0][1]['pid']} has no user or command line here: NVML's pid for a process "
                     "this sandbox does not show (the load, by its memory)")
        return lines, int(unseen[0][1]["pid"]), "hidden"
    return lines, None, "absent"


def _gpu_line(gpu: dict[str, Any]) -> str:
    util = "N/A" if "utilization" in (gpu.get("not_reported") or ()) else f"{shown(gpu.get('utilization'))}%"
    return (f"GPU {gpu.get('index')} {gpu.get('name')} ({gpu.get('uuid')}): {gpu.get('memory_used_mib')} of "
            f"{gpu.get('memory_total_mib')} MiB used, utilization {util}")


def _proc_line(proc: dict[str, Any]) -> str:
    command = proc.get("command") or f"(no command line here; NVML's name: {proc.get('name')})"
    return f"  pid {proc['pid']}  {proc.get('memory_used_mib')} MiB  user {proc.get('user') or 'unknown'}  {command}"


# --------------------------------------------------------------------------- command line

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_trim = sub.add_parser("trim", help="print nvidia-smi's XML trimmed to the compared fields")
    p_trim.add_argument("smi", type=Path)
    p_cmp = sub.add_parser("compare", help="the field-by-field table; exit 1 when a field differs")
    p_cmp.add_argument("--json", type=Path, required=True)
    p_cmp.add_argument("--smi", type=Path, action="append", required=True)
    p_load = sub.add_parser("find-load", help="show the load under its GPU; exit 0 visible, 3 hidden, 4 absent")
    p_load.add_argument("--json", type=Path, required=True)
    p_load.add_argument("--pid", type=int, required=True)
    p_load.add_argument("--marker", default="")
    p_load.add_argument("--pid-file", type=Path, required=True)
    p_lines = sub.add_parser("gpu-lines", help="one line per GPU: memory, utilization, processes")
    p_lines.add_argument("--json", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "trim":
        sys.stdout.write(trim(args.smi.read_text(errors="replace")))
        return 0
    doc = json.loads(args.json.read_text())
    if args.command == "compare":
        readings = [parse_smi(p.read_text(errors="replace")) for p in args.smi if p.exists() and p.stat().st_size]
        table, counts = compare(doc, readings)
        sys.stdout.write(table)
        return 1 if counts["differs"] else 0
    if args.command == "gpu-lines":
        for gpu in doc.get("gpus") or ():
            print(f"{_gpu_line(gpu)}, {len(gpu.get('processes') or ())} processes")
        return 0
    lines, kill_pid, how = find_load(doc, args.pid, args.marker)
    print("\n".join(lines))
    args.pid_file.write_text("" if kill_pid is None else str(kill_pid))
    return {"visible": 0, "hidden": 3}.get(how, 4)


if __name__ == "__main__":
    raise SystemExit(main())
