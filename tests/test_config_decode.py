"""Config tables and experiment files decoded into Structs: unknown keys, ranges, NaN and infinity
are refused in one line naming the file, the table and the key."""

from __future__ import annotations

import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import msgspec
import pytest

from gpuconsole.backends import tls
from gpuconsole.core.access.audit_sink import settings_from_config
from gpuconsole.core.access.aws_roles import AwsRolesTable, load_aws_roles
from gpuconsole.core.config import ConfigError
from gpuconsole.core.config_decode import TableError, decode_table, fields_of
from gpuconsole.core.fleet.prometheus_config import from_config
from gpuconsole.core.fleet.tls_config import TlsTable, read_min_version
from gpuconsole.core.money.budget_config import load_config
from gpuconsole.core.ops.autopilot.loading import config_rules
from gpuconsole.core.ops.autopilot.rules import RuleError
from gpuconsole.core.ops.experiments.spec import SpecError, parse_text
from gpuconsole.model import Role


class Inner(msgspec.Struct, forbid_unknown_fields=True):
    count: Annotated[int, msgspec.Meta(ge=1, le=5)] = 1
    tags: dict[str, str] = {}


class Outer(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    name: Annotated[str, msgspec.Meta(min_length=1, extra={"missing": "every table needs a name"})]
    amount: Annotated[float, msgspec.Meta(gt=0, description="a number of dollars more than 0")] = 1.0
    items: list[Inner] = []
    words: list[str] | str = []


@pytest.mark.parametrize(("data", "key", "problem"), [
    ({"name": "a", "colour": 1}, "colour", "unknown key (known: name, amount, items, words)"),
    ({"name": "a", "items": [{}, {"size": 1}]}, "items[1].size", "unknown key (known: count, tags)"),
    ({}, "name", "every table needs a name"),
    ({"name": "a", "amount": -1}, "amount", "expected a number of dollars more than 0, got -1"),
    ({"name": "a", "amount": True}, "amount", "expected a number of dollars more than 0, got True"),
    ({"name": "a", "items": [{"count": 9}]}, "items[0].count", "expected a whole number from 1 to 5, got 9"),
    ({"name": "a", "items": [3]}, "items[0]", "expected a table, got 3"),
    ({"name": "a", "items": [{"tags": {"k": 1}}]}, "items[0].tags", "expected a table of strings, got {'k': 1}"),
    ({"name": "a", "words": ["x", 2]}, "words", "expected a list of strings or a string, got ['x', 2]"),
    ({"name": "a", "amount": float("nan")}, "amount", "expected a finite number, got nan"),
    ({"name": "a", "amount": float("inf")}, "amount", "expected a finite number, got inf"),
    ({"name": "a", "items": [{"tags": {"k": float("-inf")}}]}, "items[0].tags", "expected a finite number, got -inf"),
    (7, "", "expected a table, got 7"),
])
def test_msgspec_errors_become_a_key_and_a_short_problem(data: Any, key: str, problem: str) -> None:
    with pytest.raises(TableError) as caught:
        decode_table(data, Outer)
    assert (caught.value.key, caught.value.problem) == (key, problem)
    assert caught.value.unknown == problem.startswith("unknown key")


def test_a_good_table_decodes_and_its_keys_are_declared_once() -> None:
    assert decode_table({"name": "a", "amount": 2, "items": [{"count": 2}]}, Outer) == Outer(
        name="a", amount=2.0, items=[Inner(2)])
    assert fields_of(Outer) == ("name", "amount", "items", "words")
    assert typing.get_args(typing.get_type_hints(TlsTable)["min_version"]) == tuple(tls.VERSIONS)
    assert fields_of(AwsRolesTable) == (*(r.value for r in Role), "automation")  # the service identity beside the roles


BUDGET = '[[budgets]]\nname = "a"\namount = 1\n'
RULE = '[[rules]]\nname = "idle"\nkind = "idle-stop"\n'
PROMETHEUS = '[prometheus]\nurl = "https://prom.example.com"\n'


def _budgets(path: Path) -> object:
    return load_config(path)


def _rules(path: Path) -> object:
    return config_rules(path)


def _aws(path: Path) -> object:
    return load_aws_roles(path, env={})


def _prometheus(path: Path) -> object:
    return from_config(path, env={})


def _tls(path: Path) -> object:
    return read_min_version(path, env={})


def _audit(path: Path) -> object:
    return settings_from_config(path, env={})


@pytest.mark.parametrize(("load", "text", "words"), [
    # an unknown key
    (_budgets, BUDGET + "colour = 1\n", "[[budgets]] #1 key colour: unknown key (known: name, amount, "),
    (_rules, RULE + "colour = 1\n", "rule 'idle' key colour: unknown key for a idle-stop rule (known: name, kind, "),
    (_rules, RULE.replace("idle-stop", "scale") + 'scale_out = "gpu_util > 1"\n'
     'launch = { type = "g5.xlarge", region = "us-east-1", ami = "ami-0abc1234", size = 1 }\n',
     "rule 'idle' key launch.size: unknown key (known: type, region, ami, market, zone, tags)"),
    (_aws, '[aws]\nregion = "us-east-1"\n', "[aws] region: unknown key (known: roles, mfa_serial, session_seconds)"),
    (_aws, '[aws.roles]\nowner = "arn:aws:iam::123456789012:role/x"\n', "[aws.roles] owner: not a gpuconsole role"),
    (_prometheus, PROMETHEUS + 'token = "x"\n', "[prometheus] key token: unknown key (known: url, "),
    (_tls, '[tls]\nminimum = "1.2"\n', "key minimum of [tls]: unknown key (known: min_version)"),
    (_audit, '[audit]\nbucket = "x"\n', "[audit] key bucket: unknown key (known: cloudwatch_log_group, "),
    # a value out of range
    (_budgets, BUDGET.replace("amount = 1", "amount = 0"),
     "[[budgets]] #1 (a) key amount: expected a number of dollars"),
    (_rules, RULE + "threshold = 101\n",
     "rule 'idle' key threshold: expected a utilization percent from 0 to 100, got 101"),
    (_rules, RULE.replace("idle-stop", "spot-recover") + "fallback_after = -2\n",
     "key fallback_after: expected a whole number of 0 or more, got -2"),
    (_aws, '[aws]\nsession_seconds = 60\n', "[aws] session_seconds: a whole number from 900 to 43200, not 60"),
    (_audit, '[audit]\nregion = " "\n', "[audit] key region: expected a non-empty string, got ' '"),
    # NaN and infinities
    (_budgets, BUDGET.replace("amount = 1", "amount = inf"), "key amount: expected a finite number, got inf"),
    (_budgets, BUDGET.replace("amount = 1", "amount = nan"), "key amount: expected a finite number, got nan"),
    (_rules, RULE + "threshold = nan\n", "rule 'idle' key threshold: expected a finite number, got nan"),
    (_prometheus, PROMETHEUS + "timeout = inf\n", "[prometheus] key timeout: expected a finite number, got inf"),
    (_prometheus, PROMETHEUS + "timeout = -nan\n", "[prometheus] key timeout: expected a finite number, got nan"),
    (_aws, '[aws]\nsession_seconds = inf\n', "[aws] session_seconds: a whole number from 900 to 43200, not inf"),
])
def test_every_table_refuses_in_one_line_naming_file_table_and_key(
        tmp_path: Path, load: Callable[[Path], object], text: str, words: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises((ConfigError, RuleError)) as caught:
        load(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and words in message and "\n" not in message


EXPERIMENT = 'name = "x"\nimage = "i"\n\n[[arms]]\ninstance_type = "g5.xlarge"\n'


@pytest.mark.parametrize(("change", "key", "words"), [
    (("[[arms]]", "timeout = 5\n[[arms]]"), "timeout", "unknown key (known: name, image, arms, "),
    (('instance_type = "g5.xlarge"', 'instance_type = "g5.xlarge"\nspot = true'), "arms[0].spot", "unknown key"),
    (("[[arms]]", "work = { amount = 1, per = 'epoch', units = 'x' }\n[[arms]]"), "work.units", "unknown key"),
    (("[[arms]]", "metric = { regex = '(x)', unit = 'x', higher = true }\n[[arms]]"), "metric.higher", "unknown key"),
    (("[[arms]]", "repeats = 101\n[[arms]]"), "repeats", "expected a whole number from 1 to 100, got 101"),
    (('instance_type = "g5.xlarge"', 'instance_type = "g5.xlarge"\ngpus = 65'), "arms[0].gpus", "from 0 to 64"),
    (("[[arms]]", "timeout_minutes = -1\n[[arms]]"), "timeout_minutes", "a number of minutes more than 0, at most 43,200 (30 days), got -1"),
    (("[[arms]]", "max_cost = nan\n[[arms]]"), "max_cost", "expected a finite number, got nan"),
    (("[[arms]]", "timeout_minutes = inf\n[[arms]]"), "timeout_minutes", "expected a finite number, got inf"),
    (("[[arms]]", "work = { amount = inf }\n[[arms]]"), "work.amount", "expected a finite number, got inf"),
    (("[[arms]]", "env = { SCALE = nan }\n[[arms]]"), "env", "expected a finite number, got nan"),
])
def test_an_experiment_file_refuses_unknown_keys_ranges_and_nan(change: tuple[str, str], key: str, words: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_text(EXPERIMENT.replace(*change, 1))
    assert caught.value.key == key
    message = str(caught.value)
    assert message.startswith(f"{key}: ") and words in message and "\n" not in message
