"""Instant-query answers of the Prometheus HTTP API, read fast: one dict per metric, one roster of GPUs.

No I/O. A poll of a fleet of 8,192 GPUs reads about 10 MB of JSON; decoding it into an object per
series costs more than everything else in a poll, so a value query's answer is decoded in C
into typed samples of just the GPU's key and value, then into ``{GPU key: value}``
(:class:`Column`), and the identity query's answer (compact, labels sorted, as Prometheus
writes it) is read by a regular expression into a :class:`Roster` that the next read reuses
wherever the labels are the same text. An answer that does not fit is decoded as JSON, so
nothing is lost.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from operator import attrgetter
from typing import Any

import msgspec

NODE_LABELS: tuple[str, ...] = ("Hostname", "kubernetes_node", "node", "instance")
INSTANCE_LABELS = frozenset({"GPU_I_ID", "GPU_I_PROFILE", "pod", "namespace", "container"})
ORDER = attrgetter("node", "index", "uuid")  # how GPUs are listed: by node, then index


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


class Identity:
    """What the labels of one series say once: which GPU (or MIG instance), where, held by whom.

    Built once per identity read and shared by every poll until the next (and by the next read
    too, where the labels have not changed), so a poll does not read the same labels again for
    each of thousands of GPUs.
    """

    __slots__ = ("gi", "gi_id", "index", "key", "labels", "model", "namespace", "node", "pod", "profile", "uuid")

    def __init__(self, labels: Mapping[str, str], key: str) -> None:
        self.labels = labels
        self.key = key
        self.gi = labels.get("GPU_I_ID") or ""
        self.uuid = labels.get("UUID") or key
        self.node = node_of(labels)
        self.index = _as_int(labels.get("gpu", ""))
        self.model = labels.get("modelName", "")
        self.profile = labels.get("GPU_I_PROFILE", "")
        self.gi_id = _as_int(labels.get("GPU_I_ID", ""))
        self.pod = labels.get("pod") or None
        self.namespace = (labels.get("namespace") or None) if self.pod else None


def _gpu_key(labels: Mapping[str, str]) -> str:
    uuid = labels.get("UUID")
    if uuid:
        return uuid
    return f"{labels.get('Hostname', '')}:{labels.get('gpu', '')}"


def _key_labels(key: str, gi: str) -> dict[str, str]:
    return {"UUID": key, "GPU_I_ID": gi} if gi else {"UUID": key}


def node_of(labels: Mapping[str, str]) -> str:
    for name in NODE_LABELS:
        value = labels.get(name)
        if value:
            return value.rsplit(":", 1)[0] if name == "instance" else value
    return "unknown"


def _as_int(text: str) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        return 0


# One series of a decoded answer: (GPU key, GPU_I_ID or "", value, labels).
Series = tuple[str, str, float, Mapping[str, str]]
SeriesKey = tuple[str, str]  # (GPU key, GPU_I_ID or "")


class Column:
    """One metric's values in one answer, by GPU and by MIG instance.

    Attributes:
        whole: ``{GPU key: value}`` of the series without ``GPU_I_ID``.
        parts: ``{(GPU key, GPU_I_ID): value}`` of the MIG instances' series.
        labels: ``{(GPU key, GPU_I_ID or ""): labels}`` of the series that came with more labels
            than their key (an answer decoded as JSON); they name a GPU the identity does not.

    A NaN or infinite value is no value: its series is left out.
    """

    __slots__ = ("labels", "parts", "whole")

    def __init__(self, whole: dict[str, float] | None = None, parts: dict[SeriesKey, float] | None = None,
                 labels: dict[SeriesKey, Mapping[str, str]] | None = None) -> None:
        self.whole = whole if whole is not None else {}
        self.parts = parts if parts is not None else {}
        self.labels = labels if labels is not None else {}


def plus(column: Column, other: Column | None) -> Column:
    """``column`` with ``other``'s value of the same series added (where it has one)."""
    if other is None:
        return column
    whole, parts = other.whole, other.parts
    return Column({k: v + whole.get(k, 0.0) for k, v in column.whole.items()},
                  {k: v + parts.get(k, 0.0) for k, v in column.parts.items()}, column.labels)


def less(column: Column, other: Column | None) -> Column:
    """``column`` less ``other``'s value of the same series (where it has one), never below 0."""
    if other is None:
        return column
    whole, parts = other.whole, other.parts
    return Column({k: max(0.0, v - whole.get(k, 0.0)) for k, v in column.whole.items()},
                  {k: max(0.0, v - parts.get(k, 0.0)) for k, v in column.parts.items()}, column.labels)


_SUCCESS_VECTOR = re.compile(rb'\{"status":"success","data":\{"resultType":"vector","result":\[')
# The identity query's samples as Prometheus writes them (labels sorted, no spaces, no braces in them).
_LABELLED_SAMPLE = re.compile(r'\{"metric":(\{[^{}]*\}),"value":\[[-+.0-9eE]+,"[^"\\]*"\]\}')
_SAMPLE_START = '{"metric":'


class _KeyLabels(msgspec.Struct, forbid_unknown_fields=True, frozen=True, gc=False):
    """The labels of a value query's series: its GPU's key, and the MIG instance's id."""

    UUID: str = ""
    GPU_I_ID: str = ""


def _answer_decoder(value: type) -> msgspec.json.Decoder:
    """A decoder of a vector answer whose samples hold only the key labels, the value as ``value``.

    Nothing it makes is tracked by the garbage collector (a pair as a tuple would be: thousands
    of them an answer, a young-generation collection every few hundred)."""
    pair = msgspec.defstruct("Pair", [("time", float), ("value", value)], array_like=True, frozen=True, gc=False)
    sample = msgspec.defstruct("Sample", [("metric", _KeyLabels), ("value", pair)], frozen=True, gc=False)
    vector = msgspec.defstruct("Vector", [("resultType", str), ("result", list[sample])], frozen=True, gc=False)
    answer = msgspec.defstruct("Answer", [("status", str), ("data", vector)], frozen=True, gc=False)
    return msgspec.json.Decoder(answer, strict=False)


# Prometheus writes a value as a string: read as a number where it is one ("62.5", "NaN"); an
# answer with "+Inf" or "-Inf", which the number decoder refuses, is read as text.
_VALUE_ANSWER = _answer_decoder(float)
_TEXT_ANSWER = _answer_decoder(str)


def _compact_text(body: bytes) -> str | None:
    """The answer as text when it is a ``success`` vector written compactly (as Prometheus does)."""
    if not _SUCCESS_VECTOR.match(body):
        return None
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _decoded(body: bytes) -> list[Series]:
    try:
        answer = json.loads(body)
    except ValueError as exc:
        raise PrometheusAnswerError("an answer that is not JSON") from exc
    return series_of(vector(answer))


def read_values(body: bytes) -> Column:
    """The values of an instant query's answer, as it came over the wire.

    The answers of the value queries (labels ``UUID`` and ``GPU_I_ID`` only, thousands of
    series) are decoded in C into typed samples that hold just those two labels and the value as
    a number, then into ``{key: value}``: no dict of labels per series, which is most of the cost
    of a poll. An answer with any other label (or without a key) is decoded as JSON like any
    other, so nothing is lost.

    Raises:
        PrometheusAnswerError: not the JSON of a vector answer.
    """
    answer, numbers = None, True
    for decoder in (_VALUE_ANSWER, _TEXT_ANSWER):
        try:
            answer = decoder.decode(body)
            break
        except msgspec.MsgspecError:
            numbers = False
    if answer is not None and answer.status == "success" and answer.data.resultType == "vector":
        values = _finite if numbers else _numbers
        result = answer.data.result
        if b'"GPU_I_ID"' not in body:
            whole = {sample.metric.UUID: sample.value.value for sample in result}
            if "" not in whole:
                return Column(values(whole))
        else:
            whole, parts = {}, {}
            for sample in result:
                labels = sample.metric
                if labels.GPU_I_ID:
                    parts[(labels.UUID, labels.GPU_I_ID)] = sample.value.value
                else:
                    whole[labels.UUID] = sample.value.value
            if "" not in whole and all(key for key, _gi in parts):
                return Column(values(whole), values(parts))
    return column_of(_decoded(body))


def _numbers(raw: dict[Any, str]) -> dict[Any, float]:
    """``raw`` with its values as numbers; one that is no number, NaN or infinite is left out."""
    try:
        out = {key: float(text) for key, text in raw.items()}
    except ValueError:
        out = {}
        for key, text in raw.items():
            try:
                out[key] = float(text)
            except ValueError:
                continue
    return _finite(out)


def _finite(values: dict[Any, float]) -> dict[Any, float]:
    """``values`` without NaN and the infinities (no values, to the console)."""
    if all(map(math.isfinite, values.values())):
        return values
    return {key: value for key, value in values.items() if math.isfinite(value)}


_FIRST_TIME = re.compile(rb'"value":\[([-+.0-9eE]+),')


def without_times(body: bytes) -> bytes:
    """An instant query's answer without the evaluation time its samples repeat.

    Two reads of series whose labels and values have not changed are then the same bytes, so
    a poll can tell in one comparison that it holds the answer already.
    """
    first = _FIRST_TIME.search(body)
    if first is None:
        return body
    return body.replace(b'"value":[' + first.group(1) + b",", b'"value":[,')


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


def column_of(series: Iterable[Series]) -> Column:
    """The :class:`Column` of decoded series (a later series of the same key wins)."""
    column = Column()
    for key, gi, value, labels in series:
        if not math.isfinite(value):
            continue
        if gi:
            column.parts[(key, gi)] = value
        else:
            column.whole[key] = value
        column.labels.setdefault((key, gi), labels)
    return column


class Roster:
    """The GPUs and MIG instances the identity labels name, ready for every poll until the next read.

    Attributes:
        named: ``{(GPU key, GPU_I_ID or ""): identity}`` of every series the identity names.
        gpus: ``{GPU key: identity}`` of every GPU, a MIG GPU known only by its instances
            included (named by their labels, less the instance's own).
        parts: ``{GPU key: ((GPU_I_ID, identity), …)}`` of every MIG GPU, by instance id.
        drivers: the driver versions the labels name, sorted.
        keyed_by_uuid: whether every series names its GPU by ``UUID``.
        by_text: ``{JSON text of the labels: identity}``, so that the next read decodes only the
            labels that changed.
    """

    __slots__ = ("_listed", "_values", "by_text", "drivers", "gpus", "keyed_by_uuid", "named", "parts")

    def __init__(self, named: Mapping[SeriesKey, Identity], by_text: dict[str, Identity] | None = None) -> None:
        self.named = dict(named)
        self.by_text = by_text or {}
        self.gpus: dict[str, Identity] = {}
        parts: dict[str, list[tuple[str, Identity]]] = {}
        for (key, gi), ident in self.named.items():
            if gi:
                parts.setdefault(key, []).append((gi, ident))
            else:
                self.gpus[key] = ident
        for key, instances in parts.items():
            if key not in self.gpus:  # a MIG GPU known only by its instances
                labels = instances[0][1].labels
                self.gpus[key] = Identity({k: v for k, v in labels.items() if k not in INSTANCE_LABELS}, key)
        # In the order the GPUs are listed, so that sorting what a poll builds finds them sorted.
        self.gpus = dict(sorted(self.gpus.items(), key=lambda item: ORDER(item[1])))
        self.parts = {key: tuple(sorted(instances, key=lambda pair: pair[1].gi_id)) for key, instances in parts.items()}
        versions = {ident.labels.get("DCGM_FI_DRIVER_VERSION", "") for ident in (*self.named.values(), *self.gpus.values())}
        self.drivers = tuple(sorted(versions - {""}))
        self.keyed_by_uuid = all(ident.labels.get("UUID") for ident in self.named.values())
        self._listed: tuple[list[Any], ...] | None = None
        self._values: dict[str, tuple[Column, list[float | None]]] = {}

    def listed(self) -> tuple[list[Any], ...]:
        """What the identities of :attr:`gpus` say, a list each, in its order: UUIDs, nodes,
        indexes, models, pods, namespaces (made once, for every poll this roster serves)."""
        if self._listed is None:
            idents = list(self.gpus.values())
            self._listed = tuple([getattr(i, name) for i in idents]
                                 for name in ("uuid", "node", "index", "model", "pod", "namespace"))
        return self._listed

    def values(self, name: str, column: Column) -> list[float | None]:
        """The value of each GPU of :attr:`gpus` in ``column`` (the answer of metric ``name``),
        in order, ``None`` where it has none. Kept while the same column comes again: the
        seldom-changing answers serve many polls."""
        kept = self._values.get(name)
        if kept is not None and kept[0] is column:
            return kept[1]
        values = list(map(column.whole.get, self.gpus))
        self._values[name] = (column, values)
        return values

    def including(self, columns: Mapping[str, Column], first: str | None = None) -> Roster:
        """This roster, with the series of ``columns`` it does not name (itself when it names all).

        A series it does not name is known by the labels it came with (its key, for an answer read
        by the expression), those of the column ``first`` before the others.
        """
        names = [first, *columns] if first is not None else list(columns)
        order = [columns[m] for m in dict.fromkeys(names) if m in columns]
        if all(c.whole.keys() <= self.gpus.keys() and c.parts.keys() <= self.named.keys() for c in order):
            return self
        named = dict(self.named)
        for column in order:
            for key in column.whole:
                if key not in self.gpus and (key, "") not in named:
                    named[(key, "")] = Identity(column.labels.get((key, "")) or _key_labels(key, ""), key)
            for key, gi in column.parts:
                if (key, gi) not in named:
                    named[(key, gi)] = Identity(column.labels.get((key, gi)) or _key_labels(key, gi), key)
        return Roster(named)


def read_roster(body: bytes, previous: Roster | None = None) -> Roster:
    """The roster of the :data:`IDENTITY` query's answer.

    The labels of each series are cut out by one expression and decoded only when ``previous``
    did not hold the same text, so a read of a fleet whose pods have not moved decodes nothing.

    Raises:
        PrometheusAnswerError: not the JSON of a vector answer.
    """
    text = _compact_text(body)
    if text is not None:
        found = _LABELLED_SAMPLE.findall(text)
        if len(found) == text.count(_SAMPLE_START):
            known = previous.by_text if previous is not None else {}
            named: dict[SeriesKey, Identity] = {}
            by_text: dict[str, Identity] = {}
            try:
                for labels_text in found:
                    ident = known.get(labels_text)
                    if ident is None:
                        labels = json.loads(labels_text)
                        ident = Identity(labels, labels.get("UUID") or _gpu_key(labels))
                    by_text[labels_text] = ident
                    named[(ident.key, ident.gi)] = ident
            except (ValueError, AttributeError, TypeError):
                pass  # not labels as Prometheus writes them: decode the whole answer below
            else:
                return Roster(named, by_text)
    return roster_of(_decoded(body))


def roster_of(series: Iterable[Series]) -> Roster:
    """The roster of the decoded series of the :data:`IDENTITY` query."""
    return Roster({(key, gi): Identity(labels, key) for key, gi, _value, labels in series})
