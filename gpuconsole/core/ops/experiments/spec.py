"""An experiment as the user writes it: one workload, several arms, read from TOML and checked.

An experiment runs one workload on several **arms** (an instance type, a market, optionally a
GPU count or a MIG profile), ``repeats`` times each. :func:`parse_text` reads the file with the
standard library's ``tomllib`` and checks every field before anything is submitted; the first
problem is raised as :class:`SpecError` whose message names the key (``arms[2].instance_type:
unknown instance type 'g9.xlarge'``), so a script and a person both see what to fix.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuconsole.core.money.budgets import namespace_problem
from gpuconsole.core.money.catalog import bundled_catalog
from gpuconsole.core.ops.manifests import MAX_GPUS, MIG_PROFILES, JobRequest, validate

MARKETS = ("on-demand", "spot")
BETTER = ("higher", "lower")
MAX_REPEATS = 100
WALL_TIME_UNIT = "s"
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
NAME_MAX = 32  # leaves room for "-<arm>-r<repeat>-<attempt>" in a 63-character Job name
KNOWN_KEYS = frozenset({"name", "namespace", "image", "command", "env", "gpus", "metric", "work", "repeats",
                        "max_cost", "arms", "mig_profile", "timeout_minutes"})
ARM_KEYS = frozenset({"instance_type", "market", "gpus", "mig_profile", "name"})


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


@dataclass(frozen=True, slots=True)
class Work:
    """What one run does, so a rate becomes a cost per result (1,281,167 samples: one epoch)."""

    amount: float = 1.0
    unit: str = "run"
    per: str = ""  # what one run's work is called (``epoch``); empty: the amount and unit

    @property
    def label(self) -> str:
        """``epoch``, or ``1,281,167 samples``."""
        return self.per or f"{self.amount:,.0f} {self.unit}"


@dataclass(frozen=True, slots=True)
class Arm:
    """One way to run the workload."""

    instance_type: str
    market: str = "on-demand"
    gpus: int = 0  # 0: the experiment's gpus
    mig_profile: str = ""
    name: str = ""

    @property
    def key(self) -> str:
        """A short label name for the arm: ``g5-xlarge-spot``."""
        if self.name:
            return self.name
        base = self.instance_type.replace(".", "-").replace("xlarge", "xl")
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
        selector = (("node.kubernetes.io/instance-type", arm.instance_type),)
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


def from_mapping(data: Mapping[str, Any], known_type: Callable[[str], bool] | None = None) -> ExperimentSpec:
    """Check an experiment given as a mapping (a form builds one too)."""
    known = known_type or (lambda name: bundled_catalog().get(name) is not None)
    unknown = sorted(set(data) - KNOWN_KEYS)
    if unknown:
        raise SpecError(unknown[0], f"unknown key: the keys are {', '.join(sorted(KNOWN_KEYS))}")
    name = _text(data, "name", required=True)
    if not _NAME.match(name) or len(name) > NAME_MAX:
        raise SpecError("name", f"lowercase a-z, 0-9 and '-', at most {NAME_MAX} characters")
    namespace = _text(data, "namespace", default="default")
    if (problem := namespace_problem(namespace)) is not None:
        raise SpecError("namespace", problem)
    image = _text(data, "image", required=True)
    command = _command(data.get("command", []))
    env = _env(data.get("env", {}))
    gpus = _whole(data, "gpus", 1, low=0, high=MAX_GPUS)
    repeats = _whole(data, "repeats", 3, low=1, high=MAX_REPEATS)
    max_cost = _number(data, "max_cost", None)
    if max_cost is not None and max_cost <= 0:
        raise SpecError("max_cost", f"must be more than 0 dollars, got {max_cost:g}")
    timeout = _number(data, "timeout_minutes", 240.0)
    if timeout is None or timeout <= 0:
        raise SpecError("timeout_minutes", "must be more than 0 minutes")
    metric = _metric(data.get("metric"))
    work = _work(data.get("work"))
    arms = _arms(data.get("arms"), known)
    spec = ExperimentSpec(name=name, namespace=namespace, image=image, arms=arms, command=command, env=env,
                          gpus=gpus, metric=metric, work=work, repeats=repeats, max_cost=max_cost,
                          timeout_minutes=timeout)
    for index, arm in enumerate(arms):  # what the Job itself would be refused for
        problems = validate(spec.job_request(arm, 1, 1))
        if problems:
            where, message = next(iter(problems.items()))
            key = {"name": "name", "image": "image", "command": "command", "gpus": f"arms[{index}].gpus",
                   "mig_profile": f"arms[{index}].mig_profile"}.get(where, where)
            raise SpecError(key, message)
    return spec


def _text(data: Mapping[str, Any], key: str, *, default: str = "", required: bool = False) -> str:
    value = data.get(key, default)
    if not isinstance(value, str):
        raise SpecError(key, "must be a string")
    if required and not value.strip():
        raise SpecError(key, "required")
    return value.strip()


def _whole(data: Mapping[str, Any], key: str, default: int, *, low: int, high: int) -> int:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(key, "must be a whole number")
    if not low <= value <= high:
        raise SpecError(key, f"must be from {low} to {high}, got {value}")
    return value


def _number(data: Mapping[str, Any], key: str, default: float | None) -> float | None:
    value = data.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpecError(key, "must be a number")
    return float(value)


def _command(value: Any) -> tuple[str, ...] | str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(w, str) for w in value):
        return tuple(value)
    raise SpecError("command", 'a list of strings (["python", "bench.py"]) or a shell line')


def _env(value: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict) or not all(isinstance(v, str | int | float) for v in value.values()):
        raise SpecError("env", 'a table of names and values: env = { BATCH = "256" }')
    return tuple((str(k), str(v)) for k, v in value.items())


def _metric(value: Any) -> Metric:
    if value is None:
        return Metric()
    if not isinstance(value, dict):
        raise SpecError("metric", 'a table: metric = { regex = "samples/s: ([0-9.]+)", unit = "samples/s" }')
    extra = sorted(set(value) - {"regex", "unit", "better"})
    if extra:
        raise SpecError(f"metric.{extra[0]}", "unknown key: regex, unit or better")
    regex = value.get("regex", "")
    if not isinstance(regex, str):
        raise SpecError("metric.regex", "must be a string")
    better = value.get("better", "higher" if regex else "lower")
    if better not in BETTER:
        raise SpecError("metric.better", "higher or lower")
    if not regex:
        return Metric(better=better)
    try:
        groups = re.compile(regex).groups
    except re.error as exc:
        raise SpecError("metric.regex", f"not a regular expression: {exc}") from None
    if groups != 1:
        raise SpecError("metric.regex", f"needs exactly one capture group for the number, has {groups}")
    unit = value.get("unit", "")
    if not isinstance(unit, str) or not unit.strip():
        raise SpecError("metric.unit", "required with a regex (samples/s, ms)")
    return Metric(regex=regex, unit=unit.strip(), better=better)


def _work(value: Any) -> Work:
    if value is None:
        return Work()
    if not isinstance(value, dict):
        raise SpecError("work", 'a table: work = { amount = 1281167, unit = "samples" }')
    amount = value.get("amount", 1)
    if isinstance(amount, bool) or not isinstance(amount, int | float) or amount <= 0:
        raise SpecError("work.amount", "must be a number more than 0")
    unit = value.get("unit", "run")
    if not isinstance(unit, str) or not unit.strip():
        raise SpecError("work.unit", "must be a word (samples, inferences)")
    per = value.get("per", "")
    if not isinstance(per, str):
        raise SpecError("work.per", "must be a word (epoch, million inferences)")
    extra = sorted(set(value) - {"amount", "unit", "per"})
    if extra:
        raise SpecError(f"work.{extra[0]}", "unknown key: amount, unit or per")
    return Work(float(amount), unit.strip(), per.strip())


def _arms(value: Any, known: Callable[[str], bool]) -> tuple[Arm, ...]:
    if not isinstance(value, list) or not value:
        raise SpecError("arms", "at least one [[arms]] table with an instance_type")
    arms: list[Arm] = []
    for index, item in enumerate(value):
        where = f"arms[{index}]"
        if not isinstance(item, dict):
            raise SpecError(where, "must be a table")
        extra = sorted(set(item) - ARM_KEYS)
        if extra:
            raise SpecError(f"{where}.{extra[0]}", f"unknown key: {', '.join(sorted(ARM_KEYS))}")
        itype = item.get("instance_type")
        if not isinstance(itype, str) or not itype:
            raise SpecError(f"{where}.instance_type", "required")
        if not known(itype):
            raise SpecError(f"{where}.instance_type", f"unknown instance type {itype!r}")
        market = item.get("market", "on-demand")
        if market not in MARKETS:
            raise SpecError(f"{where}.market", f"on-demand or spot, got {market!r}")
        gpus = item.get("gpus", 0)
        if isinstance(gpus, bool) or not isinstance(gpus, int) or not 0 <= gpus <= MAX_GPUS:
            raise SpecError(f"{where}.gpus", f"a whole number from 1 to {MAX_GPUS}")
        mig = item.get("mig_profile", "")
        if not isinstance(mig, str) or (mig and mig not in MIG_PROFILES):
            raise SpecError(f"{where}.mig_profile", "not a MIG profile: e.g. 1g.10gb, 3g.40gb")
        label = item.get("name", "")
        if not isinstance(label, str) or (label and (not _NAME.match(label) or len(label) > 12)):
            raise SpecError(f"{where}.name", "lowercase a-z, 0-9 and '-', at most 12 characters")
        arm = Arm(itype, market, gpus, mig, label)
        if any(a.key == arm.key for a in arms):
            raise SpecError(where, f"the same arm as another one ({arm.title}): give it a name")
        arms.append(arm)
    return tuple(arms)
