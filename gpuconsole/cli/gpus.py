"""``gpuconsole gpus --once [--json]``: this host's GPUs once, like ``nvitop -1`` or ``gpustat --json``.

The GPU source is chosen as the console chooses it; each GPU is listed with its MIG slices and
processes, a field the driver cannot report as ``null`` (or in ``not_reported``). Exit status:
0 with a live reading, 1 when the source could not be read, 2 for a bad command line.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from typing import TYPE_CHECKING, Any, TextIO

from gpuconsole.cli.table import WIDTH, Column, add_wide_option, fit, render_table, width_of, wrap

if TYPE_CHECKING:  # the model (msgspec) loads when a command runs, not when the line is parsed
    from gpuconsole.model import Gpu, GpuReading, SourceStatus

SCHEMA = "gpuconsole.gpus/1"
# To fit, the node gives first and may go, then the UUID, the name and the MIG mode.
GPU_COLUMNS = (Column("IDX", right=True, key=True), Column("NAME", give=3, least=12), Column("UUID", give=4, least=12),
               Column("UTIL", right=True), Column("MEMORY", right=True), Column("TEMP", right=True),
               Column("POWER", right=True), Column("MIG", give=2, least=8), Column("NODE", give=5, least=12, drop=True))
DEFAULT_UTIL_THRESHOLDS = (10.0, 75.0)
DEFAULT_MEMORY_THRESHOLDS = (10.0, 80.0)


def add_gpus_parser(sub: Any, common: argparse.ArgumentParser, seconds: Any) -> None:
    """Add ``gpus`` to the CLI's subparsers (``seconds``: the CLI's type for --wait)."""
    gpus = sub.add_parser(
        "gpus",
        parents=[common],
        help="print this host's GPUs, MIG slices and processes once (--once)",
        description="One snapshot of the GPUs, their MIG slices and their processes, as text or JSON.",
    )
    gpus.add_argument("--once", action="store_true", help="print one snapshot and exit (required)")
    gpus.add_argument("--json", dest="gpus_json", action="store_true", help="print JSON (like gpustat --json)")
    gpus.add_argument("--wait", dest="gpus_wait", type=seconds, default=5.0, metavar="S",
                      help="seconds to wait for the GPU source's answer (default 5)")
    add_wide_option(gpus)


def _percent(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a percentage, got {text!r}") from None
    if not 0.0 <= value <= 100.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 100, got {text}")
    return value


def add_threshold_options(parser: argparse.ArgumentParser) -> None:
    """``--gpu-util-thresh LOW HIGH`` and ``--mem-util-thresh LOW HIGH``, as nvitop has them."""
    group = parser.add_argument_group("GPU colours (below LOW light, from HIGH heavy)")
    group.add_argument("--gpu-util-thresh", nargs=2, type=_percent, default=argparse.SUPPRESS, metavar=("LOW", "HIGH"),
                       help=f"utilization thresholds in percent (default {DEFAULT_UTIL_THRESHOLDS[0]:g} {DEFAULT_UTIL_THRESHOLDS[1]:g})")
    group.add_argument("--mem-util-thresh", nargs=2, type=_percent, default=argparse.SUPPRESS, metavar=("LOW", "HIGH"),
                       help=f"memory thresholds in percent (default {DEFAULT_MEMORY_THRESHOLDS[0]:g} {DEFAULT_MEMORY_THRESHOLDS[1]:g})")


def thresholds_from_args(args: argparse.Namespace) -> tuple[tuple[float, float], tuple[float, float]]:
    """The (utilization, memory) thresholds asked for. Raises ValueError (one line) if LOW ≥ HIGH."""
    out = []
    for flag, name, default in (("--gpu-util-thresh", "gpu_util_thresh", DEFAULT_UTIL_THRESHOLDS),
                                ("--mem-util-thresh", "mem_util_thresh", DEFAULT_MEMORY_THRESHOLDS)):
        value = getattr(args, name, None)
        if value is None:
            out.append(default)
            continue
        low, high = value
        if low >= high:
            raise ValueError(f"argument {flag}: LOW must be below HIGH, got {low:g} {high:g}")
        out.append((float(low), float(high)))
    return out[0], out[1]


def run_gpus(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``gpuconsole gpus --once``. Returns the exit status."""
    from gpuconsole.core.fleet.gpus_once import read_gpus_once
    from gpuconsole.core.fleet.sources import SourceOptions

    out = out or sys.stdout
    err = err or sys.stderr
    if not args.once:
        print("gpuconsole: error: gpus prints one snapshot: add --once (the live view is the console's "
              "GPUs pane: gpuconsole, then 2)", file=err)
        return 2
    options = SourceOptions(demo=args.demo, seed=args.seed, demo_nodes=args.demo_nodes, demo_faults=args.demo_faults,
                            gpus=args.gpus)
    try:
        reading, status = read_gpus_once(options, args.gpus_wait)
    except ValueError as exc:
        print(f"gpuconsole: error: {exc}", file=err)
        return 2
    from gpuconsole.model import SourceState

    live = reading is not None and status.state is SourceState.LIVE
    try:
        if args.gpus_json:
            json.dump(document(reading, status), out, indent=2)
            out.write("\n")
        elif reading is not None:
            out.write(render_text(reading, status, width_of(args)))
        out.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    if not live:
        print(f"gpuconsole: GPU telemetry ({status.name}): {status.describe(status.updated_at or 0.0)}", file=err)
        if status.hint:
            print(f"gpuconsole: {status.hint}", file=err)
        if not args.demo and "--demo" not in (status.hint or ""):
            print("gpuconsole: or try it on a simulated fleet: gpuconsole gpus --once --demo", file=err)
        return 1
    return 0


def document(reading: GpuReading | None, status: SourceStatus) -> dict[str, Any]:
    """The JSON document of one reading."""
    from gpuconsole.model import to_jsonable

    gpus = reading.gpus if reading is not None else ()
    return {
        "schema": SCHEMA,
        "hostname": gpus[0].node if gpus else socket.gethostname().split(".", 1)[0],
        "taken_at": reading.taken_at if reading is not None else None,
        "versions": dict(reading.versions) if reading is not None else {},
        "source": {"name": status.name, "state": status.state.value, "error": status.error, "hint": status.hint},
        "gpus": [gpu_document(g) for g in gpus],
    }


# What a name in ``Gpu.not_reported`` stands for in the JSON: those fields are null, never 0.
NOT_REPORTED_FIELDS = {"memory": ("memory_used_mib", "memory_total_mib", "memory_percent")}


def gpu_document(gpu: Gpu, *, percent: bool = True) -> dict[str, Any]:
    """One GPU as JSON: every field of the model (and ``memory_percent`` when ``percent``), a
    figure the driver could not report as null."""
    from gpuconsole.model import to_jsonable

    doc = to_jsonable(gpu)
    if percent:
        doc["memory_percent"] = round(gpu.memory_percent, 1)
    for name in gpu.not_reported:
        for field in NOT_REPORTED_FIELDS.get(name, (name,)):
            if field in doc:
                doc[field] = None
    return doc


def _na(gpu: Gpu, name: str, text: str) -> str:
    return "N/A" if name in gpu.not_reported else text


def render_text(reading: GpuReading, status: SourceStatus, width: int | None = WIDTH) -> str:
    """A plain-text table in ``width`` columns (None: whole): one line per GPU, then its MIG
    slices and processes, indented (a line too long for the width is cut)."""
    lines = []
    versions = dict(reading.versions)
    head = [f"source {status.name} ({status.describe(reading.taken_at)})"]
    head += [f"{label} {versions[key]}" for key, label in (("driver", "driver"), ("cuda", "CUDA"), ("nvml", "NVML"))
             if key in versions]
    lines.append(wrap(" · ".join(head), width))
    if not reading.gpus:
        lines.append("no GPUs")
        return "\n".join(lines) + "\n"
    rows = []
    for g in reading.gpus:
        power = f"{_na(g, 'power_w', f'{g.power_w:.0f}')}/{_na(g, 'power_limit_w', f'{g.power_limit_w:.0f}')} W"
        rows.append((g.index, g.name, g.uuid, _na(g, "utilization", f"{g.utilization:.0f}%"),
                     _na(g, "memory", f"{g.memory_used_mib}/{g.memory_total_mib} MiB"), _na(g, "temperature_c", f"{g.temperature_c}°C"),
                     power, g.mig_mode.value + (f"→{g.mig_pending.value}" if g.mig_pending else ""), g.node))
    table = render_table(GPU_COLUMNS, rows, width)
    lines.append(table[0])
    for g, row in zip(reading.gpus, table[1:], strict=True):
        lines.append(row)
        under = []
        for s in g.mig_slices:
            util = "N/A" if s.utilization is None else f"{s.utilization:.0f}%"
            under.append(f"    └ MIG {s.profile:<12} gi {s.gi_id} ci {s.ci_id} {util:>4} "
                         f"{s.memory_used_mib}/{s.memory_total_mib} MiB  {s.uuid}")
        for v in g.vgpu_instances:
            used = "N/A" if v.memory_used_mib is None else f"{v.memory_used_mib} MiB"
            under.append(f"    └ vGPU {v.vgpu_id} {v.type_name}  vm {v.vm_id or '-'}  {used}")
        for p in g.processes:
            where = f" on {p.mig_uuid}" if p.mig_uuid else ""
            sm = "N/A" if p.sm_utilization is None else f"{p.sm_utilization:.0f}%"
            cpu = "N/A" if p.cpu_percent is None else f"{p.cpu_percent:.0f}%"
            pod = f" pod {p.pod_uid}" if p.pod_uid else ""
            under.append(f"    pid {p.pid:<8} {p.user or '?':<10} {p.kind:<8} {p.memory_used_mib:>6} MiB SM {sm:>4} "
                         f"CPU {cpu:>4}  {p.command or p.name}{where}{pod}")
        lines += [fit(line, width) for line in under]
    return "\n".join(lines) + "\n"
