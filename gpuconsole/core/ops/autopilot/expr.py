"""The rule language: conditions over a pool's live figures, each held for a duration.

Grammar (keywords are lower case; ``not`` binds tightest, then ``and``, then ``or``)::

    expr       := term ("or" term)*
    term       := factor ("and" factor)*
    factor     := "not" factor | "(" expr ")" | comparison
    comparison := FIGURE OP NUMBER ["for" DURATION]
    FIGURE     := gpu_util | gpu_mem | pending_gpus | pending_jobs | quota_pending_gpus | idle_gpus
    OP         := > | >= | < | <= | == | !=
    DURATION   := NUMBER ("s" | "m" | "h" | "d"), e.g. 90s, 10m, 1.5h

``gpu_util > 80 for 10m`` holds when every sample of ``gpu_util`` over the last ten minutes was
above 80, and the figures go back at least that far: a condition never holds on a history
shorter than its duration (a restart starts every duration over, the conservative way). A
comparison without ``for`` holds on the latest sample alone. A figure with no sample at all
(unknown telemetry) makes its comparison false.

``pending_gpus`` and ``pending_jobs`` count the work that waits for capacity (a node to fit on,
a gang to fit at once): work more instances would start. ``quota_pending_gpus`` counts the GPUs
that wait on their queue's quota (Kueue, Volcano), which more instances would not start.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

FIGURES = ("gpu_util", "gpu_mem", "pending_gpus", "pending_jobs", "quota_pending_gpus", "idle_gpus")
OPERATORS: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
}
UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}

# A series: (timestamp, value) samples, oldest first.
Series = Sequence[tuple[float, float]]

_TOKEN = re.compile(r"\s*(?:(?P<num>\d+(?:\.\d+)?[a-z]*)|(?P<op>>=|<=|==|!=|>|<)|(?P<paren>[()])|(?P<word>[A-Za-z_]\w*)|(?P<bad>\S))")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([a-z]+)")


class ExpressionError(ValueError):
    """An expression or a duration that cannot be read; the message is one line."""


def parse_duration(text: str) -> float:
    """``"15m"`` as 900.0 seconds. Raises :class:`ExpressionError` naming the bad part."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise ExpressionError(f"{text!r} is not a duration (write e.g. 90s, 10m, 2h, 1d)")
    number, unit = match.groups()
    if unit not in UNITS:
        raise ExpressionError(f"unknown unit {unit!r} in {text!r} (units: s, m, h, d)")
    return float(number) * UNITS[unit]


@dataclass(frozen=True, slots=True)
class Comparison:
    """``figure op threshold`` held for ``duration_s`` seconds."""

    figure: str
    op: str
    threshold: float
    duration_s: float = 0.0

    def text(self) -> str:
        held = f" for {_duration_text(self.duration_s)}" if self.duration_s else ""
        return f"{self.figure} {self.op} {self.threshold:g}{held}"


@dataclass(frozen=True, slots=True)
class Not:
    inner: Node

    def text(self) -> str:
        return f"not {self.inner.text()}"


@dataclass(frozen=True, slots=True)
class BoolOp:
    """``and`` / ``or`` over two or more parts."""

    op: str
    parts: tuple[Node, ...]

    def text(self) -> str:
        return "(" + f" {self.op} ".join(p.text() for p in self.parts) + ")"


Node = Comparison | Not | BoolOp


def _duration_text(seconds: float) -> str:
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("m", 60.0)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


class _Parser:
    def __init__(self, text: str, figures: Sequence[str] = FIGURES) -> None:
        self.text = text
        self.figures = figures
        self.tokens: list[tuple[str, str]] = []
        for match in _TOKEN.finditer(text):
            kind = match.lastgroup or "bad"
            if kind == "bad":
                raise ExpressionError(f"unexpected {match.group(kind)!r} in {text!r}")
            self.tokens.append((kind, match.group(kind)))
        self.pos = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, what: str) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            raise ExpressionError(f"{self.text!r} ends where {what} was expected")
        self.pos += 1
        return token

    def parse(self) -> Node:
        if not self.tokens:
            raise ExpressionError("empty expression")
        node = self.expr()
        token = self.peek()
        if token is not None:
            raise ExpressionError(f"unexpected {token[1]!r} in {self.text!r}")
        return node

    def _chain(self, op: str, part: Callable[[], Node]) -> Node:
        parts = [part()]
        while self.peek() == ("word", op):
            self.pos += 1
            parts.append(part())
        return parts[0] if len(parts) == 1 else BoolOp(op, tuple(parts))

    def expr(self) -> Node:
        return self._chain("or", self.term)

    def term(self) -> Node:
        return self._chain("and", self.factor)

    def factor(self) -> Node:
        token = self.peek()
        if token == ("word", "not"):
            self.pos += 1
            return Not(self.factor())
        if token == ("paren", "("):
            self.pos += 1
            node = self.expr()
            if self.take("')'") != ("paren", ")"):
                raise ExpressionError(f"missing ')' in {self.text!r}")
            return node
        return self.comparison()

    def comparison(self) -> Comparison:
        kind, figure = self.take("a figure")
        if kind != "word" or figure not in self.figures:
            raise ExpressionError(f"unknown figure {figure!r} (figures: {', '.join(self.figures)})")
        kind, op = self.take(f"a comparison after {figure}")
        if kind != "op":
            raise ExpressionError(f"expected a comparison (>, >=, <, <=, ==, !=) after {figure}, got {op!r}")
        kind, number = self.take(f"a number after {figure} {op}")
        try:
            threshold = float(number) if kind == "num" else math.nan
        except ValueError:
            threshold = math.nan
        if math.isnan(threshold):
            raise ExpressionError(f"expected a number after {figure} {op}, got {number!r}")
        duration = 0.0
        if self.peek() == ("word", "for"):
            self.pos += 1
            kind, text = self.take(f"a duration after {figure} {op} {number} for")
            duration = parse_duration(text)
        return Comparison(figure, op, threshold, duration)


def parse(text: str, figures: Sequence[str] = FIGURES) -> Node:
    """The condition ``text`` describes, on ``figures`` (a pool's, by default). Raises
    :class:`ExpressionError` (one line)."""
    return _Parser(text, figures).parse()


def comparisons(node: Node) -> tuple[Comparison, ...]:
    """Every comparison of ``node``, in order (what the console puts beside the live figures)."""
    if isinstance(node, Comparison):
        return (node,)
    if isinstance(node, Not):
        return comparisons(node.inner)
    return tuple(c for p in node.parts for c in comparisons(p))


def figures_of(node: Node) -> tuple[str, ...]:
    """The figures ``node`` reads, once each, in order."""
    out: dict[str, None] = {}

    def walk(n: Node) -> None:
        if isinstance(n, Comparison):
            out[n.figure] = None
        elif isinstance(n, Not):
            walk(n.inner)
        else:
            for p in n.parts:
                walk(p)

    walk(node)
    return tuple(out)


def longest_duration(node: Node) -> float:
    """How much history ``node`` needs (the longest ``for``)."""
    if isinstance(node, Comparison):
        return node.duration_s
    if isinstance(node, Not):
        return longest_duration(node.inner)
    return max(longest_duration(p) for p in node.parts)


def held(series: Series, op: str, threshold: float, duration_s: float, now: float) -> bool:
    """Whether every sample of ``series`` from ``now - duration_s`` on satisfies the comparison,
    and the series reaches back that far. Scans from the newest sample and stops at the first
    one old enough, so a long history costs nothing."""
    if not series:
        return False
    compare = OPERATORS[op]
    start = now - duration_s
    for ts, value in reversed(series):
        if not compare(value, threshold):
            return False
        if ts <= start:
            return True
    return False


def evaluate(node: Node, series: Mapping[str, Series], now: float) -> bool:
    """Whether ``node`` holds at ``now`` over the figures' ``series`` (oldest sample first)."""
    if isinstance(node, Comparison):
        return held(series.get(node.figure, ()), node.op, node.threshold, node.duration_s, now)
    if isinstance(node, Not):
        return not evaluate(node.inner, series, now)
    if node.op == "and":
        return all(evaluate(p, series, now) for p in node.parts)
    return any(evaluate(p, series, now) for p in node.parts)
