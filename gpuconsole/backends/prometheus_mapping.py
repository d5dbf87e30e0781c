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

import json
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

# Read on every poll: what the table shows and changes between scrapes.
FAST: tuple[str, ...] = (UTIL, FB_USED, TEMP, POWER, SM_CLOCK, MEM_COPY_UTIL, GR_ENGINE)
# Read every SLOW_EVERY_S: what changes seldom (the memory size, the power limit, the last XID) and the
# identity labels (model, pods), which cost as much to read as all the values together.
SLOW: tuple[str, ...] = (FB_FREE, FB_RESERVED, POWER_LIMIT, MEM_CLOCK, XID)
IDENTITY = "identity"  # the name of the query of FB_USED with the identity labels

KEY_LABELS: tuple[str, ...] = ("UUID", "GPU_I_ID")
KEY_LABELS_WITHOUT_UUID: tuple[str, ...] = ("UUID", "Hostname", "gpu", "GPU_I_ID")
NODE_LABELS: tuple[str, ...] = ("Hostname", "kubernetes_node", "node", "instance")
IDENTITY_LABELS: tuple[str, ...] = ("UUID", "Hostname", "gpu", "GPU_I_ID", "kubernetes_node", "node", "instance",
                                    "modelName", "GPU_I_PROFILE", "pod", "namespace", "container",
                                    "DCGM_FI_DRIVER_VERSION")
_INSTANCE_LABELS = frozenset({"GPU_I_ID", "GPU_I_PROFILE", "pod", "namespace", "container"})
ANCHOR = FB_USED  # the metric every GPU and every MIG instance reports: its query carries the identity

_LABEL_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_COMPUTE_RE = re.compile(r"^(?:\d+c\.)?(\d+)g\.")


def instant_query(metric: str, selector: str = "", *, by_uuid: bool = True) -> str:
    """The PromQL of one metric for the whole fleet, reduced to the labels this module reads.

    ``metric`` :data:`IDENTITY` is the anchor metric with every identity label; any other keeps
    the key of a series only (``UUID`` and ``GPU_I_ID``; node and index too when the exporter
    does not label ``UUID``).
    """
    if metric == IDENTITY:
        return f"max by ({', '.join(IDENTITY_LABELS)}) ({ANCHOR}{_braces(selector)})"
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


# --------------------------------------------------------------------------- answers


class PrometheusAnswerError(ValueError):
    """An answer that is not what the Prometheus HTTP API returns."""


def _result(answer: Any, expected: str) -> list[Any]:
    """The ``result`` list of an answer whose ``resultType`` must be ``expected``."""
    try:
        data = answer["data"]
        kind = data["resultType"]
        result = data["result"]
    except (KeyError, TypeError) as exc:
        raise PrometheusAnswerError("an answer without data.result") from exc
    if kind != expected or not isinstance(result, list):
        raise PrometheusAnswerError(f"expected a {expected}, got {kind!r}")
    return result


def vector(answer: Any) -> list[Any]:
    """The ``result`` list of an instant query's ``vector`` answer (already JSON-decoded)."""
    return _result(answer, "vector")


def matrix(answer: Any) -> list[Any]:
    """The ``result`` list of a range query's ``matrix`` answer."""
    return _result(answer, "matrix")


class _Ident:
    """What the labels of one series say once: which GPU (or MIG instance), where, held by whom.

    Built once per identity read and shared by every poll until the next, so a poll does not
    read the same labels again for each of thousands of GPUs.
    """

    __slots__ = ("gi_id", "index", "labels", "model", "namespace", "node", "pod", "profile", "uuid")

    def __init__(self, labels: Mapping[str, str], key: str) -> None:
        self.labels = labels
        self.uuid = labels.get("UUID") or key
        self.node = node_of(labels)
        self.index = _as_int(labels.get("gpu", ""))
        self.model = labels.get("modelName", "")
        self.profile = labels.get("GPU_I_PROFILE", "")
        self.gi_id = _as_int(labels.get("GPU_I_ID", ""))
        self.pod = labels.get("pod") or None
        self.namespace = (labels.get("namespace") or None) if self.pod else None


class _Record:
    """The values of one GPU or one MIG instance, one slot per metric, and its identity."""

    __slots__ = ("ident", "values")

    def __init__(self, ident: _Ident) -> None:
        self.ident = ident
        self.values: list[float | None] = [None] * len(METRICS)

    @property
    def labels(self) -> Mapping[str, str]:
        return self.ident.labels


def _gpu_key(labels: Mapping[str, str]) -> str:
    uuid = labels.get("UUID")
    if uuid:
        return uuid
    return f"{labels.get('Hostname', '')}:{labels.get('gpu', '')}"


Identity = dict[tuple[str, str], _Ident]
# One series of an answer: (GPU key, GPU_I_ID or "", value, labels; None when they are just the key).
Series = tuple[str, str, float, "Mapping[str, str] | None"]

_SUCCESS_VECTOR = re.compile(rb'\{"status":"success","data":\{"resultType":"vector","result":\[')
# A sample whose labels are just the key, as Prometheus writes it (labels sorted, no spaces).
_KEYED_SAMPLE = re.compile(
    rb'\{"metric":\{(?:"GPU_I_ID":"([0-9]*)",)?"UUID":"([A-Za-z0-9-]+)"\},"value":\[[-+.0-9eE]+,"([^"\\]*)"\]\}')


def parse_vector(body: bytes) -> list[Series]:
    """The series of an instant query's answer, as it came over the wire.

    The answers of the value queries (labels ``UUID`` and ``GPU_I_ID`` only, thousands of
    series) are read with one regular expression instead of building a JSON object per series,
    which is most of the cost of a poll; every sample must match, or the answer is decoded as
    JSON like any other.

    Raises:
        PrometheusAnswerError: not the JSON of a vector answer.
    """
    if _SUCCESS_VECTOR.match(body):
        found = _KEYED_SAMPLE.findall(body)
        if len(found) == body.count(b'{"metric":'):
            out: list[Series] = []
            for gi, uuid, raw in found:
                try:
                    out.append((uuid.decode("ascii"), gi.decode("ascii"), float(raw), None))
                except ValueError:
                    continue
            return out
    try:
        answer = json.loads(body)
    except ValueError as exc:
        raise PrometheusAnswerError("an answer that is not JSON") from exc
    return series_of(vector(answer))


def series_of(items: Iterable[Any]) -> list[Series]:
    """The series of a decoded vector result; one that cannot be read is skipped."""
    out: list[Series] = []
    for item in items:
        try:
            labels = item["metric"]
            value = float(item["value"][1])
            key = labels.get("UUID") or _gpu_key(labels)
            gi = labels.get("GPU_I_ID") or ""
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
            continue
        out.append((key, gi, value, labels))
    return out


def identities(series: Iterable[Series]) -> Identity:
    """``{(GPU key, GPU_I_ID or ""): identity}`` from the answer of the :data:`IDENTITY` query."""
    out: Identity = {}
    for key, gi, _value, labels in series:
        out[(key, gi)] = _Ident(labels if labels is not None else _key_labels(key, gi), key)
    return out


def _key_labels(key: str, gi: str) -> dict[str, str]:
    return {"UUID": key, "GPU_I_ID": gi} if gi else {"UUID": key}


def keyed_by_uuid(identity: Identity) -> bool:
    """Whether every series names its GPU by ``UUID`` (else node and index key the values)."""
    return all(ident.labels.get("UUID") for ident in identity.values())


def collect(results: Mapping[str, Sequence[Any]], identity: Identity | None = None,
            ) -> tuple[dict[str, _Record], dict[tuple[str, str], _Record]]:
    """:func:`fold` for decoded vector results (``{metric: data.result}``)."""
    return fold({metric: series_of(items) for metric, items in results.items()}, identity)


def fold(results: Mapping[str, Sequence[Series]], identity: Identity | None = None,
         ) -> tuple[dict[str, _Record], dict[tuple[str, str], _Record]]:
    """Fold each metric's series into one record per GPU and per MIG instance.

    Args:
        results: ``{metric: series}``; a metric the exporter does not report is absent or
            empty. Without ``identity`` the anchor's own labels are the identity.
        identity: what each series is (:func:`identities`); a series it lacks is known by the
            labels of its values.
    """
    whole: dict[str, _Record] = {}
    parts: dict[tuple[str, str], _Record] = {}
    if identity:
        for (key, gi), ident in identity.items():
            if gi:
                parts[(key, gi)] = _Record(ident)
            else:
                whole[key] = _Record(ident)
    infinite = _INFINITE
    for metric in dict.fromkeys(m for m in (ANCHOR, *results) if m in results):
        slot = _I[metric]
        get_whole = whole.get
        for key, gi, value, labels in results[metric]:
            if math.isnan(value) or value in infinite:
                continue
            if gi:
                record = parts.get((key, gi))
                if record is None:
                    ident = _Ident(labels if labels is not None else _key_labels(key, gi), key)
                    record = parts[(key, gi)] = _Record(ident)
            else:
                record = get_whole(key)
                if record is None:
                    record = whole[key] = _Record(_Ident(labels if labels is not None else _key_labels(key, ""), key))
            record.values[slot] = value
    for (key, _gi), part in parts.items():
        if key not in whole:  # a MIG GPU known only by its instances
            labels = part.labels
            whole[key] = _Record(_Ident({k: v for k, v in labels.items() if k not in _INSTANCE_LABELS}, key))
    return whole, parts


_INFINITE = frozenset({math.inf, -math.inf})


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
    return None if value is None else round(value)


def build_gpus(gpus: dict[str, _Record], slices: dict[tuple[str, str], _Record]) -> tuple[Gpu, ...]:
    """The GPUs of the records, with their MIG instances, sorted by node and index."""
    by_gpu: dict[str, list[tuple[str, _Record]]] = {}
    for (key, gi), record in slices.items():
        by_gpu.setdefault(key, []).append((gi, record))
    out: list[Gpu] = []
    for key, record in gpus.items():
        out.append(_gpu(key, record, by_gpu.get(key, ())))
    out.sort(key=_order)
    return tuple(out)


def _order(gpu: Gpu) -> tuple[str, int, str]:
    return gpu.node, gpu.index, gpu.uuid


def _max(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _gpu(key: str, record: _Record, slice_records: Sequence[tuple[str, _Record]]) -> Gpu:
    ident = record.ident
    v = record.values
    used, free, reserved, util, temp, power, limit, sm, memclk, memutil, gr, xid = v
    if slice_records:
        return _mig_gpu(ident, v, slice_records)
    return Gpu(
        ident.uuid, ident.node, ident.index, ident.model,
        round(util, 1) if util is not None else (round(gr * 100.0, 1) if gr is not None else 0.0),
        round(used or 0.0),
        round((used or 0.0) + (free or 0.0) + (reserved or 0.0)),
        int(temp) if temp is not None else 0,
        round(power, 1) if power is not None else 0.0,
        round(limit, 1) if limit is not None else 0.0,
        memory_utilization=memutil,
        sm_clock_mhz=round(sm) if sm is not None else None,
        memory_clock_mhz=round(memclk) if memclk is not None else None,
        xid_errors=round(xid) if xid is not None else None,
        gr_engine_active=round(gr * 100.0, 1) if gr is not None else None,
        pod=ident.pod,
        namespace=ident.namespace,
    )


def _mig_gpu(ident: _Ident, v: list[float | None], slice_records: Sequence[tuple[str, _Record]]) -> Gpu:
    """A MIG GPU: its whole-GPU values where the exporter gives them, else from its instances."""
    uuid = ident.uuid
    mig = []
    model, node = ident.model, ident.node
    for _gi, srec in sorted(slice_records, key=lambda pair: pair[1].ident.gi_id):
        mig.append(_slice(uuid, srec))
        model = model or srec.ident.model
        node = node if node != "unknown" else srec.ident.node
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
    temp = v[I_TEMP] if v[I_TEMP] is not None else _max(r.values[I_TEMP] for _, r in slice_records)
    power = v[I_POWER] if v[I_POWER] is not None else _max(r.values[I_POWER] for _, r in slice_records)
    return Gpu(
        uuid, node, ident.index, model,
        round(util, 1) if util is not None else 0.0,
        round(used),
        round(total),
        int(temp) if temp is not None else 0,
        round(power, 1) if power is not None else 0.0,
        round(v[I_LIMIT], 1) if v[I_LIMIT] is not None else 0.0,
        mig_mode=MigMode.ENABLED,
        mig_slices=tuple(mig),
        memory_utilization=v[I_MEMUTIL],
        sm_clock_mhz=_int(v[I_SM]),
        memory_clock_mhz=_int(v[I_MEMCLK]),
        xid_errors=_int(v[I_XID]),
        gr_engine_active=round(gr * 100.0, 1) if gr is not None else None,
    )


def _slice(gpu_uuid: str, record: _Record) -> MigSlice:
    ident = record.ident
    v = record.values
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
                if not math.isnan(value):
                    points[ts] = value
        columns[name] = points
    util = columns.get("utilization", {})
    mem, temp, power = columns.get("memory", {}), columns.get("temperature", {}), columns.get("power", {})
    return tuple(GpuSample(ts, round(util[ts], 1), float(round(mem.get(ts, 0.0))), round(temp.get(ts, 0.0), 1),
                           round(power.get(ts, 0.0), 1)) for ts in sorted(util))
