"""DCGM exporter series, as the Prometheus HTTP API returns them, into :mod:`gpuconsole.model`.

No I/O: the queries :class:`~gpuconsole.backends.prometheus.source.PrometheusGpus` sends (each
aggregated over only the labels read here, which halves the answer) and :func:`build_gpus`,
which turns the answers into GPUs and MIG slices. A value the exporter does not report is None.
"""

from __future__ import annotations

import gc
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from itertools import repeat
from operator import add
from typing import Any, cast

from gpuconsole.backends.prometheus.answers import (
    Column,
    Identity,
    Roster,
    column_of,
    series_of,
)
from gpuconsole.model import Gpu, GpuSample, MigMode, MigSlice

UTIL = "DCGM_FI_DEV_GPU_UTIL"  # percent
FB_USED = "DCGM_FI_DEV_FB_USED"  # MiB
FB_FREE = "DCGM_FI_DEV_FB_FREE"  # MiB
FB_RESERVED = "DCGM_FI_DEV_FB_RESERVED"  # MiB, newer exporters
TEMP = "DCGM_FI_DEV_GPU_TEMP"  # °C
POWER = "DCGM_FI_DEV_POWER_USAGE"  # W
POWER_LIMIT = "DCGM_FI_DEV_POWER_MGMT_LIMIT"  # W, where the exporter's field list has it
SM_CLOCK = "DCGM_FI_DEV_SM_CLOCK"  # MHz
MEM_CLOCK = "DCGM_FI_DEV_MEM_CLOCK"  # MHz
MEM_COPY_UTIL = "DCGM_FI_DEV_MEM_COPY_UTIL"  # percent
GR_ENGINE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"  # ratio 0..1, profiling metrics only
XID = "DCGM_FI_DEV_XID_ERRORS"  # the last XID error (0: none)

# The order of the values kept per series (see _Record).
METRICS: tuple[str, ...] = (FB_USED, FB_FREE, FB_RESERVED, UTIL, TEMP, POWER, POWER_LIMIT, SM_CLOCK, MEM_CLOCK,
                            MEM_COPY_UTIL, GR_ENGINE, XID)
_I = {name: i for i, name in enumerate(METRICS)}
I_USED, I_FREE, I_RESERVED, I_UTIL, I_TEMP, I_POWER, I_LIMIT, I_SM, I_MEMCLK, I_MEMUTIL, I_GR, I_XID = range(len(METRICS))

# Read on every poll: what the table shows and changes between scrapes.
FAST: tuple[str, ...] = (UTIL, FB_USED, TEMP, POWER, SM_CLOCK, MEM_COPY_UTIL, GR_ENGINE)
# Read every SLOW_EVERY_S: what changes seldom (the memory size, the power limit, the last XID) and the
# identity labels (model, pods), which cost as much to read as all the values together.
SLOW: tuple[str, ...] = (FB_FREE, FB_RESERVED, POWER_LIMIT, MEM_CLOCK, XID)
IDENTITY = "identity"  # the name of the query of FB_USED with the identity labels

KEY_LABELS: tuple[str, ...] = ("UUID", "GPU_I_ID")
KEY_LABELS_WITHOUT_UUID: tuple[str, ...] = ("UUID", "Hostname", "gpu", "GPU_I_ID")
IDENTITY_LABELS: tuple[str, ...] = ("UUID", "Hostname", "gpu", "GPU_I_ID", "kubernetes_node", "node", "instance",
                                    "modelName", "GPU_I_PROFILE", "pod", "namespace", "container",
                                    "DCGM_FI_DRIVER_VERSION")
ANCHOR = FB_USED  # the metric every GPU and every MIG instance reports: its query carries the identity

_LABEL_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_COMPUTE_RE = re.compile(r"^(?:\d+c\.)?(\d+)g\.")


def instant_query(metric: str, selector: str = "", *, by_uuid: bool = True) -> str:
    """The PromQL of one metric for the whole fleet, reduced to the labels this module reads.

    ``metric`` :data:`IDENTITY` is the anchor metric with every identity label, counted rather
    than valued, so that its answer stays the same until a label changes (see
    :func:`~gpuconsole.backends.prometheus.answers.without_times`); any other keeps the key of a series only (``UUID`` and
    ``GPU_I_ID``; node and index too when the exporter does not label ``UUID``).
    """
    if metric == IDENTITY:
        return f"count by ({', '.join(IDENTITY_LABELS)}) ({ANCHOR}{_braces(selector)})"
    labels = KEY_LABELS if by_uuid else KEY_LABELS_WITHOUT_UUID
    return f"max by ({', '.join(labels)}) ({metric}{_braces(selector)})"


def instant_queries(selector: str = "", *, by_uuid: bool = True) -> dict[str, str]:
    """``{name: query}`` of the identity query and of every metric a poll reads."""
    return {name: instant_query(name, selector, by_uuid=by_uuid) for name in (IDENTITY, *METRICS)}


def _braces(selector: str) -> str:
    selector = selector.strip().strip("{}").strip()
    return f"{{{selector}}}" if selector else ""


def check_selector(selector: str) -> str:
    """``selector`` (label matchers such as ``cluster="prod"``) if it looks like PromQL matchers.

    Raises:
        ValueError: one line saying what is wrong.
    """
    inner = selector.strip().strip("{}").strip()
    for part in _split_matchers(inner):
        name = re.split(r"!=|=~|!~|=", part, maxsplit=1)[0].strip()
        if not _LABEL_RE.match(name) or name == part.strip():
            raise ValueError(f'not a label matcher: {part.strip()!r} (e.g. cluster="prod")')
    return inner


def _split_matchers(text: str) -> list[str]:
    parts, depth_quote, current = [], False, []
    escaped = False
    for ch in text:
        if escaped:
            current.append(ch)
            escaped = False
            continue
        if ch == "\\":
            escaped = True
            current.append(ch)
            continue
        if ch == '"':
            depth_quote = not depth_quote
        if ch == "," and not depth_quote:
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    if "".join(current).strip():
        parts.append("".join(current))
    return [p for p in parts if p.strip()]


def quote(value: str) -> str:
    """A PromQL string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def history_queries(uuid: str, selector: str = "") -> dict[str, str]:
    """Range queries of one GPU's utilization, memory, temperature and power.

    The whole-GPU series is used where there is one; a MIG GPU without it is summed (memory) or
    averaged (engine activity) over its instances.
    """
    extra = check_selector(selector) if selector else ""
    base = f"UUID={quote(uuid)}" + (f", {extra}" if extra else "")
    whole = f"{{{base}, GPU_I_ID=\"\"}}"
    every = f"{{{base}}}"
    return {
        "utilization": f"max({UTIL}{whole}) or 100 * avg({GR_ENGINE}{every})",
        "memory": f"max({FB_USED}{whole}) or sum({FB_USED}{every})",
        "temperature": f"max({TEMP}{every})",
        "power": f"max({POWER}{whole}) or max({POWER}{every})",
    }


def collect(results: Mapping[str, Sequence[Any]], roster: Roster | None = None) -> tuple[dict[str, Column], Roster]:
    """The columns of decoded vector results (``{metric: data.result}``) and the roster to build
    them with: ``roster`` (or none) including every series of the columns."""
    columns = {metric: column_of(series_of(items)) for metric, items in results.items()}
    return columns, (roster or Roster({})).including(columns, first=ANCHOR)


def compute_share(profile: str | None) -> float:
    """Share of a GPU's compute a MIG profile holds (``3g.40gb`` → 3/7); 1 where unknown."""
    match = _COMPUTE_RE.match(profile or "")
    return min(1.0, int(match.group(1)) / 7.0) if match else 1.0


def _int(value: float | None) -> int | None:
    return None if value is None else round(value)


def _no_value(_key: object) -> None:
    return None


@contextmanager
def _no_collection() -> Iterator[None]:
    """No cyclic garbage collection while a reading's thousands of GPUs are made: every few
    hundred of them would start one, each walking the young objects again (about 15 % of the
    build at 8,192 GPUs), and none of them is garbage. Collections resume at the end."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def build_gpus(columns: Mapping[str, Column], roster: Roster) -> tuple[Gpu, ...]:
    """The GPUs of the roster with their values and MIG instances, sorted by node and index.

    Args:
        columns: ``{metric: column}``; a metric the exporter does not report is absent or empty.
        roster: what each series is: one that names every series of ``columns``
            (:meth:`Roster.including`); a series it does not name is not read.
    """
    with _no_collection():
        return _build_gpus(columns, roster)


def _build_gpus(columns: Mapping[str, Column], roster: Roster) -> tuple[Gpu, ...]:
    # Column by column over every GPU, in loops that run in C where no value is missing; then
    # each GPU is made of its row, the constructor mapped over the columns (nothing else is made
    # per GPU).
    absent: list[float | None] = [None] * len(roster.gpus)
    raw = [roster.values(m, columns[m]) if m in columns and columns[m].whole else absent for m in METRICS]
    used, free, reserved, util, temp, power, limit, sm, memclk, memutil, gr, xid = raw
    gr_percent = _rounded(_times(gr, 100.0), 1)
    utilization = _rounded(util, 1)
    if None in utilization:  # the graphics engine's activity where the exporter has no utilization
        utilization = [u if u is not None else (g if g is not None else 0.0) for u, g in zip(utilization, gr_percent)]
    used = _present(used, 0.0)
    total = used
    for more in (free, reserved):
        if more is not absent:
            total = list(map(add, total, _present(more, 0.0)))
    uuids, nodes, indexes, models, pods, namespaces = roster.listed()
    # Gpu's fields by position, those the exporter does not report at their defaults (repeat):
    # the whole map runs in C, msgspec's constructor included.
    out = list(map(
        Gpu, uuids, nodes, indexes, models, utilization, list(map(round, used)), list(map(round, total)),
        list(map(int, _present(temp, 0))), _rounded(_present(power, 0.0), 1), _rounded(_present(limit, 0.0), 1),
        repeat(MigMode.DISABLED), repeat(()), repeat(()), repeat(""),  # mig_mode … pci_bus_id
        memutil, _rounded(sm), _rounded(memclk),
        *(repeat(None),) * 6, repeat(()), repeat(None), repeat(None), repeat(()),  # fan_percent … vgpu_instances
        _rounded(xid), gr_percent, pods, namespaces))
    if roster.parts:  # MIG GPUs: made again, of their own values and their instances'
        parts = [columns[m].parts.get if m in columns else _no_value for m in METRICS]
        for i, (key, ident) in enumerate(roster.gpus.items()):
            instances = roster.parts.get(key)
            if instances is not None:
                out[i] = _mig_gpu(ident, [values[i] for values in raw],
                                  [(part, [get((key, gi)) for get in parts]) for gi, part in instances])
    # The roster lists its GPUs by node and index (ORDER) and each GPU is made of its identity,
    # so ``out`` is in that order already.
    return tuple(out)


def _present(values: list[Any], default: Any) -> list[Any]:
    """``values`` with ``default`` for each missing one."""
    if None not in values:
        return values
    return [default if v is None else v for v in values]


def _rounded(values: list[float | None], digits: int | None = None) -> list[Any]:
    """``values`` rounded (to ``digits``, or to whole numbers), a missing one staying ``None``."""
    if None not in values:
        if digits is not None:
            # Rounding to digits is slow (about 0.5 µs a value); most metrics are whole numbers.
            try:
                if all(map(float.is_integer, values)):
                    return values
            except TypeError:  # an int among them
                pass
        return list(map(round, cast("list[float]", values), repeat(digits)))
    if values.count(None) == len(values):
        return values
    return [None if v is None else round(v, digits) for v in values]


def _times(values: list[float | None], factor: float) -> list[float | None]:
    return [None if v is None else v * factor for v in values]


def _max(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _mig_gpu(ident: Identity, v: list[float | None], instances: Sequence[tuple[Identity, list[float | None]]]) -> Gpu:
    """A MIG GPU: its whole-GPU values where the exporter gives them, else from its instances."""
    uuid = ident.uuid
    mig = []
    model, node = ident.model, ident.node
    for part, values in instances:
        mig.append(_slice(uuid, part, values))
        model = model or part.model
        node = node if node != "unknown" else part.node
    used, free, reserved = v[I_USED], v[I_FREE], v[I_RESERVED]
    if used is None:
        used = float(sum(s.memory_used_mib for s in mig))
        if free is None:
            free = float(sum(s.memory_total_mib for s in mig)) - used
    total = used + (free or 0.0) + (reserved or 0.0)
    known = [s for s in mig if s.utilization is not None]
    derived = sum((s.utilization or 0.0) * compute_share(s.profile) for s in known) if known else None
    gr = v[I_GR] if v[I_GR] is not None else (derived / 100.0 if derived is not None else None)
    util = v[I_UTIL] if v[I_UTIL] is not None else derived
    temp = v[I_TEMP] if v[I_TEMP] is not None else _max(values[I_TEMP] for _, values in instances)
    power = v[I_POWER] if v[I_POWER] is not None else _max(values[I_POWER] for _, values in instances)
    limit = v[I_LIMIT]
    return Gpu(
        uuid, node, ident.index, model,
        round(util, 1) if util is not None else 0.0,
        round(used),
        round(total),
        int(temp) if temp is not None else 0,
        round(power, 1) if power is not None else 0.0,
        round(limit, 1) if limit is not None else 0.0,
        mig_mode=MigMode.ENABLED,
        mig_slices=tuple(mig),
        memory_utilization=v[I_MEMUTIL],
        sm_clock_mhz=_int(v[I_SM]),
        memory_clock_mhz=_int(v[I_MEMCLK]),
        xid_errors=_int(v[I_XID]),
        gr_engine_active=round(gr * 100.0, 1) if gr is not None else None,
    )


def _slice(gpu_uuid: str, ident: Identity, v: list[float | None]) -> MigSlice:
    used = v[I_USED] or 0.0
    total = used + (v[I_FREE] or 0.0) + (v[I_RESERVED] or 0.0)
    gr = v[I_GR]
    return MigSlice(
        uuid=f"MIG-{gpu_uuid}/{ident.gi_id}/0",
        gpu_uuid=gpu_uuid,
        gi_id=ident.gi_id,
        ci_id=0,
        profile=ident.profile,
        memory_total_mib=round(total),
        memory_used_mib=round(used),
        utilization=round(gr * 100.0, 1) if gr is not None else None,
        pod=ident.pod,
        namespace=ident.namespace,
    )


def driver_versions(roster: Roster) -> tuple[tuple[str, str], ...]:
    """``(("driver", "550.54.15"),)`` when the fleet runs one driver; the versions joined when several."""
    return (("driver", ", ".join(roster.drivers)),) if roster.drivers else ()


def samples(series: Mapping[str, Sequence[Any]]) -> tuple[GpuSample, ...]:
    """Merge range answers (``{"utilization": matrix, "memory": …}``) into samples by time.

    A time with no utilization is left out; another missing value reads as 0.
    """
    columns: dict[str, dict[float, float]] = {}
    for name, result in series.items():
        points: dict[float, float] = {}
        for item in result:
            for pair in item.get("values", ()) if isinstance(item, Mapping) else ():
                try:
                    ts, value = float(pair[0]), float(pair[1])
                except (TypeError, ValueError, IndexError):
                    continue
                if not math.isnan(value):
                    points[ts] = value
        columns[name] = points
    util = columns.get("utilization", {})
    mem, temp, power = columns.get("memory", {}), columns.get("temperature", {}), columns.get("power", {})
    return tuple(GpuSample(ts, round(util[ts], 1), float(round(mem.get(ts, 0.0))), round(temp.get(ts, 0.0), 1),
                           round(power.get(ts, 0.0), 1)) for ts in sorted(util))
