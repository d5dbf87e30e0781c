"""Rows of the GPUs pane: a GPU, its MIG slices and its processes as cells, and the sort orders.

Display-only: colours come from the user's thresholds (``--gpu-util-thresh``,
``--mem-util-thresh``), a value the driver could not report prints as ``N/A``.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any

from rich.text import Text

from gpuconsole.model import Gpu, GpuProcess, MigMode, MigSlice
from gpuconsole.ui.format import bar, short_model, short_node
from gpuconsole.ui.palette import TEMPERATURE_THRESHOLDS, Palette
from gpuconsole.ui.widgets.cells import right, text

Thresholds = tuple[float, float]

COLUMNS = [
    ("NODE", "node", 13),
    ("#", "index", 2),
    ("MODEL", "model", 11),
    ("UTIL", "util", 10),
    ("MEMORY", "memory", 9),
    ("TEMP", "temp", 5),
    ("POWER", "power", 8),
    ("MIG", "mig", 4),
    ("CLOCKS", "clock", 9),
    ("FAN", "fan", 4),
    ("PCIE RX/TX", "pcie", 10),
    ("INFO", "info", None),
]
BLANK = Text("")


# Sort keys per column; None (N/A) always sorts last, whichever the direction.
SORT_KEYS: dict[str, Callable[[Gpu], Any]] = {
    "node": lambda g: (g.node, g.index),
    "index": lambda g: (g.index, g.node),
    "model": lambda g: (g.name, g.node, g.index),
    "util": lambda g: None if "utilization" in g.not_reported else g.utilization,
    "memory": lambda g: None if "memory" in g.not_reported else g.memory_percent,
    "temp": lambda g: None if "temperature_c" in g.not_reported else g.temperature_c,
    "power": lambda g: None if "power_w" in g.not_reported else g.power_w,
    "mig": lambda g: g.mig_mode.value,
    "clock": lambda g: g.sm_clock_mhz,
    "fan": lambda g: g.fan_percent,
    "pcie": lambda g: None if g.pcie_rx_kbps is None else g.pcie_rx_kbps + (g.pcie_tx_kbps or 0),
}
SORTABLE = list(SORT_KEYS)
LABELS = {key: label for label, key, _ in COLUMNS}


# Columns whose key is never N/A, each with the key that sorts like (value, node, index): one
# sort by an attribute getter (in C) instead of a pair per GPU; the fleet's 8,192 GPUs re-sort on every tick.
_PLAIN_ORDER: dict[str, Callable[[Gpu], Any]] = {
    "node": attrgetter("node", "index"),
    "index": attrgetter("index", "node"),
    "model": attrgetter("name", "node", "index"),
}


def sort_gpus(gpus: tuple[Gpu, ...], column: str, descending: bool) -> list[Gpu]:
    plain = _PLAIN_ORDER.get(column)
    if plain is not None:
        return sorted(gpus, key=plain, reverse=descending)
    key = SORT_KEYS[column]
    known = [(key(g), g) for g in gpus]
    values = sorted((pair for pair in known if pair[0] is not None), key=lambda p: (p[0], p[1].node, p[1].index),
                    reverse=descending)
    return [g for _, g in values] + sorted((g for v, g in known if v is None), key=lambda g: (g.node, g.index))


def gib_pair(used_mib: float, total_mib: float) -> str:
    return f"{used_mib / 1024:.1f}/{total_mib / 1024:.0f}G"


def na(palette: Palette) -> Text:
    return right("N/A", palette.dim)


def util_cell(value: float | None, palette: Palette, thresholds: Thresholds) -> Text:
    if value is None:
        return na(palette)
    style = palette.level(value, thresholds)
    cell = Text(no_wrap=True, justify="right")
    cell.append(bar(value, 5), style)
    cell.append(f"{value:4.0f}%", style)
    return cell


def gpu_cells(gpu: Gpu, palette: Palette, util_t: Thresholds, mem_t: Thresholds) -> tuple[object, ...]:
    missing = gpu.not_reported
    mig = {MigMode.ENABLED: "on", MigMode.DISABLED: "off"}.get(gpu.mig_mode, "N/A")
    mig_cell = text(mig, palette.accent if gpu.mig_mode is MigMode.ENABLED else (palette.dim if mig == "N/A" else None))
    if gpu.mig_pending is not None:
        mig_cell = text(f"→{ {MigMode.ENABLED: 'on', MigMode.DISABLED: 'off'}.get(gpu.mig_pending, '?') }", palette.warn)
    power = ("N/A" if "power_w" in missing else f"{gpu.power_w:.0f}") + "/" + (
        "N/A" if "power_limit_w" in missing else f"{gpu.power_limit_w:.0f}W")
    return (
        text(short_node(gpu.node)),
        right(gpu.index),
        text(short_model(gpu.name)),
        util_cell(None if "utilization" in missing else gpu.utilization, palette, util_t),
        na(palette) if "memory" in missing else
        right(gib_pair(gpu.memory_used_mib, gpu.memory_total_mib), palette.level(gpu.memory_percent, mem_t)),
        na(palette) if "temperature_c" in missing else
        right(f"{gpu.temperature_c}°", palette.level(gpu.temperature_c, TEMPERATURE_THRESHOLDS)),
        right(power, palette.dim if "N/A" in power else None),
        mig_cell,
        na(palette) if gpu.sm_clock_mhz is None else right(f"{gpu.sm_clock_mhz}/{gpu.memory_clock_mhz or '-'}"),
        na(palette) if gpu.fan_percent is None else right(f"{gpu.fan_percent}%"),
        na(palette) if gpu.pcie_rx_kbps is None else right(f"{gpu.pcie_rx_kbps / 1024:.0f}/{(gpu.pcie_tx_kbps or 0) / 1024:.0f}M"),
        text(gpu_info(gpu), palette.warn if gpu.throttle_reasons or gpu.ecc_volatile_errors else None),
    )


def gpu_info(gpu: Gpu) -> str:
    """What is unusual about a GPU, in a few words (throttling, ECC, virtualization, pending MIG)."""
    words = [r.replace("_", " ") for r in gpu.throttle_reasons if r != "gpu_idle"]
    if gpu.ecc_volatile_errors:
        words.append(f"{gpu.ecc_volatile_errors} ECC errors")
    if gpu.mig_pending is not None:
        words.append(f"MIG {gpu.mig_pending.value} after reset")
    if gpu.virtualization and gpu.virtualization != "none":
        words.append({"host_vgpu": f"vGPU host ({len(gpu.vgpu_instances)} vGPUs)", "vgpu": "vGPU guest"}.get(
            gpu.virtualization, gpu.virtualization.replace("_", " ")))
    if gpu.persistence_mode is False:
        words.append("persistence off")
    return " · ".join(words)


def slice_cells(mig: MigSlice, palette: Palette, util_t: Thresholds, mem_t: Thresholds) -> tuple[object, ...]:
    percent = 100.0 * mig.memory_used_mib / mig.memory_total_mib if mig.memory_total_mib else 0.0
    return (
        BLANK,
        BLANK,
        text(f"└ {mig.profile}", palette.accent),
        util_cell(mig.utilization, palette, util_t),
        right(gib_pair(mig.memory_used_mib, mig.memory_total_mib), palette.level(percent, mem_t)),
        BLANK, BLANK, BLANK, BLANK, BLANK, BLANK,
        text(f"gi {mig.gi_id} ci {mig.ci_id} · {mig.uuid}", palette.dim),
    )


KIND_SHORT = {"compute": "C", "graphics": "G", "compute+graphics": "C+G"}


def process_cells(proc: GpuProcess, palette: Palette, util_t: Thresholds, *, nested: bool) -> tuple[object, ...]:
    cpu = "" if proc.cpu_percent is None else f"CPU {proc.cpu_percent:.0f}% · "
    return (
        text(f"{'   ' if nested else ' '}└ {proc.pid}", palette.dim),
        BLANK,
        text(proc.name),
        util_cell(proc.sm_utilization, palette, util_t),
        right(f"{proc.memory_used_mib / 1024:.1f}G"),
        BLANK,
        text(proc.user or "?", None if proc.user else palette.dim),
        BLANK, BLANK, BLANK, BLANK,  # the MIG column is the GPU's: the process kind goes with its command
        text(f"{KIND_SHORT.get(proc.kind, proc.kind)} · {cpu}{proc.command or proc.name}"),
    )


def process_words(proc: GpuProcess) -> tuple[object, ...]:
    """What the filter matches a process on."""
    return proc.pid, proc.name, proc.user, proc.pod_uid, proc.command
