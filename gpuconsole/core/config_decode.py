"""A configuration table or spec file decoded into a msgspec Struct, with one-line problems.

Each table is declared once, as a Struct with ``forbid_unknown_fields`` and ``msgspec.Meta``
constraints; :func:`decode_table` converts the TOML's dict into it and turns msgspec's error
(``Expected `int` >= 1 - at `$.arms[0].gpus```) into a :class:`TableError` whose ``key`` is the
dotted key (``arms[0].gpus``) and whose ``problem`` is a short sentence (``expected a whole number
of 1 or more, got 0``), which each module words into its file/table/key line. A field's
``Meta(description=...)`` says what it expects; ``Meta(extra={"missing": ...})`` what to say when
a required key is absent. Floats that are NaN or infinite are refused everywhere.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any, TypeVar

import msgspec
import msgspec.inspect as mi

T = TypeVar("T")
_ERROR = re.compile(r"^(?P<text>.*?)(?: - at `\$(?P<path>.*)`)?$", re.S)
_SEGMENT = re.compile(r"\.(\w+)|\[(\d+|\.\.\.)\]")
_UNKNOWN = re.compile(r"^Object contains unknown field `(.+)`$")
_MISSING = re.compile(r"^Object missing required field `(.+)`$")
_ANY_KEY = object()  # a dict's key msgspec does not name (``[...]``)


class TableError(ValueError):
    """A table does not fit its Struct: ``key`` is the dotted key ("" for the table itself),
    ``problem`` one short sentence; ``known`` the table's keys when the key is unknown."""

    def __init__(self, key: str, problem: str, *, unknown: bool = False, known: tuple[str, ...] = ()) -> None:
        super().__init__(f"{key}: {problem}" if key else problem)
        self.key = key
        self.problem = problem
        self.unknown = unknown
        self.known = known


def decode_table(data: Any, into: type[T]) -> T:
    """``data`` (a TOML table) as an ``into`` Struct. Raises :class:`TableError`."""
    for path, value in _floats(data):
        if not math.isfinite(value):
            raise TableError(_where(mi.type_info(into), path)[0], f"expected a finite number, got {value!r}")
    try:
        return msgspec.convert(data, into)
    except msgspec.ValidationError as exc:
        raise _translate(str(exc), mi.type_info(into), data) from None


def fields_of(into: type[Any]) -> tuple[str, ...]:
    """The keys a Struct table takes, in declared order."""
    return tuple(f.encode_name for f in mi.type_info(into).fields)  # type: ignore[attr-defined]


def _translate(message: str, root: mi.Type, data: Any) -> TableError:
    """msgspec's ``Expected ... - at `$.x[0].y``` as a key and a short problem."""
    match = _ERROR.match(message)
    text, raw = (match["text"], match["path"] or "") if match else (message, "")
    path = [name or (_ANY_KEY if i == "..." else int(i)) for name, i in _SEGMENT.findall(raw)]
    if unknown := _UNKNOWN.match(text):
        table = _where(root, path)[2]
        known = tuple(f.encode_name for f in table.fields) if isinstance(table, mi.StructType) else ()
        key = _where(root, [*path, unknown[1]])[0]
        return TableError(key, f"unknown key (known: {', '.join(known)})", unknown=True, known=known)
    if missing := _MISSING.match(text):
        key, field_type, _node, _depth = _where(root, [*path, missing[1]])
        said = (field_type.extra or {}).get("missing") if isinstance(field_type, mi.Metadata) else None
        return TableError(key, said or f"required: {_phrase(field_type)}")
    key, field_type, _node, depth = _where(root, path)
    found, value = _value_at(data, path[:depth])
    return TableError(key, f"expected {_phrase(field_type)}" + (f", got {value!r}" if found else ""))


def _where(root: mi.Type, path: list[Any]) -> tuple[str, mi.Type, mi.Type, int]:
    """The dotted key of ``path`` (up to its deepest table field), that field's type, the type at
    the end of the path, and how many of the path's segments the key covers."""
    key, shown, node, field_type, depth = "", "", root, root, 0
    for n, segment in enumerate(path, 1):
        node = _unwrap(node, segment)
        if isinstance(node, mi.StructType):
            field = next((f for f in node.fields if f.encode_name == segment), None)
            key = shown = f"{shown}.{segment}" if shown else str(segment)
            node = field_type = field.type if field is not None else mi.AnyType()
            depth = n
        elif isinstance(node, mi.ListType | mi.SetType | mi.VarTupleType):
            node, shown = node.item_type, f"{shown}[{segment}]"
            if isinstance(_unwrap(node, None), mi.StructType):
                key, field_type, depth = shown, node, n
        elif isinstance(node, mi.DictType):
            node = node.value_type
        else:
            node = mi.AnyType()
    return key, field_type, _unwrap(node, None), depth


def _unwrap(node: mi.Type, segment: Any) -> mi.Type:
    """The type itself, past metadata, and in a union the member a path segment goes into
    (a list for an index, a table for a key)."""
    if isinstance(node, mi.Metadata):
        return _unwrap(node.type, segment)
    if isinstance(node, mi.UnionType):
        kinds = (mi.ListType, mi.SetType, mi.VarTupleType) if isinstance(segment, int) else (mi.StructType, mi.DictType)
        members = [_unwrap(t, segment) for t in node.types if not isinstance(t, mi.NoneType)]
        chosen = [t for t in members if isinstance(t, kinds)] if segment is not None else members
        return chosen[0] if len(chosen) == 1 else node
    return node


def _value_at(data: Any, path: list[Any]) -> tuple[bool, Any]:
    for segment in path:
        if segment is _ANY_KEY:
            return False, None
        try:
            data = data[segment]
        except (KeyError, IndexError, TypeError):
            return False, None
    return True, data


def _floats(data: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[list[Any], float]]:
    if isinstance(data, float):
        yield list(path), data
    elif isinstance(data, dict):
        for k, v in data.items():
            yield from _floats(v, (*path, k))
    elif isinstance(data, list | tuple):
        for i, v in enumerate(data):
            yield from _floats(v, (*path, i))


def _phrase(node: mi.Type) -> str:
    """What a field expects, in words: its description, else said from its type."""
    if isinstance(node, mi.Metadata):
        described = (node.extra_json_schema or {}).get("description")
        return str(described) if described else _phrase(node.type)
    if isinstance(node, mi.IntType | mi.FloatType):
        return ("a whole number" if isinstance(node, mi.IntType) else "a number") + _bounds(node)
    if isinstance(node, mi.StrType):
        return "a non-empty string" if node.min_length else "a string"
    if isinstance(node, mi.BoolType):
        return "true or false"
    if isinstance(node, mi.LiteralType):
        words = [str(v) for v in node.values]
        return " or ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)
    if isinstance(node, mi.ListType):
        item = _unwrap(node.item_type, None)
        return "a list of strings" if isinstance(item, mi.StrType) else "a list of tables" if isinstance(
            item, mi.StructType) else "a list"
    if isinstance(node, mi.DictType):
        return "a table of strings" if isinstance(_unwrap(node.value_type, None), mi.StrType) else "a table"
    if isinstance(node, mi.StructType):
        return "a table"
    if isinstance(node, mi.UnionType):
        return " or ".join(_phrase(t) for t in node.types if not isinstance(t, mi.NoneType))
    return "a value"


def _bounds(node: mi.IntType | mi.FloatType) -> str:
    low, high = node.ge, node.le
    if low is not None and high is not None:
        return f" from {low:g} to {high:g}"
    parts = [f"more than {node.gt:g}" if node.gt is not None else "",
             f"of {low:g} or more" if low is not None else "",
             f"less than {node.lt:g}" if node.lt is not None else "",
             f"of at most {high:g}" if high is not None else ""]
    said = " and ".join(p for p in parts if p)
    return f" {said}" if said else ""
