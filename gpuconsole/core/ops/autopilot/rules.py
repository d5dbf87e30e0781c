"""Autopilot rules: what each kind asks for, read from ``[[rules]]`` tables or the database.

Four kinds (see the README's rule language)::

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

    [[rules]]
    name = "embed"
    kind = "serve-scale"     # a Deployment's (or StatefulSet's) replicas
    service = "search/text-embed"
    scale_out = "p99_ms > 150 for 1m"
    scale_in = "rps < 100 for 15m"
    min = 2
    max = 6
    cooldown = "5m"

Every problem is one :class:`RuleError` line naming the rule and the key, so a typo in a
threshold is found when the file is read, never when the rule would act. Each kind's table is a
Struct (:class:`ScaleTable`, :class:`IdleStopTable`, :class:`SpotRecoverTable`, :class:`ServeScaleTable`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from gpuconsole.core.config_decode import TableError, decode_table, fields_of
from gpuconsole.core.ops.autopilot.expr import FIGURES, ExpressionError, Node, figures_of, parse, parse_duration
from gpuconsole.core.ops.provision import validate
from gpuconsole.model import Instance, Job, LaunchSpec, Market

_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"
_SERVICE = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?/[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"  # NAMESPACE/NAME
SpotChoice = Literal["keep", "terminate"]
# What a serve-scale rule's conditions may read of its service (the serving figures, and its replicas).
SERVICE_FIGURES = ("rps", "p50_ms", "p99_ms", "mean_ms", "ttft_ms", "tokens_per_s", "queue_depth", "kv_cache",
                   "error_ratio", "replicas", "ready", "pending")
LAUNCH_EXAMPLE = 'a table, e.g. { type = "g5.xlarge", region = "us-east-1", ami = "ami-…" }'


class LaunchTable(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A scale rule's ``launch = { ... }``."""

    type: Annotated[str, Meta(min_length=1)]
    region: Annotated[str, Meta(min_length=1)]
    ami: Annotated[str, Meta(min_length=1)]
    market: Literal["on-demand", "spot"] = "on-demand"
    zone: str = ""
    tags: Annotated[dict[str, str], Meta(description='a table of string values, e.g. { Pool = "train" }')] = {}


class RuleTable(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """What every ``[[rules]]`` table has."""

    name: Annotated[str, Meta(pattern=_NAME, description="a name of letters, digits, '.', '_' or '-'")]
    kind: str
    scope: str | None = None


class ScaleTable(RuleTable, frozen=True, kw_only=True):
    """A ``scale`` rule: a pool kept between min and max by conditions."""

    pool: str | None = None
    launch: Annotated[LaunchTable | None, Meta(description=LAUNCH_EXAMPLE)] = None  # required: checked last
    scale_out: str | None = None
    scale_in: str | None = None
    min: Annotated[int, Meta(ge=0)] = 0
    max: Annotated[int, Meta(ge=1)] = 1
    step: Annotated[int, Meta(ge=1)] = 1
    cooldown: str = "15m"
    budget_guard: str = ""
    spot: SpotChoice = "keep"


class IdleStopTable(RuleTable, frozen=True, kw_only=True):
    """An ``idle-stop`` rule: instances idle for a while are stopped."""

    idle_for: str = "30m"
    threshold: Annotated[float, Meta(ge=0, le=100, description="a utilization percent from 0 to 100")] = 5.0
    spot: SpotChoice = "keep"
    cooldown: str = "0s"


class SpotRecoverTable(RuleTable, frozen=True, kw_only=True):
    """A ``spot-recover`` rule: an interrupted spot instance is replaced."""

    fallback_after: Annotated[int, Meta(ge=0)] = 2
    cooldown: str = "0s"


class ServeScaleTable(RuleTable, frozen=True, kw_only=True):
    """A ``serve-scale`` rule: one inference service's replicas kept between min and max by
    conditions on its serving figures (never beside an HPA that scales it)."""

    service: Annotated[str, Meta(pattern=_SERVICE, description='a service as "NAMESPACE/NAME"')] | None = None
    scale_out: str | None = None
    scale_in: str | None = None
    min: Annotated[int, Meta(ge=0)] = 1
    max: Annotated[int, Meta(ge=1, le=1000)] = 2
    step: Annotated[int, Meta(ge=1)] = 1
    cooldown: str = "5m"


TABLES: dict[str, type[RuleTable]] = {"scale": ScaleTable, "idle-stop": IdleStopTable, "spot-recover": SpotRecoverTable,
                                      "serve-scale": ServeScaleTable}
KINDS = tuple(TABLES)
COMMON_KEYS = fields_of(RuleTable)
KIND_KEYS = {kind: tuple(k for k in fields_of(table) if k not in COMMON_KEYS) for kind, table in TABLES.items()}


class RuleError(ValueError):
    """A rule that cannot be used; the message is one line naming the rule and the key."""


@dataclass(frozen=True, slots=True)
class Scope:
    """Which instances (and jobs) a rule looks at: ``all``, ``tag:KEY=VALUE``, ``namespace:NS`` or
    ``queue:NAME`` (the jobs of a Kueue LocalQueue or ClusterQueue, or a Volcano queue)."""

    kind: str  # "all", "tag", "namespace", "queue"
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
        if sep and head in ("namespace", "queue") and rest:
            return cls(head, rest)
        raise ValueError(f"{text!r} is not a scope (all, tag:KEY=VALUE, namespace:NS or queue:NAME)")

    def text(self) -> str:
        return {"all": "all", "tag": f"tag:{self.key}={self.value}", "namespace": f"namespace:{self.key}",
                "queue": f"queue:{self.key}"}[self.kind]

    def has_instance(self, inst: Instance) -> bool:
        if self.kind == "tag":
            return inst.tag(self.key) == self.value
        return True  # a namespace scope narrows jobs; instances are shared by every namespace

    def has_job(self, job: Job) -> bool:
        if self.kind == "queue":
            return self.key in (job.queue, job.cluster_queue)
        return self.kind != "namespace" or job.namespace == self.key

    def has_service(self, namespace: str) -> bool:
        """Whether a service of ``namespace`` is in scope (services wait in no queue)."""
        return self.kind not in ("namespace", "queue") or (self.kind == "namespace" and namespace == self.key)


# The origin of a rule from a login's own config file on a shared machine: it plans, never acts.
PLAN_ONLY = "login"
PLAN_ONLY_NOTE = ("plan only: on a shared machine a rule acts only from the site config or `rule add` "
                  "(admin, MFA, audited)")


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
    service: str = ""  # a serve-scale rule's "NAMESPACE/NAME"

    @property
    def plan_only(self) -> bool:
        """A rule that decides but never acts (a login's own rule on a shared machine)."""
        return self.origin == PLAN_ONLY

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

    kind = table.get("kind")
    if kind not in TABLES:
        raise fail("kind", f"{kind!r} is not a kind (kinds: {', '.join(KINDS)})")
    try:
        given = decode_table(dict(table), TABLES[kind])
    except TableError as exc:
        problem = exc.problem
        if exc.unknown and "." not in exc.key:  # not launch.…, whose table says its own keys
            problem = f"unknown key for a {kind} rule (known: {', '.join(exc.known)})"
        raise fail(exc.key or "rules", problem) from None

    def seconds(key: str, text: str) -> float:
        try:
            return parse_duration(text)
        except ExpressionError as exc:
            raise fail(key, str(exc)) from None

    def condition(key: str, text: str | None) -> Node | None:
        try:
            return None if text is None else parse(text, SERVICE_FIGURES if kind == "serve-scale" else FIGURES)
        except ExpressionError as exc:
            raise fail(key, str(exc)) from None

    def scope_of(key: str, text: str | None) -> Scope:
        if text is None:
            raise fail(key, "required: a string")
        try:
            return Scope.parse(text)
        except ValueError as exc:
            raise fail(key, str(exc)) from None

    common: dict[str, Any] = {"name": given.name, "kind": kind, "origin": origin, "source": dict(table)}
    if isinstance(given, ScaleTable):
        if given.pool is None and given.scope is None:
            raise fail("pool", 'required: the instances the rule scales, e.g. "tag:Pool=train"')
        pool = scope_of("pool", given.pool) if given.pool is not None else scope_of("scope", given.scope)
        jobs = scope_of("scope", given.scope) if given.pool is not None and given.scope is not None else pool
        if given.min > given.max:
            raise fail("min", f"min {given.min} is above max {given.max}")
        out, inn = condition("scale_out", given.scale_out), condition("scale_in", given.scale_in)
        if out is None and inn is None:
            raise fail("scale_out", "a scale rule needs scale_out, scale_in or both")
        if out is not None and "quota_pending_gpus" in figures_of(out):
            raise fail("scale_out", "quota_pending_gpus cannot launch instances: more instances do not raise a "
                                    "queue's quota")
        return Rule(scope=pool, launch=_launch(given.launch, pool, fail), scale_out=out, scale_in=inn,
                    min=given.min, max=given.max, step=given.step, cooldown_s=seconds("cooldown", given.cooldown),
                    budget_guard=given.budget_guard, spot=given.spot, jobs=jobs, **common)
    if isinstance(given, ServeScaleTable):
        return _serve_scale(given, common, fail, condition, seconds)
    scope = scope_of("scope", given.scope if given.scope is not None else "all")
    if isinstance(given, IdleStopTable):
        return Rule(scope=scope, jobs=scope, idle_for_s=seconds("idle_for", given.idle_for),
                    idle_threshold=given.threshold, spot=given.spot, cooldown_s=seconds("cooldown", given.cooldown),
                    **common)
    if not isinstance(given, SpotRecoverTable):
        raise fail("kind", f"{kind!r} is not a kind (kinds: {', '.join(KINDS)})")
    return Rule(scope=scope, jobs=scope, fallback_after=given.fallback_after,
                cooldown_s=seconds("cooldown", given.cooldown), **common)


def _serve_scale(given: ServeScaleTable, common: dict[str, Any], fail: Any, condition: Any, seconds: Any) -> Rule:
    if given.service is None:
        raise fail("service", 'required: the service it scales, as "NAMESPACE/NAME"')
    if given.scope is not None:
        raise fail("scope", "a serve-scale rule names its service (service = \"NAMESPACE/NAME\"), not a scope")
    if given.min > given.max:
        raise fail("min", f"min {given.min} is above max {given.max}")
    out, inn = condition("scale_out", given.scale_out), condition("scale_in", given.scale_in)
    if out is None and inn is None:
        raise fail("scale_out", "a serve-scale rule needs scale_out, scale_in or both")
    namespace = given.service.partition("/")[0]
    return Rule(scope=Scope("namespace", namespace), jobs=Scope("namespace", namespace), service=given.service,
                scale_out=out, scale_in=inn, min=given.min, max=given.max, step=given.step,
                cooldown_s=seconds("cooldown", given.cooldown), **common)


def _launch(given: LaunchTable | None, pool: Scope, fail: Any) -> LaunchSpec:
    """The launch spec of a scale rule; its tags always include the pool's tag, so what it
    launches is counted in the pool."""
    if given is None:
        raise fail("launch", f"required: {LAUNCH_EXAMPLE}")
    merged = dict(given.tags)
    if pool.kind == "tag":
        if merged.get(pool.key, pool.value) != pool.value:
            raise fail("launch.tags", f"tag {pool.key} must be {pool.value!r}, the pool's, or what it launches is not in the pool")
        merged[pool.key] = pool.value
    spec = LaunchSpec(given.region, given.type, given.ami, Market(given.market), availability_zone=given.zone,
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
