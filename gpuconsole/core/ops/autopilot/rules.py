"""Autopilot rules: what each kind asks for, read from ``[[rules]]`` tables or the database.

Three kinds (see the README's rule language)::

    [[rules]]
    name = "train-pool"
    kind = "scale"
    pool = "tag:Pool=train"
    launch = { type = "g5.xlarge", region = "us-east-1", market = "on-demand", ami = "ami-0abc", tags = { Pool = "train" } }
    scale_out = "gpu_util > 80 for 10m or pending_gpus > 0 for 5m"
    scale_in = "gpu_util < 20 for 30m"
    min = 0
    max = 4
    step = 1
    cooldown = "15m"
    budget_guard = "team-a"

    [[rules]]
    name = "autostop"
    kind = "idle-stop"
    scope = "all"
    idle_for = "30m"
    spot = "keep"            # or "terminate"

    [[rules]]
    name = "spot"
    kind = "spot-recover"
    scope = "tag:Pool=train"
    fallback_after = 2

Every problem is one :class:`RuleError` line naming the rule and the key, so a typo in a
threshold is found when the file is read, never when the rule would act.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuconsole.core.ops.autopilot.expr import ExpressionError, Node, parse, parse_duration
from gpuconsole.core.ops.provision import validate
from gpuconsole.model import Instance, Job, LaunchSpec, Market

KINDS = ("scale", "idle-stop", "spot-recover")
COMMON_KEYS = ("name", "kind", "scope")
KIND_KEYS = {
    "scale": ("pool", "launch", "scale_out", "scale_in", "min", "max", "step", "cooldown", "budget_guard", "spot"),
    "idle-stop": ("idle_for", "threshold", "spot", "cooldown"),
    "spot-recover": ("fallback_after", "cooldown"),
}
LAUNCH_KEYS = ("type", "region", "market", "ami", "zone", "tags")
SPOT_CHOICES = ("keep", "terminate")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")


class RuleError(ValueError):
    """A rule that cannot be used; the message is one line naming the rule and the key."""


@dataclass(frozen=True, slots=True)
class Scope:
    """Which instances (and jobs) a rule looks at: ``all``, ``tag:KEY=VALUE`` or ``namespace:NS``."""

    kind: str  # "all", "tag", "namespace"
    key: str = ""
    value: str = ""

    @classmethod
    def parse(cls, text: str) -> Scope:
        text = text.strip()
        if text == "all":
            return cls("all")
        head, sep, rest = text.partition(":")
        if sep and head == "tag":
            key, eq, value = rest.partition("=")
            if eq and key:
                return cls("tag", key, value)
            raise ValueError(f"{text!r}: write tag:KEY=VALUE")
        if sep and head == "namespace" and rest:
            return cls("namespace", rest)
        raise ValueError(f"{text!r} is not a scope (all, tag:KEY=VALUE or namespace:NS)")

    def text(self) -> str:
        return {"all": "all", "tag": f"tag:{self.key}={self.value}", "namespace": f"namespace:{self.key}"}[self.kind]

    def has_instance(self, inst: Instance) -> bool:
        if self.kind == "tag":
            return inst.tag(self.key) == self.value
        return True  # a namespace scope narrows jobs; instances are shared by every namespace

    def has_job(self, job: Job) -> bool:
        return self.kind != "namespace" or job.namespace == self.key


@dataclass(frozen=True, slots=True)
class Rule:
    """One autopilot rule (the fields a kind does not use keep their defaults)."""

    name: str
    kind: str
    scope: Scope  # the instances it acts on (a scale rule's pool)
    origin: str = "config"
    jobs: Scope = Scope("all")  # the jobs whose figures it reads (a scale rule's scope; else its scope)  # "config" (the file) or "db" (rule add)
    source: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)  # the table as written
    launch: LaunchSpec | None = None
    scale_out: Node | None = None
    scale_in: Node | None = None
    min: int = 0
    max: int = 1
    step: int = 1
    cooldown_s: float = 900.0
    budget_guard: str = ""
    spot: str = "keep"
    idle_for_s: float = 1800.0
    idle_threshold: float = 5.0
    fallback_after: int = 2

    @property
    def actor(self) -> str:
        """Who the audit log says acted."""
        return f"autopilot:{self.name}"


def rule_from_table(table: Mapping[str, Any], *, origin: str = "config", where: str = "") -> Rule:
    """One ``[[rules]]`` table as a :class:`Rule`. Raises :class:`RuleError` (one line)."""
    raw_name = table.get("name")
    label = f"{where}rule {raw_name!r}" if isinstance(raw_name, str) and raw_name else f"{where}rule"

    def fail(key: str, problem: str) -> RuleError:
        return RuleError(f"{label} key {key}: {problem}")

    if not isinstance(raw_name, str) or not _NAME.fullmatch(raw_name):
        raise fail("name", "a name of letters, digits, '.', '_' or '-' is required")
    kind = table.get("kind")
    if kind not in KINDS:
        raise fail("kind", f"{kind!r} is not a kind (kinds: {', '.join(KINDS)})")
    known = COMMON_KEYS + KIND_KEYS[kind]
    for key in table:
        if key not in known:
            raise fail(key, f"unknown key for a {kind} rule (known: {', '.join(known)})")

    def text(key: str, default: str | None = None) -> str:
        value = table.get(key, default)
        if not isinstance(value, str) or (default is None and not value):
            raise fail(key, "a string is required" if key not in table else f"expected a string, got {value!r}")
        return value

    def whole(key: str, default: int, low: int) -> int:
        value = table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise fail(key, f"expected a whole number of {low} or more, got {value!r}")
        return value

    def seconds(key: str, default: str) -> float:
        try:
            return parse_duration(text(key, default))
        except ExpressionError as exc:
            raise fail(key, str(exc)) from None

    def condition(key: str) -> Node | None:
        if key not in table:
            return None
        try:
            return parse(text(key))
        except ExpressionError as exc:
            raise fail(key, str(exc)) from None

    def scope_of(key: str, default: str | None = None) -> Scope:
        try:
            return Scope.parse(text(key, default))
        except ValueError as exc:
            raise fail(key, str(exc)) from None

    def spot_choice() -> str:
        value = text("spot", "keep")
        if value not in SPOT_CHOICES:
            raise fail("spot", f"{value!r}: choose keep or terminate")
        return value

    common: dict[str, Any] = {"name": raw_name, "kind": kind, "origin": origin, "source": dict(table)}
    if kind == "scale":
        pool = scope_of("pool" if "pool" in table else "scope")
        jobs = scope_of("scope") if "pool" in table and "scope" in table else pool
        low, high = whole("min", 0, 0), whole("max", 1, 1)
        if low > high:
            raise fail("min", f"min {low} is above max {high}")
        out, inn = condition("scale_out"), condition("scale_in")
        if out is None and inn is None:
            raise fail("scale_out", "a scale rule needs scale_out, scale_in or both")
        guard = text("budget_guard", "")
        return Rule(scope=pool, launch=_launch(table.get("launch"), pool, fail), scale_out=out, scale_in=inn,
                    min=low, max=high, step=whole("step", 1, 1), cooldown_s=seconds("cooldown", "15m"),
                    budget_guard=guard, spot=spot_choice(), jobs=jobs, **common)
    scope = scope_of("scope", "all")
    if kind == "idle-stop":
        threshold = table.get("threshold", 5.0)
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 <= threshold <= 100:
            raise fail("threshold", f"expected a utilization percent from 0 to 100, got {threshold!r}")
        return Rule(scope=scope, jobs=scope, idle_for_s=seconds("idle_for", "30m"), idle_threshold=float(threshold),
                    spot=spot_choice(), cooldown_s=seconds("cooldown", "0s"), **common)
    return Rule(scope=scope, jobs=scope, fallback_after=whole("fallback_after", 2, 0), cooldown_s=seconds("cooldown", "0s"), **common)


def _launch(value: Any, pool: Scope, fail: Any) -> LaunchSpec:
    """The launch spec of a scale rule; its tags always include the pool's tag, so what it
    launches is counted in the pool."""
    if not isinstance(value, Mapping):
        raise fail("launch", "a table is required, e.g. { type = \"g5.xlarge\", region = \"us-east-1\", ami = \"ami-…\" }")
    for key in value:
        if key not in LAUNCH_KEYS:
            raise fail(f"launch.{key}", f"unknown key (known: {', '.join(LAUNCH_KEYS)})")
    parts: dict[str, str] = {}
    for key in ("type", "region", "ami"):
        item = value.get(key)
        if not isinstance(item, str) or not item:
            raise fail(f"launch.{key}", "a non-empty string is required")
        parts[key] = item
    market_text = value.get("market", "on-demand")
    try:
        market = Market(market_text)
    except ValueError:
        raise fail("launch.market", f"{market_text!r}: choose on-demand or spot") from None
    zone = value.get("zone", "")
    if not isinstance(zone, str):
        raise fail("launch.zone", f"expected a string, got {zone!r}")
    tags = value.get("tags", {})
    if not isinstance(tags, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in tags.items()):
        raise fail("launch.tags", "a table of string values is required, e.g. { Pool = \"train\" }")
    merged = dict(tags)
    if pool.kind == "tag":
        if merged.get(pool.key, pool.value) != pool.value:
            raise fail("launch.tags", f"tag {pool.key} must be {pool.value!r}, the pool's, or what it launches is not in the pool")
        merged[pool.key] = pool.value
    spec = LaunchSpec(parts["region"], parts["type"], parts["ami"], market, availability_zone=zone,
                      tags=tuple(sorted(merged.items())))
    keys = {"region": "launch.region", "instance_type": "launch.type", "image_id": "launch.ami"}
    for field_name, problem in validate(spec).items():  # what a launch would refuse, refused when read
        raise fail(keys.get(field_name, "launch"), problem)
    return spec


def rules_from_tables(tables: Any, *, origin: str = "config", where: str = "") -> tuple[Rule, ...]:
    """Every ``[[rules]]`` table, checked, with names unique. Raises :class:`RuleError`."""
    if not isinstance(tables, list) or not all(isinstance(t, Mapping) for t in tables):
        raise RuleError(f"{where}key rules: write each rule as a [[rules]] table")
    out: list[Rule] = []
    seen: set[str] = set()
    for table in tables:
        rule = rule_from_table(table, origin=origin, where=where)
        if rule.name in seen:
            raise RuleError(f"{where}rule {rule.name!r} key name: declared twice")
        seen.add(rule.name)
        out.append(rule)
    return tuple(out)


def rule_to_json(rule: Rule) -> str:
    """The table a rule was read from, as JSON (how the database keeps added rules)."""
    return json.dumps(dict(rule.source), sort_keys=True)
