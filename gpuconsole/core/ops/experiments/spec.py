"""An experiment as the user writes it: one workload, several arms, read from TOML and checked.

An experiment runs one workload on several **arms** (an instance type, a market, optionally a
GPU count or a MIG profile), ``repeats`` times each. :func:`parse_text` reads the file with the
standard library's ``tomllib`` and checks every field before anything is submitted; the first
problem is raised as :class:`SpecError` whose message names the key (``arms[2].instance_type:
unknown instance type 'g9.xlarge'``), so a script and a person both see what to fix. The file's
shape is the :class:`ExperimentFile` Struct; what its types cannot say is checked after.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from gpuconsole.backends import registry
from gpuconsole.backends.clouds import provider_for_type, published_types
from gpuconsole.core.config_decode import TableError, decode_table
from gpuconsole.core.money.budgets import namespace_problem
from gpuconsole.core.money.catalog import bundled_catalog
from gpuconsole.core.ops.manifests import MAX_GPUS, MIG_PROFILES, JobRequest, validate

MAX_REPEATS = 100
MAX_COST = 10_000_000  # dollars: a bound that catches a typo (1e308), not a spending limit
MAX_TIMEOUT_MINUTES = 43_200
WALL_TIME_UNIT = "s"
_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
NAME_MAX = 32  # leaves room for "-<arm>-r<repeat>-<attempt>" in a 63-character Job name
ARM_NAME_MAX = 12


class SpecError(ValueError):
    """A field of an experiment file is wrong; ``key`` names it and the message is one line."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


@dataclass(frozen=True, slots=True)
class Metric:
    """The result of a run: a regex with one group over the pod log, or the job's wall time.

    Attributes:
        regex: empty for wall time.
        unit: what the number means (``samples/s``, ``ms``); ``s`` for wall time.
        better: ``higher`` or ``lower``.
    """

    regex: str = ""
    unit: str = WALL_TIME_UNIT
    better: str = "lower"

    @property
    def wall_time(self) -> bool:
        return not self.regex

    @property
    def is_rate(self) -> bool:
        """A rate (``…/s``): the time for the work is the work divided by it."""
        return not self.wall_time and self.unit.replace(" ", "").endswith(("/s", "/sec", "persecond"))

    def read(self, lines: list[str]) -> float | None:
        """The last value the regex finds in ``lines`` (the final figure a benchmark prints)."""
        pattern = re.compile(self.regex)
        found: float | None = None
        for text in lines:
            for match in pattern.finditer(text):
                try:
                    found = float(match.group(1))
                except (TypeError, ValueError):
                    continue
        return found


class Work(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What one run does, so a rate becomes a cost per result (1,281,167 samples: one epoch)."""

    amount: Annotated[float, Meta(gt=0)] = 1.0
    unit: Annotated[str, Meta(pattern=r"\S", description="a word (samples, inferences)")] = "run"
    per: str = ""  # what one run's work is called (``epoch``); empty: the amount and unit

    @property
    def label(self) -> str:
        """``epoch``, or ``1,281,167 samples``."""
        return self.per or f"{self.amount:,.0f} {self.unit}"


class Arm(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One way to run the workload (an ``[[arms]]`` table)."""

    instance_type: Annotated[str, Meta(min_length=1)]
    market: Literal["on-demand", "spot"] = "on-demand"
    gpus: Annotated[int, Meta(ge=0, le=MAX_GPUS)] = 0  # 0: the experiment's gpus
    mig_profile: str = ""
    name: Annotated[str, Meta(max_length=ARM_NAME_MAX, pattern=f"^$|{_NAME}", description=(
        f"lowercase a-z, 0-9 and '-', at most {ARM_NAME_MAX} characters"))] = ""

    @property
    def cloud(self) -> str:
        """The cloud an arm names (``alibaba:ecs.gn7i-c8g1.2xlarge``), ``""`` when it names none."""
        return self.instance_type.split(":", 1)[0] if ":" in self.instance_type else ""

    @property
    def type_name(self) -> str:
        """The instance type without its cloud: what the node's instance-type label says."""
        return self.instance_type.split(":", 1)[-1]

    @property
    def key(self) -> str:
        """A short label name for the arm: ``g5-xlarge-spot``."""
        if self.name:
            return self.name
        base = self.type_name.replace(".", "-").replace("xlarge", "xl")
        extra = f"-{self.mig_profile.replace('.', '')}" if self.mig_profile else ""
        return f"{base}{extra}-{'spot' if self.market == 'spot' else 'od'}"

    @property
    def title(self) -> str:
        mig = f" {self.mig_profile}" if self.mig_profile else ""
        return f"{self.instance_type}{mig} {self.market}"


@dataclass(frozen=True, slots=True)
class ExperimentSpec:
    """A whole experiment file, checked."""

    name: str
    namespace: str
    image: str
    arms: tuple[Arm, ...]
    command: tuple[str, ...] | str = ()
    env: tuple[tuple[str, str], ...] = ()
    gpus: int = 1
    metric: Metric = field(default_factory=Metric)
    work: Work = field(default_factory=Work)
    repeats: int = 3
    max_cost: float | None = None
    timeout_minutes: float = 240.0

    def arm_gpus(self, arm: Arm) -> int:
        return arm.gpus or self.gpus

    def job_request(self, arm: Arm, repeat: int, attempt: int, owner: str = "") -> JobRequest:
        """The Job of one run: pinned to the arm's instance type, labelled with its place."""
        selector = (("node.kubernetes.io/instance-type", arm.type_name),)
        if arm.market == "spot":
            selector += (("karpenter.sh/capacity-type", "spot"),)
        labels = (("gpuconsole.io/experiment", self.name), ("gpuconsole.io/arm", arm.key),
                  ("gpuconsole.io/repeat", str(repeat)))
        return JobRequest(
            name=run_name(self.name, arm, repeat, attempt), namespace=self.namespace, image=self.image,
            command=self.command, gpus=self.arm_gpus(arm), mig_profile=arm.mig_profile, env=self.env,
            backoff_limit=0, owner=owner, node_selector=selector, labels=labels,
            active_deadline_seconds=int(self.timeout_minutes * 60),
        )


def run_name(experiment: str, arm: Arm, repeat: int, attempt: int) -> str:
    """The Job name of a run; the runner finds its jobs by these names."""
    return f"{experiment}-{arm.key}-r{repeat}-{attempt}"[:63].rstrip("-")


# --------------------------------------------------------------------------- reading


def parse_file(path: str | Path, known_type: Callable[[str], bool] | None = None) -> ExperimentSpec:
    """Read and check an experiment file. Raises :class:`SpecError` (``file`` for an unreadable one)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError("file", f"cannot read {path}: {exc.strerror or exc}") from None
    return parse_text(text, known_type)


def parse_text(text: str, known_type: Callable[[str], bool] | None = None) -> ExperimentSpec:
    """Check an experiment written in TOML; ``known_type`` says whether an instance type exists
    (default: the bundled catalog)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError("file", f"not TOML: {exc}") from None
    return from_mapping(data, known_type)


class MetricTable(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``metric = { regex = "samples/s: ([0-9.]+)", unit = "samples/s", better = "higher" }``."""

    regex: str = ""
    unit: str = ""
    better: Literal["higher", "lower"] | None = None  # None: higher for a regex, lower for wall time


class ExperimentFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """An experiment file as written."""

    name: Annotated[str, Meta(max_length=NAME_MAX, pattern=_NAME, description=(
        f"lowercase a-z, 0-9 and '-', at most {NAME_MAX} characters"))]
    image: Annotated[str, Meta(pattern=r"\S", description="an image name")]
    arms: Annotated[list[Arm], Meta(min_length=1, description="at least one [[arms]] table with an instance_type")]
    namespace: str = "default"
    command: Annotated[list[str] | str, Meta(
        description='a list of strings (["python", "bench.py"]) or a shell line')] = []
    env: Annotated[dict[str, str | int | float], Meta(
        description='a table of names and values: env = { BATCH = "256" }')] = {}
    gpus: Annotated[int, Meta(ge=0, le=MAX_GPUS)] = 1
    metric: MetricTable = msgspec.field(default_factory=MetricTable)
    work: Work = msgspec.field(default_factory=Work)
    repeats: Annotated[int, Meta(ge=1, le=MAX_REPEATS)] = 3
    max_cost: Annotated[float, Meta(gt=0, le=MAX_COST, description=(
        f"a number of dollars more than 0, at most {MAX_COST:,}"))] | None = None
    mig_profile: str = ""  # accepted for the arms' sake; each arm says its own
    timeout_minutes: Annotated[float, Meta(gt=0, le=MAX_TIMEOUT_MINUTES, description=(
        f"a number of minutes more than 0, at most {MAX_TIMEOUT_MINUTES:,} (30 days)"))] = 240.0


KNOWN_KEYS = frozenset(f.encode_name for f in msgspec.structs.fields(ExperimentFile))


def from_mapping(data: Mapping[str, Any], known_type: Callable[[str], bool] | None = None) -> ExperimentSpec:
    """Check an experiment given as a mapping (a form builds one too)."""
    known = known_type or known_anywhere
    try:
        given = decode_table(dict(data), ExperimentFile)
    except TableError as exc:
        raise SpecError(exc.key or "file", exc.problem) from None
    namespace = given.namespace.strip()
    if (problem := namespace_problem(namespace)) is not None:
        raise SpecError("namespace", problem)
    command = given.command if isinstance(given.command, str) else tuple(given.command)
    work = msgspec.structs.replace(given.work, unit=given.work.unit.strip(), per=given.work.per.strip())
    spec = ExperimentSpec(name=given.name, namespace=namespace, image=given.image.strip(), command=command,
                          arms=_arms(given.arms, known), env=tuple((k, str(v)) for k, v in given.env.items()),
                          gpus=given.gpus, metric=_metric(given.metric), work=work, repeats=given.repeats,
                          max_cost=given.max_cost, timeout_minutes=given.timeout_minutes)
    for index, arm in enumerate(spec.arms):  # what the Job itself would be refused for
        problems = validate(spec.job_request(arm, 1, 1))
        if problems:
            where, message = next(iter(problems.items()))
            key = {"name": "name", "image": "image", "command": "command", "gpus": f"arms[{index}].gpus",
                   "mig_profile": f"arms[{index}].mig_profile"}.get(where, where)
            raise SpecError(key, message)
    return spec


def _metric(table: MetricTable) -> Metric:
    """The metric: a regex with one group needs a unit; higher is better for it by default."""
    regex = table.regex
    better = table.better or ("higher" if regex else "lower")
    if not regex:
        return Metric(better=better)
    try:
        groups = re.compile(regex).groups
    except re.error as exc:
        raise SpecError("metric.regex", f"not a regular expression: {exc}") from None
    if groups != 1:
        raise SpecError("metric.regex", f"needs exactly one capture group for the number, has {groups}")
    if not table.unit.strip():
        raise SpecError("metric.unit", "required with a regex (samples/s, ms)")
    return Metric(regex=regex, unit=table.unit.strip(), better=better)


def known_anywhere(name: str) -> bool:
    """Whether an instance type is in the bundled catalog or a cloud's published list."""
    return bundled_catalog().get(name) is not None or any(name in published_types(c) for c in registry.cloud_names())


def _arms(arms: list[Arm], known: Callable[[str], bool]) -> tuple[Arm, ...]:
    """The arms, each of a known instance type (on the cloud it names) and MIG profile, none the
    same as another."""
    for index, arm in enumerate(arms):
        where = f"arms[{index}]"
        if arm.cloud and arm.cloud not in registry.cloud_names():
            raise SpecError(f"{where}.instance_type", f"unknown cloud {arm.cloud!r}: write aws: or alibaba:")
        if arm.cloud and provider_for_type(arm.type_name).name != arm.cloud:
            raise SpecError(f"{where}.instance_type", f"{arm.type_name!r} is not an instance type of {arm.cloud}")
        if not known(arm.type_name):
            raise SpecError(f"{where}.instance_type", f"unknown instance type {arm.instance_type!r}")
        if arm.mig_profile and arm.mig_profile not in MIG_PROFILES:
            raise SpecError(f"{where}.mig_profile", "not a MIG profile: e.g. 1g.10gb, 3g.40gb")
        if any(a.key == arm.key for a in arms[:index]):
            raise SpecError(where, f"the same arm as another one ({arm.title}): give it a name")
    return tuple(arms)
