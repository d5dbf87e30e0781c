"""DCGM exporter series, as the Prometheus HTTP API returns them, into :mod:`gpuconsole.model`.

Pure functions, no I/O: the queries :class:`~gpuconsole.backends.prometheus.PrometheusGpus` sends,
and the translation of their JSON answers into :class:`Gpu` and :class:`MigSlice` values.

One instant query per metric reads the whole fleet. Each query aggregates with ``max by`` over
the labels this module reads, so Prometheus drops the rest (``instance``, ``job``, ``device``,
``pci_bus_id`` …) before the answer is written: the answer, and the JSON to parse, is half the
size. The query of ``DCGM_FI_DEV_FB_USED`` (reported for every GPU and every MIG instance)
carries the identity labels: node, index, model, MIG profile, pod; the others only the key of a
series, the GPU's ``UUID`` (or node and index, for an exporter without it) and ``GPU_I_ID``.

A series with a ``GPU_I_ID`` label belongs to a MIG instance of the GPU named by ``UUID``; one
without it to the whole GPU. Where the exporter reports a value only per MIG instance (memory,
the graphics engine activity), the GPU's value is derived from its instances. A value the
exporter does not report stays ``None``, which the console shows as N/A.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

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

KEY_LABELS: tuple[str, ...] = ("UUID", "Hostname", "gpu", "GPU_I_ID")
NODE_LABELS: tuple[str, ...] = ("Hostname", "kubernetes_node", "node", "instance")
IDENTITY_LABELS: tuple[str, ...] = (*KEY_LABELS, "kubernetes_node", "node", "instance", "modelName", "GPU_I_PROFILE",
                                    "pod", "namespace", "container", "DCGM_FI_DRIVER_VERSION")
_INSTANCE_LABELS = frozenset({"GPU_I_ID", "GPU_I_PROFILE", "pod", "namespace", "container"})
ANCHOR = FB_USED  # the metric whose query carries the identity labels

_LABEL_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_COMPUTE_RE = re.compile(r"^(?:\d+c\.)?(\d+)g\.")


def instant_query(metric: str, selector: str = "") -> str:
    """The PromQL of one metric for the whole fleet, reduced to the labels this module reads."""
    labels = IDENTITY_LABELS if metric == ANCHOR else KEY_LABELS
    return f"max by ({', '.join(labels)}) ({metric}{_braces(selector)})"


def instant_queries(selector: str = "") -> dict[str, str]:
    """``{metric: query}`` for every metric a poll reads."""
    return {metric: instant_query(metric, selector) for metric in METRICS}


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


# --------------------------------------------------------------------------- answers


class PrometheusAnswerError(ValueError):
    """An answer that is not what the Prometheus HTTP API returns."""


def vector(answer: Any) -> list[Any]:
    """The ``result`` list of an instant query's ``vector`` answer (already JSON-decoded)."""
    try:
        data = answer["data"]
        kind = data["resultType"]
        result = data["result"]
    except (KeyError, TypeError) as exc:
        raise PrometheusAnswerError("an answer without data.result") from exc
    if kind != "vector" or not isinstance(result, list):
        raise PrometheusAnswerError(f"expected a vector, got {kind!r}")
    return result


def matrix(answer: Any) -> list[Any]:
    """The ``result`` list of a range query's ``matrix`` answer."""
    try:
        data = answer["data"]
        kind = data["resultType"]
        result = data["result"]
    except (KeyError, TypeError) as exc:
        raise PrometheusAnswerError("an answer without data.result") from exc
    if kind != "matrix" or not isinstance(result, list):
        raise PrometheusAnswerError(f"expected a matrix, got {kind!r}")
    return result


class _Record:
    """The values of one GPU or one MIG instance, one slot per metric, and its identity labels."""

    __slots__ = ("labels", "values")

    def __init__(self, labels: Mapping[str, str]) -> None:
        self.labels = labels
        self.values: list[float | None] = [None] * len(METRICS)


def _gpu_key(labels: Mapping[str, str]) -> str:
    uuid = labels.get("UUID")
    if uuid:
        return uuid
    return f"{labels.get('Hostname', '')}:{labels.get('gpu', '')}"


def collect(results: Mapping[str, Sequence[Any]]) -> tuple[dict[str, _Record], dict[tuple[str, str], _Record]]:
    """Fold each metric's vector into one record per GPU and per MIG instance.

    Args:
        results: ``{metric: vector result}``; a metric the exporter does not report is absent
            or empty.
    """
    gpus: dict[str, _Record] = {}
    slices: dict[tuple[str, str], _Record] = {}
    # The anchor first, so records are created with the identity labels.
    order = [ANCHOR, *(m for m in results if m != ANCHOR)]
    for metric in order:
        items = results.get(metric)
        if not items:
            continue
        slot = _I[metric]
        for item in items:
            try:
                labels = item["metric"]
                raw = item["value"][1]
            except (KeyError, IndexError, TypeError):
                continue
            try:
                value = float(raw)
            except (TypeError, ValueError):
                continue
            if value != value or value in (math.inf, -math.inf):
                continue
            key = labels.get("UUID") or _gpu_key(labels)
            gi = labels.get("GPU_I_ID")
            if gi:
                skey = (key, gi)
                record = slices.get(skey)
                if record is None:
                    record = slices[skey] = _Record(labels)
                if key not in gpus:  # a MIG GPU known only by its instances so far
                    gpus[key] = _Record({k: v for k, v in labels.items() if k not in _INSTANCE_LABELS})
            else:
                record = gpus.get(key)
                if record is None:
                    record = gpus[key] = _Record(labels)
            record.values[slot] = value
    return gpus, slices


def node_of(labels: Mapping[str, str]) -> str:
    for name in NODE_LABELS:
        value = labels.get(name)
        if value:
            return value.rsplit(":", 1)[0] if name == "instance" else value
    return "unknown"


def compute_share(profile: str | None) -> float:
    """Share of a GPU's compute a MIG profile holds (``3g.40gb`` → 3/7); 1 where unknown."""
    match = _COMPUTE_RE.match(profile or "")
    return min(1.0, int(match.group(1)) / 7.0) if match else 1.0


def _int(value: float | None) -> int | None:
    return None if value is None else int(round(value))


def build_gpus(gpus: dict[str, _Record], slices: dict[tuple[str, str], _Record]) -> tuple[Gpu, ...]:
    """The GPUs of the records, with their MIG instances, sorted by node and index."""
    by_gpu: dict[str, list[tuple[str, _Record]]] = {}
    for (key, gi), record in slices.items():
        by_gpu.setdefault(key, []).append((gi, record))
    out: list[Gpu] = []
    for key, record in gpus.items():
        out.append(_gpu(key, record, by_gpu.get(key, ())))
    out.sort(key=lambda g: (g.node, g.index, g.uuid))
    return tuple(out)


def _max(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _gpu(key: str, record: _Record, slice_records: Sequence[tuple[str, _Record]]) -> Gpu:
    labels = record.labels
    v = record.values
    uuid = labels.get("UUID") or key
    mig = []
    for gi, srec in sorted(slice_records, key=lambda pair: _as_int(pair[0])):
        mig.append(_slice(uuid, gi, srec))
        if not labels.get("modelName") and srec.labels.get("modelName"):
            labels = srec.labels
    used, free, reserved = v[I_USED], v[I_FREE], v[I_RESERVED]
    if used is None and mig:
        used = float(sum(s.memory_used_mib for s in mig))
        if free is None:
            free = float(sum(s.memory_total_mib for s in mig)) - used
    total = (used or 0.0) + (free or 0.0) + (reserved or 0.0) if free is not None else (used or 0.0)
    gr = v[I_GR]
    util = v[I_UTIL]
    if util is None:
        if mig and any(s.utilization is not None for s in mig):
            util = sum((s.utilization or 0.0) * compute_share(s.profile) for s in mig)
        elif gr is not None:
            util = gr * 100.0
    if gr is None and mig and any(s.utilization is not None for s in mig):
        gr = sum((s.utilization or 0.0) * compute_share(s.profile) for s in mig) / 100.0
    temp, power = v[I_TEMP], v[I_POWER]
    if temp is None or power is None:  # an exporter that reports these per MIG instance only
        temp = temp if temp is not None else _max(r.values[I_TEMP] for _, r in slice_records)
        power = power if power is not None else _max(r.values[I_POWER] for _, r in slice_records)
    index = _as_int(labels.get("gpu", ""))
    pod = labels.get("pod") or None
    return Gpu(
        uuid=uuid,
        node=node_of(labels),
        index=index,
        name=labels.get("modelName", ""),
        utilization=round(util, 1) if util is not None else 0.0,
        memory_used_mib=int(round(used or 0.0)),
        memory_total_mib=int(round(total)),
        temperature_c=int(temp) if temp is not None else 0,
        power_w=round(power, 1) if power is not None else 0.0,
        power_limit_w=round(v[I_LIMIT], 1) if v[I_LIMIT] is not None else 0.0,
        mig_mode=MigMode.ENABLED if mig else MigMode.DISABLED,
        mig_slices=tuple(mig),
        memory_utilization=v[I_MEMUTIL],
        sm_clock_mhz=_int(v[I_SM]),
        memory_clock_mhz=_int(v[I_MEMCLK]),
        xid_errors=_int(v[I_XID]),
        gr_engine_active=round(gr * 100.0, 1) if gr is not None else None,
        pod=pod,
        namespace=(labels.get("namespace") or None) if pod else None,
    )


def _slice(gpu_uuid: str, gi: str, record: _Record) -> MigSlice:
    labels = record.labels
    v = record.values
    used = v[I_USED] or 0.0
    total = used + (v[I_FREE] or 0.0) + (v[I_RESERVED] or 0.0)
    gr = v[I_GR]
    pod = labels.get("pod") or None
    gi_id = _as_int(gi)
    return MigSlice(
        uuid=f"MIG-{gpu_uuid}/{gi_id}/0",
        gpu_uuid=gpu_uuid,
        gi_id=gi_id,
        ci_id=0,
        profile=labels.get("GPU_I_PROFILE", ""),
        memory_total_mib=int(round(total)),
        memory_used_mib=int(round(used)),
        utilization=round(gr * 100.0, 1) if gr is not None else None,
        pod=pod,
        namespace=(labels.get("namespace") or None) if pod else None,
    )


def _as_int(text: str) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        return 0


def driver_versions(gpus: Mapping[str, _Record], slices: Mapping[tuple[str, str], _Record]) -> tuple[tuple[str, str], ...]:
    """``(("driver", "550.54.15"),)`` when the fleet runs one driver; the versions joined when several."""
    seen = sorted({r.labels.get("DCGM_FI_DRIVER_VERSION", "") for r in (*gpus.values(), *slices.values())} - {""})
    return (("driver", ", ".join(seen)),) if seen else ()


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
                if value == value:
                    points[ts] = value
        columns[name] = points
    util = columns.get("utilization", {})
    mem, temp, power = columns.get("memory", {}), columns.get("temperature", {}), columns.get("power", {})
    return tuple(GpuSample(ts, round(util[ts], 1), float(round(mem.get(ts, 0.0))), round(temp.get(ts, 0.0), 1),
                           round(power.get(ts, 0.0), 1)) for ts in sorted(util))
