"""The command line as a user meets it: ``gpuconsole`` / ``python -m gpuconsole``.

Most tests start the CLI in a child process (the environment set up in conftest is inherited),
so they see exactly what a shell sees: exit status, stdout and stderr. Bad input is also checked
in-process through :func:`gpuconsole.cli.main.main`, which is cheap.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gpuconsole import __version__
from gpuconsole.cli.main import main
from gpuconsole.model import (
    Alert,
    Budget,
    BudgetPeriod,
    CronJob,
    Gpu,
    Instance,
    InstanceState,
    Job,
    JobState,
    Market,
    MigMode,
    Node,
    Severity,
    SourceKind,
    SourceState,
    SourceStatus,
    from_jsonable,
    to_jsonable,
)

slow = pytest.mark.slow

GPU_UUID = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
INSTANCE_ID = re.compile(r"^i-[0-9a-f]{17}$")  # EC2's
ALIBABA_ID = re.compile(r"^i-[0-9a-z]{20}$")  # ECS's
AZURE_ID = re.compile(r"^/subscriptions/[0-9a-f-]{36}/resourceGroups/[\w.()-]+/providers/Microsoft\.Compute/"
                      r"virtualMachines/[\w.-]+$")  # a VM's ARM resource id
THEMES = ("contrast", "dark", "light")
SNAPSHOT_SCHEMA_ID = "gpuconsole.snapshot/1"


# --------------------------------------------------------------------------- running the CLI


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``python -m gpuconsole ARGS`` with the test's environment, stdin closed."""
    return subprocess.run(
        [sys.executable, "-m", "gpuconsole", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
    )


def assert_usage_error(code: int, out: str, err: str, *needles: str) -> str:
    """Exit status 2, nothing on stdout, exactly one ``gpuconsole: error:`` line on stderr."""
    assert "Traceback" not in out + err, err
    assert code == 2, (code, out, err)
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert err.endswith("\n")
    line = lines[0]
    assert line.startswith("gpuconsole: error: "), line
    for needle in needles:
        assert needle in line, (needle, line)
    return line


def snapshot_json(*args: str, cwd: Path | None = None) -> dict[str, Any]:
    """Run a snapshot command that must print a JSON document, and return it."""
    result = run_cli(*args, cwd=cwd)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    return strict_json(result.stdout)


def strict_json(text: str) -> dict[str, Any]:
    """Parse JSON as other languages would: NaN and Infinity are not JSON."""

    def reject(constant: str) -> Any:
        raise ValueError(f"{constant} is not valid JSON")

    doc = json.loads(text, parse_constant=reject)
    assert isinstance(doc, dict)
    return doc


@pytest.fixture
def no_tui(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process runs must never open the full-screen console."""
    from gpuconsole.ui.app import GpuConsoleApp

    def refuse(self: Any, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("the full-screen console was started")

    monkeypatch.setattr(GpuConsoleApp, "run", refuse)


def default_db(tmp_path: Path) -> Path:
    """Where conftest points GPUCONSOLE_DB."""
    return tmp_path / "cache" / "gpuconsole.db"


def tree_state(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with a digest of its bytes."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "<dir>"
        for p in sorted(folder.rglob("*"))
    }


# --------------------------------------------------------------------------- a small JSON schema


class ListOf:
    """Schema of a JSON array whose items all follow ``item``."""

    def __init__(self, item: Any) -> None:
        self.item = item


NoneType = type(None)
STR = (str,)
OPT_STR = (str, NoneType)
INT = (int,)
NUM = (int, float)
OPT_NUM = (int, float, NoneType)
BOOL = (bool,)
PAIR = (list,)

MIG_SLICE = {
    "uuid": STR, "gpu_uuid": STR, "gi_id": INT, "ci_id": INT, "profile": STR,
    "memory_total_mib": INT, "memory_used_mib": INT, "utilization": OPT_NUM, "pod_uid": OPT_STR,
}
GPU_PROCESS = {
    "pid": INT, "gpu_uuid": STR, "name": STR, "memory_used_mib": INT,
    "mig_uuid": OPT_STR, "user": OPT_STR, "pod_uid": OPT_STR,
}
GPU = {
    "uuid": STR, "node": STR, "index": INT, "name": STR, "utilization": NUM,
    "memory_used_mib": INT, "memory_total_mib": INT, "temperature_c": INT,
    "power_w": NUM, "power_limit_w": NUM, "mig_mode": STR,
    "mig_slices": ListOf(MIG_SLICE), "processes": ListOf(GPU_PROCESS),
}
JOB = {
    "uid": STR, "name": STR, "namespace": STR, "state": STR, "created": NUM, "gpus": INT,
    "mig_profile": OPT_STR, "node": OPT_STR, "started": OPT_NUM, "finished": OPT_NUM,
    "pending_reason": OPT_STR, "cronjob": OPT_STR, "image": STR, "owner": OPT_STR, "pod_uid": OPT_STR,
}
CRONJOB = {
    "uid": STR, "name": STR, "namespace": STR, "schedule": STR, "created": NUM, "suspended": BOOL,
    "last_schedule": OPT_NUM, "next_schedule": OPT_NUM, "gpus": INT, "mig_profile": OPT_STR, "active": INT,
}
NODE = {
    "name": STR, "gpu_product": STR, "gpu_capacity": INT, "gpu_allocatable": INT, "gpu_allocated": INT,
    "instance_id": OPT_STR, "mig_strategy": OPT_STR, "mig_capacity": ListOf(PAIR), "ready": BOOL,
}
INSTANCE = {
    "instance_id": STR, "instance_type": STR, "region": STR, "availability_zone": STR, "market": STR,
    "state": STR, "launch_time": NUM, "price_per_hour": NUM, "gpus": INT, "gpu_model": STR,
    "accrued_cost": NUM, "name": STR, "node": OPT_STR, "tags": ListOf(PAIR),
}
THRESHOLD = {"percent": NUM, "basis": STR}
BUDGET = {
    "name": STR, "amount": NUM, "period": STR, "scope": STR, "thresholds": ListOf(THRESHOLD),
    "spent": NUM, "forecast": NUM, "burn_per_hour": NUM, "percent": NUM, "crossed": ListOf(THRESHOLD),
}
SOURCE = {
    "name": STR, "kind": STR, "state": STR, "updated_at": OPT_NUM, "error": OPT_STR, "hint": OPT_STR,
    "latency_s": OPT_NUM, "status": STR,
}
ALERT = {"severity": STR, "source": STR, "message": STR, "at": NUM}
SNAPSHOT = {
    "schema": STR,
    "taken_at": NUM,
    "demo": BOOL,
    "gpus": ListOf(GPU),
    "jobs": ListOf(JOB),
    "cronjobs": ListOf(CRONJOB),
    "nodes": ListOf(NODE),
    "instances": ListOf(INSTANCE),
    "budgets": ListOf(BUDGET),
    "sources": ListOf(SOURCE),
    "alerts": ListOf(ALERT),
    "spend": {"today": NUM, "month": NUM, "burn_per_hour": NUM},
}
ENUMS = {
    ("gpus", "mig_mode"): MigMode,
    ("jobs", "state"): JobState,
    ("instances", "market"): Market,
    ("instances", "state"): InstanceState,
    ("budgets", "period"): BudgetPeriod,
    ("sources", "kind"): SourceKind,
    ("sources", "state"): SourceState,
    ("alerts", "severity"): Severity,
}


def schema_problems(value: Any, spec: Any, where: str = "$") -> list[str]:
    """What in ``value`` breaks ``spec`` (required keys and JSON types); empty when it fits.

    A spec is a dict (an object with these required keys), a :class:`ListOf`, or a tuple of
    Python types. ``true``/``false`` never pass for a number.
    """
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            return [f"{where}: expected an object, got {value!r:.60}"]
        problems: list[str] = []
        for key, sub in spec.items():
            if key not in value:
                problems.append(f"{where}: missing key {key!r}")
            else:
                problems.extend(schema_problems(value[key], sub, f"{where}.{key}"))
        return problems
    if isinstance(spec, ListOf):
        if not isinstance(value, list):
            return [f"{where}: expected an array, got {value!r:.60}"]
        return [p for i, item in enumerate(value) for p in schema_problems(item, spec.item, f"{where}[{i}]")]
    if isinstance(value, bool) and bool not in spec:
        return [f"{where}: expected {'/'.join(t.__name__ for t in spec)}, got {value!r}"]
    if not isinstance(value, spec):
        return [f"{where}: expected {'/'.join(t.__name__ for t in spec)}, got {value!r:.60}"]
    return []


def enum_problems(doc: dict[str, Any]) -> list[str]:
    problems = []
    for (section, key), enum_type in ENUMS.items():
        allowed = {member.value for member in enum_type}
        for i, item in enumerate(doc[section]):
            if item[key] not in allowed:
                problems.append(f"$.{section}[{i}].{key}: {item[key]!r} is none of {sorted(allowed)}")
    return problems


def test_the_schema_check_catches_what_it_should() -> None:
    good = {"a": 1, "b": [{"c": "x"}], "d": None}
    spec = {"a": INT, "b": ListOf({"c": STR}), "d": OPT_STR}
    assert schema_problems(good, spec) == []
    assert schema_problems({**good, "a": True}, spec) == ["$.a: expected int, got True"]
    assert schema_problems({**good, "a": 1.5}, spec) == ["$.a: expected int, got 1.5"]
    assert schema_problems({"a": 1, "d": None}, spec) == ["$: missing key 'b'"]
    assert schema_problems({**good, "b": [{"c": 3}]}, spec) == ["$.b[0].c: expected str, got 3"]
    assert schema_problems({**good, "b": {}}, spec) == ["$.b: expected an array, got {}"]


# --------------------------------------------------------------------------- help and version


@slow
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_documents_the_options_the_subcommand_and_the_keys(flag: str) -> None:
    result = run_cli(flag)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    text = result.stdout
    assert text.startswith("usage: gpuconsole")
    for option in ("--demo", "--theme", "--seed", "--demo-nodes", "--demo-faults", "--db", "--no-db", "--interval", "--version"):
        assert option in text, option
    assert "snapshot" in text
    for theme in THEMES:
        assert theme in text
    # the key bindings of the console
    assert "keys in the console" in text
    for key, words in [("1-9", "switch panes"), ("/", "filter"), ("ctrl+p", "command palette"), ("?", "key bindings"), ("q", "quit")]:
        assert any(key in line and words in line for line in text.splitlines()), (key, words)
    assert "GPUCONSOLE_DB" in text and "NO_COLOR" in text


@slow
def test_snapshot_help_documents_its_options() -> None:
    result = run_cli("snapshot", "--help")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.startswith("usage: gpuconsole snapshot")
    for option in ("--json", "--wait", "--demo", "--seed", "--db", "--no-db", "--demo-faults"):
        assert option in result.stdout, option


@slow
def test_version() -> None:
    result = run_cli("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"gpuconsole {__version__}\n"
    assert result.stderr == ""


def test_help_in_process_exits_zero(capsys: pytest.CaptureFixture[str], no_tui: None) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out, err = capsys.readouterr()
    assert "--demo" in out and "snapshot" in out and err == ""


@slow
def test_the_installed_console_script_runs() -> None:
    script = Path(sys.executable).with_name("gpuconsole")
    if not script.exists():
        pytest.skip(f"no gpuconsole script beside {sys.executable} (package not installed in this environment)")
    result = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"gpuconsole {__version__}\n"


# --------------------------------------------------------------------------- bad input

# (argv, words the one error line must contain)
BAD_INPUT = [
    pytest.param(["--bogus"], ["--bogus"], id="unknown-flag"),
    pytest.param(["frobnicate"], ["frobnicate", "snapshot"], id="unknown-subcommand"),
    pytest.param(["snapshot", "--bogus"], ["--bogus"], id="unknown-snapshot-flag"),
    pytest.param(["snapshot", "--json", "extra"], ["extra"], id="stray-argument"),
    pytest.param(["--seed", "-1"], ["--seed", "-1"], id="negative-seed"),
    pytest.param(["--seed=-1"], ["--seed", "-1"], id="negative-seed-equals"),
    pytest.param(["snapshot", "--demo", "--seed", "-1"], ["--seed"], id="negative-seed-after-subcommand"),
    pytest.param(["--seed", "seven"], ["--seed", "seven"], id="non-numeric-seed"),
    pytest.param(["--seed", "1.5"], ["--seed", "1.5"], id="fractional-seed"),
    pytest.param(["--seed"], ["--seed"], id="seed-without-value"),
    pytest.param(["--demo-nodes", "0"], ["--demo-nodes", "0"], id="zero-nodes"),
    pytest.param(["--demo-nodes", "-3"], ["--demo-nodes"], id="negative-nodes"),
    pytest.param(["--theme", "neon"], ["neon", *THEMES], id="unknown-theme"),
    pytest.param(["--demo-faults", "gpus:explode"], ["--demo-faults", "explode"], id="unknown-fault-mode"),
    pytest.param(["--demo-faults", "disk:error"], ["--demo-faults", "disk"], id="unknown-fault-source"),
    pytest.param(["--demo-faults", "gpus"], ["--demo-faults", "gpus"], id="fault-without-mode"),
    pytest.param(["--demo-faults", "gpus:slow=soon"], ["--demo-faults", "soon"], id="fault-bad-seconds"),
    pytest.param(["snapshot", "--demo", "--demo-faults", "cloud:explode"], ["--demo-faults", "explode"], id="bad-fault-after-subcommand"),
    pytest.param(["--gpus", "dcgm"], ["--gpus", "dcgm"], id="unknown-gpu-source"),
    pytest.param(["--interval", "0"], ["--interval"], id="zero-interval"),
    pytest.param(["--interval", "-1"], ["--interval"], id="negative-interval"),
    pytest.param(["--interval", "nan"], ["--interval"], id="nan-interval"),
    pytest.param(["--interval", "soon"], ["--interval", "soon"], id="non-numeric-interval"),
    pytest.param(["snapshot", "--wait", "0"], ["--wait"], id="zero-wait"),
    pytest.param(["--region", "useast1"], ["--region", "useast1"], id="bad-region"),
    pytest.param(["snapshot", "--region", "us-east-1", "--region", "US-WEST-2"], ["--region", "US-WEST-2"], id="bad-second-region"),
    pytest.param(["--cloud", "gcp"], ["--cloud", "gcp"], id="unknown-cloud"),
]


@slow
@pytest.mark.parametrize(("argv", "needles"), BAD_INPUT)
def test_bad_input_is_one_line_and_exit_status_2(argv: list[str], needles: list[str], tmp_path: Path) -> None:
    result = run_cli(*argv, cwd=tmp_path)
    assert_usage_error(result.returncode, result.stdout, result.stderr, *needles)
    assert "(see gpuconsole --help)" in result.stderr
    # a rejected command line creates no cache database
    assert not default_db(tmp_path).parent.exists()


@pytest.mark.parametrize(("argv", "needles"), BAD_INPUT)
def test_bad_input_in_process(
    argv: list[str], needles: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], no_tui: None
) -> None:
    code = main(argv)
    out, err = capsys.readouterr()
    assert_usage_error(code, out, err, *needles)
    assert not default_db(tmp_path).parent.exists()


def test_unknown_theme_lists_every_valid_theme(capsys: pytest.CaptureFixture[str], no_tui: None) -> None:
    assert main(["--theme", "neon"]) == 2
    line = capsys.readouterr().err
    listed = re.search(r"choose one of ([a-z, ]+)", line)
    assert listed is not None, line
    assert sorted(name.strip() for name in listed.group(1).split(",")) == sorted(THEMES)


def _db_under_a_file(tmp_path: Path) -> tuple[Path, str]:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory\n")
    return blocker / "x.db", "not a directory"


def _db_is_a_directory(tmp_path: Path) -> tuple[Path, str]:
    folder = tmp_path / "folder.db"
    folder.mkdir()
    return folder, "directory"


UNWRITABLE_DB = [
    pytest.param(_db_under_a_file, id="under-a-regular-file"),
    pytest.param(_db_is_a_directory, id="a-directory"),
]


@slow
@pytest.mark.parametrize("make_path", UNWRITABLE_DB)
def test_an_unwritable_db_path_is_a_usage_error(make_path: Any, tmp_path: Path) -> None:
    path, reason = make_path(tmp_path)
    before = tree_state(tmp_path)
    result = run_cli("--demo", "--db", str(path), "snapshot", "--json", "--wait", "1", cwd=tmp_path)
    assert_usage_error(result.returncode, result.stdout, result.stderr, str(path), reason)
    assert tree_state(tmp_path) == before


@pytest.mark.parametrize("make_path", UNWRITABLE_DB)
def test_an_unwritable_db_path_in_process(
    make_path: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], no_tui: None
) -> None:
    path, reason = make_path(tmp_path)
    before = tree_state(tmp_path)
    code = main(["--demo", "--db", str(path)])
    out, err = capsys.readouterr()
    assert_usage_error(code, out, err, str(path), reason)
    assert tree_state(tmp_path) == before


@slow
def test_a_db_that_sqlite_cannot_open_is_a_usage_error(tmp_path: Path) -> None:
    """The path passes the writability check, but SQLite cannot open the file (its WAL is a folder)."""
    db = tmp_path / "blocked.db"
    (tmp_path / "blocked.db-wal").mkdir()
    result = run_cli("snapshot", "--demo", "--json", "--wait", "1", "--db", str(db), cwd=tmp_path)
    assert_usage_error(result.returncode, result.stdout, result.stderr, str(db))


@slow
@pytest.mark.parametrize("interval", ["inf", "1e10"])
def test_an_interval_too_long_to_wait_for_is_rejected(interval: str, tmp_path: Path) -> None:
    """A poll interval no thread can sleep for must be refused up front, not crash the pollers."""
    result = run_cli("--demo", "--interval", interval, "snapshot", "--json", "--no-db", "--wait", "1", cwd=tmp_path)
    assert_usage_error(result.returncode, result.stdout, result.stderr, "--interval")


@slow
def test_bad_flags_leave_an_existing_database_untouched(tmp_path: Path) -> None:
    db = tmp_path / "keep" / "cache.db"
    doc = snapshot_json("snapshot", "--demo", "--json", "--wait", "1", "--db", str(db), cwd=tmp_path)
    assert doc["demo"] is True
    assert db.is_file()
    before = tree_state(db.parent)
    bad = [
        ["--seed", "-1"],
        ["--theme", "neon"],
        ["--demo-faults", "disk:error"],
        ["--gpus", "dcgm"],
        ["--interval", "0"],
        ["--bogus"],
        ["snapshot", "--wait", "0"],
        ["snapshot", "--json", "--demo-nodes", "0"],
    ]
    for argv in bad:
        result = run_cli("--demo", "--db", str(db), *argv, cwd=tmp_path)
        assert_usage_error(result.returncode, result.stdout, result.stderr)
        assert tree_state(db.parent) == before, argv


# --------------------------------------------------------------------------- snapshot --json --demo


def check_demo_document(doc: dict[str, Any]) -> None:
    """Everything a script may rely on in a healthy demo snapshot."""
    assert schema_problems(doc, SNAPSHOT) == []
    assert enum_problems(doc) == []
    assert doc["schema"] == SNAPSHOT_SCHEMA_ID
    assert doc["demo"] is True

    # sources: all three faces live, served by the simulator
    assert sorted(s["kind"] for s in doc["sources"]) == sorted(k.value for k in SourceKind)
    for source in doc["sources"]:
        assert source["name"] == "sim", source
        assert source["state"] == SourceState.LIVE.value, source
        assert source["status"] == "live", source

    # GPUs
    gpus = doc["gpus"]
    assert gpus
    assert len({g["uuid"] for g in gpus}) == len(gpus)
    for g in gpus:
        assert GPU_UUID.match(g["uuid"]), g["uuid"]
        assert 0 <= g["utilization"] <= 100, g
        assert 0 <= g["memory_used_mib"] <= g["memory_total_mib"], g
        assert g["index"] >= 0
        for s in g["mig_slices"]:
            assert s["uuid"].startswith("MIG-"), s
            assert s["gpu_uuid"] == g["uuid"]
            assert 0 <= s["memory_used_mib"] <= s["memory_total_mib"], s
            assert s["utilization"] is None or 0 <= s["utilization"] <= 100, s
        assert sum(s["memory_total_mib"] for s in g["mig_slices"]) <= g["memory_total_mib"]
        for p in g["processes"]:
            assert p["gpu_uuid"] == g["uuid"]
    mig = [g for g in gpus if g["mig_mode"] == MigMode.ENABLED.value]
    assert mig, "the demo has a GPU split into MIG slices"
    assert all(g["mig_slices"] for g in mig)
    assert all(not g["mig_slices"] for g in gpus if g["mig_mode"] != MigMode.ENABLED.value)

    # jobs
    jobs = doc["jobs"]
    assert jobs
    pending = [j for j in jobs if j["state"] == JobState.PENDING.value]
    assert any(j["pending_reason"] for j in pending), "a pending job says why it is pending"
    assert any(j["state"] == JobState.RUNNING.value for j in jobs)

    # instances
    instances = doc["instances"]
    assert instances
    for i in instances:
        form = {"aws": INSTANCE_ID, "alibaba": ALIBABA_ID, "azure": AZURE_ID}[i["cloud"]]
        assert form.match(i["instance_id"]), i["instance_id"]
        assert i["market"] in ("spot", "on-demand"), i
        assert i["price_per_hour"] >= 0 and i["accrued_cost"] >= 0
        for tag in i["tags"]:
            assert len(tag) == 2 and all(isinstance(part, str) for part in tag), tag
    assert {i["market"] for i in instances} == {"spot", "on-demand"}

    # the pieces fit together
    node_names = {n["name"] for n in doc["nodes"]}
    # the Alibaba Cloud region's nodes belong to a cluster of their own, not the one watched
    elsewhere = {i["node"] for i in instances if i["cloud"] != "aws"}
    assert elsewhere and {g["node"] for g in gpus} - elsewhere <= node_names
    assert {j["node"] for j in jobs if j["state"] == JobState.RUNNING.value} <= node_names
    instance_ids = {i["instance_id"] for i in instances}
    assert {n["instance_id"] for n in doc["nodes"] if n["instance_id"]} <= instance_ids

    # budgets and spend
    assert doc["budgets"]
    for b in doc["budgets"]:
        for key in ("spent", "forecast", "percent", "amount", "burn_per_hour"):
            assert isinstance(b[key], (int, float)) and not isinstance(b[key], bool), (key, b)
        assert b["spent"] >= 0 and b["amount"] > 0
        assert b["percent"] == pytest.approx(100 * b["spent"] / b["amount"])
    assert doc["spend"]["month"] >= doc["spend"]["today"] >= 0
    assert doc["spend"]["burn_per_hour"] > 0


def check_decodes_into_the_model(doc: dict[str, Any]) -> None:
    """The sections decode back into the model types and encode to the same JSON."""
    for section, cls in [("gpus", Gpu), ("jobs", Job), ("instances", Instance), ("nodes", Node), ("cronjobs", CronJob), ("alerts", Alert)]:
        values = from_jsonable(tuple[cls, ...], doc[section])
        assert all(isinstance(v, cls) for v in values)
        if cls is Instance:  # bills_now is derived (state, and whether a stopped one still bills)
            assert [v.bills_now for v in values] == [raw.pop("bills_now") for raw in doc[section]]
        assert to_jsonable(values) == doc[section], section
    budgets = from_jsonable(tuple[Budget, ...], doc["budgets"])
    assert [b.name for b in budgets] == [b["name"] for b in doc["budgets"]]
    sources = from_jsonable(tuple[SourceStatus, ...], doc["sources"])
    assert all(s.describe(doc["taken_at"]) == raw["status"] for s, raw in zip(sources, doc["sources"], strict=True))


@slow
@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["snapshot", "--demo", "--json", "--no-db"], id="flags-after-subcommand"),
        pytest.param(["--demo", "snapshot", "--json", "--no-db"], id="flags-before-subcommand"),
        pytest.param(["--demo", "--no-db", "snapshot", "--json", "--wait", "1"], id="all-before"),
    ],
)
def test_demo_snapshot_json(argv: list[str], tmp_path: Path) -> None:
    result = run_cli(*argv, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    doc = strict_json(result.stdout)
    check_demo_document(doc)
    check_decodes_into_the_model(doc)
    assert not default_db(tmp_path).exists(), "--no-db keeps nothing on disk"


@slow
def test_demo_snapshot_json_with_a_database(tmp_path: Path) -> None:
    db = tmp_path / "state" / "here.db"
    result = run_cli("snapshot", "--demo", "--json", "--db", str(db), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    doc = strict_json(result.stdout)
    check_demo_document(doc)
    check_decodes_into_the_model(doc)
    assert db.is_file()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    assert not default_db(tmp_path).exists(), "--db wins over GPUCONSOLE_DB"


@slow
def test_demo_snapshot_uses_gpuconsole_db_by_default(tmp_path: Path) -> None:
    doc = snapshot_json("snapshot", "--demo", "--json", "--wait", "1", cwd=tmp_path)
    assert doc["demo"] is True
    assert default_db(tmp_path).is_file()


def test_a_slow_cache_does_not_make_the_snapshot_miss_the_first_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``snapshot`` prints what every source answered, even when writing the cache takes a while.

    The cache disk is made slow (a network home directory, say): the snapshot must still show
    the sources' first answers, not the state from before they answered.
    """
    from gpuconsole.cli.main import make_console, parse_args
    from gpuconsole.cli.snapshot import run_snapshot
    from gpuconsole.core.fleet.store import Store

    def slow_disk(real: Any) -> Any:
        def write(self: Store, *args: Any, **kwargs: Any) -> Any:
            time.sleep(0.3)
            return real(self, *args, **kwargs)

        return write

    monkeypatch.setattr(Store, "record_gpus", slow_disk(Store.record_gpus))
    monkeypatch.setattr(Store, "save_reading", slow_disk(Store.save_reading))
    args = parse_args(["snapshot", "--demo", "--json", "--db", str(tmp_path / "slow.db")])
    out = io.StringIO()
    assert run_snapshot(make_console(args), as_json=True, wait=args.wait, out=out) == 0
    doc = strict_json(out.getvalue())
    assert [(s["kind"], s["state"]) for s in doc["sources"]] == [(k.value, "live") for k in SourceKind]
    assert doc["gpus"] and doc["jobs"] and doc["instances"]


@slow
def test_same_seed_same_world_other_seed_other_world(tmp_path: Path) -> None:
    """The sim starts at the wall clock, so compare what does not depend on time: the identities."""

    def identities(seed: int) -> tuple[frozenset[str], frozenset[str]]:
        doc = snapshot_json("snapshot", "--demo", "--json", "--no-db", "--seed", str(seed), cwd=tmp_path)
        gpus = frozenset(g["uuid"] for g in doc["gpus"])
        instances = frozenset(i["instance_id"] for i in doc["instances"])
        assert gpus and instances
        return gpus, instances

    first = identities(11)
    again = identities(11)
    other = identities(12)
    assert first == again
    assert first[0] != other[0]
    assert first[1] != other[1]


@slow
def test_demo_nodes_scales_the_fleet(tmp_path: Path) -> None:
    doc = snapshot_json("snapshot", "--demo", "--json", "--no-db", "--demo-nodes", "3", cwd=tmp_path)
    # The inference pool's nodes come beside the N nodes the jobs run on.
    # (and the demo's Alibaba Cloud region's, in a cluster of its own)
    pool = {i["node"] for i in doc["instances"] if dict(i["tags"]).get("Project") == "serving"}
    elsewhere = {i["node"] for i in doc["instances"] if i["cloud"] != "aws"}
    assert len(doc["instances"]) - len(pool) - len(elsewhere) == 3
    assert len(doc["nodes"]) - len(pool) == 3
    pool |= elsewhere
    assert 3 <= len([g for g in doc["gpus"] if g["node"] not in pool]) <= 3 * 8
    assert len({g["node"] for g in doc["gpus"]} - pool) == 3


# --------------------------------------------------------------------------- without --demo


@slow
def test_snapshot_without_demo_and_without_backends_shows_no_simulated_data(tmp_path: Path) -> None:
    result = run_cli("snapshot", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    doc = strict_json(result.stdout)
    assert schema_problems(doc, SNAPSHOT) == []
    assert enum_problems(doc) == []
    assert doc["demo"] is False
    assert sorted(s["kind"] for s in doc["sources"]) == sorted(k.value for k in SourceKind)
    for source in doc["sources"]:
        assert source["state"] == SourceState.UNCONFIGURED.value, source
        assert source["name"] != "sim", source
        assert isinstance(source["hint"], str) and source["hint"].strip(), source
        assert source["status"].startswith("not configured"), source
    assert doc["gpus"] == [] and doc["jobs"] == [] and doc["instances"] == []
    assert doc["cronjobs"] == [] and doc["nodes"] == [] and doc["budgets"] == []


@slow
def test_text_snapshot_without_backends_says_how_to_set_them_up(tmp_path: Path) -> None:
    result = run_cli("snapshot", "--no-db", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("sources: ")
    for kind in SourceKind:
        assert any(line.startswith(f"  {kind.value}: ") for line in lines), kind
    assert not any(line.startswith("NODE ") for line in lines)


@slow
def test_gpu_source_choices(tmp_path: Path) -> None:
    doc = snapshot_json("snapshot", "--json", "--no-db", "--gpus", "sim", cwd=tmp_path)
    states = {s["kind"]: (s["name"], s["state"]) for s in doc["sources"]}
    assert states["gpus"] == ("sim", "live")
    assert states["jobs"][1] == states["cloud"][1] == "unconfigured"
    assert doc["gpus"] and not doc["jobs"] and not doc["instances"]

    doc = snapshot_json("snapshot", "--demo", "--json", "--no-db", "--gpus", "off", cwd=tmp_path)
    states = {s["kind"]: (s["name"], s["state"]) for s in doc["sources"]}
    assert states["gpus"] == ("off", "unconfigured")
    assert states["jobs"] == states["cloud"] == ("sim", "live")
    assert not doc["gpus"] and doc["jobs"] and doc["instances"]


# --------------------------------------------------------------------------- snapshot as text


@slow
def test_demo_snapshot_text(tmp_path: Path) -> None:
    result = run_cli("snapshot", "--demo", "--no-db", "--wait", "1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    text = result.stdout
    assert "\x1b[" not in text, "the text snapshot has no colour codes"
    lines = text.splitlines()
    assert lines[0] == "sources: gpus=sim (live), jobs=sim (live), cloud=sim (live), services=sim (live)"
    # the GPU table
    assert any(re.fullmatch(r"NODE +IDX +MODEL +UTIL +MEMORY +TEMP +POWER +MIG", line) for line in lines), text
    assert any("└" in line for line in lines), "MIG slices are listed under their GPU"
    # a pending job with the scheduler's reason
    header = next(line for line in lines if line.startswith("STATE "))
    reason_at = header.index("REASON")
    pending = [line for line in lines if line.startswith("pending ")]
    assert any(line[reason_at:].strip() for line in pending), pending
    # spend
    assert any(re.fullmatch(r"spend: today \$[\d,.]+, this month \$[\d,.]+, burning \$[\d,.]+/h", line) for line in lines), text
    assert any(line.startswith("budget ") for line in lines)
    assert any(INSTANCE_ID.match(line.split(" ", 1)[0]) for line in lines)


# --------------------------------------------------------------------------- injected faults


@slow
@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["--demo", "--demo-faults", "gpus:error", "snapshot", "--json", "--no-db", "--wait", "1"], id="before"),
        pytest.param(["snapshot", "--demo", "--demo-faults", "gpus:error", "--json", "--no-db", "--wait", "1"], id="after"),
        pytest.param(["--demo-faults", "gpus:error", "snapshot", "--demo", "--json", "--no-db", "--wait", "1"], id="mixed"),
    ],
)
def test_a_failing_gpu_source_is_reported_and_the_rest_still_shows(argv: list[str], tmp_path: Path) -> None:
    result = run_cli(*argv, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    doc = strict_json(result.stdout)
    assert schema_problems(doc, SNAPSHOT) == []
    sources = {s["kind"]: s for s in doc["sources"]}
    assert sources["gpus"]["state"] == SourceState.ERROR.value
    assert sources["gpus"]["status"].startswith("error:"), sources["gpus"]
    assert sources["gpus"]["error"]
    assert sources["jobs"]["state"] == sources["cloud"]["state"] == SourceState.LIVE.value
    assert doc["gpus"] == []
    assert doc["jobs"] and doc["instances"] and doc["nodes"] and doc["budgets"]
    assert any(a["source"] == "sim" and "gpus source error" in a["message"] for a in doc["alerts"]), doc["alerts"]


@slow
def test_a_failing_gpu_source_in_the_text_snapshot(tmp_path: Path) -> None:
    result = run_cli("--demo", "--demo-faults", "gpus:error", "snapshot", "--no-db", "--wait", "1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[0]
    assert "gpus=sim (error: " in first and "jobs=sim (live)" in first and "cloud=sim (live)" in first


# --------------------------------------------------------------------------- a corrupt cache


def _random_bytes(path: Path) -> None:
    path.write_bytes(random.Random(5).randbytes(16384))


def _damaged_sqlite(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x TEXT)")
        conn.executemany("INSERT INTO t VALUES (?)", [("x" * 200,)] * 200)
    conn.close()
    data = bytearray(path.read_bytes())
    data[4096:12288] = random.Random(6).randbytes(8192)
    path.write_bytes(bytes(data))


@slow
@pytest.mark.parametrize("corrupt", [pytest.param(_random_bytes, id="not-a-database"), pytest.param(_damaged_sqlite, id="damaged-pages")])
def test_a_corrupt_database_is_set_aside_with_one_warning(corrupt: Any, tmp_path: Path) -> None:
    db = tmp_path / "cache.db"
    corrupt(db)
    original = db.read_bytes()
    result = run_cli("snapshot", "--demo", "--json", "--wait", "1", "--db", str(db), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    doc = strict_json(result.stdout)
    assert schema_problems(doc, SNAPSHOT) == []
    assert doc["demo"] is True
    warnings = result.stderr.splitlines()
    assert len(warnings) == 1, result.stderr
    assert warnings[0].startswith("gpuconsole: warning: "), warnings[0]
    assert "rebuilt" in warnings[0]
    kept = sorted(tmp_path.glob("cache.db.corrupt-*"))
    assert len(kept) == 1, sorted(p.name for p in tmp_path.iterdir())
    # what is kept is the damaged file itself (SQLite may have rewritten its 100-byte header)
    kept_bytes = kept[0].read_bytes()
    assert len(kept_bytes) == len(original)
    assert kept_bytes[100:] == original[100:]
    assert str(kept[0]) in warnings[0]
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"


@slow
def test_a_rebuilt_database_opens_quietly_next_time(tmp_path: Path) -> None:
    db = tmp_path / "cache.db"
    _random_bytes(db)
    first = run_cli("snapshot", "--demo", "--json", "--wait", "1", "--db", str(db), cwd=tmp_path)
    assert first.returncode == 0 and "rebuilt" in first.stderr
    second = run_cli("snapshot", "--demo", "--json", "--wait", "1", "--db", str(db), cwd=tmp_path)
    assert second.returncode == 0
    assert second.stderr == ""
    assert len(list(tmp_path.glob("cache.db.corrupt-*"))) == 1


def _cloud_source(argv: list[str]) -> Any:
    from gpuconsole.cli.main import make_console, parse_args

    console = make_console(parse_args([*argv, "--no-db"]))
    try:
        return console.hub.runners[SourceKind.CLOUD].source
    finally:
        console.close()


def test_cloud_source_follows_flags_and_the_aws_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Nothing configured (conftest clears the AWS variables and points the files nowhere).
    assert type(_cloud_source([])).__name__ == "Unconfigured"
    assert "--region" in (_cloud_source([]).hint or "")
    aws = _cloud_source(["--region", "us-east-1", "--region", "us-west-2", "--region", "us-east-1"])
    assert type(aws).__name__ == "AwsCloud" and aws.regions == ("us-east-1", "us-west-2")
    assert type(_cloud_source(["--cloud", "off", "--region", "us-east-1"])).__name__ == "Unconfigured"
    monkeypatch.setenv("AWS_PROFILE", "research")
    assert type(_cloud_source([])).__name__ == "AwsCloud"
    monkeypatch.delenv("AWS_PROFILE")
    credentials = tmp_path / "credentials"
    credentials.write_text("[default]\naws_access_key_id = x\naws_secret_access_key = y\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    assert type(_cloud_source([])).__name__ == "AwsCloud"
    # The demo never talks to a real account, whatever is configured.
    assert type(_cloud_source(["--demo", "--region", "us-east-1"])).__name__ == "SimCloudBackend"


@slow
def test_a_reader_that_stops_early_is_not_an_error(tmp_path: Path) -> None:
    """``gpuconsole snapshot --json | head -c 100`` ends quietly, with no traceback."""
    child = subprocess.Popen([sys.executable, "-m", "gpuconsole", "snapshot", "--demo", "--json", "--no-db"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    assert child.stdout is not None and child.stderr is not None
    assert child.stdout.read(100)
    child.stdout.close()
    err = child.stderr.read().decode()
    assert child.wait(timeout=60) == 0
    assert "Traceback" not in err and "BrokenPipe" not in err


def test_demo_at_shows_the_same_world_on_every_run(capsys) -> None:
    """``--demo-at`` starts the simulated world at a fixed time: two runs list the same jobs,
    taken at that time, and a bad time is one line and exit 2."""
    runs = []
    for _ in range(2):
        assert main(["snapshot", "--demo", "--no-db", "--demo-at", "2026-11-16T14:00Z", "--json", "--wait", "5"]) == 0
        data = json.loads(capsys.readouterr().out)
        runs.append(sorted(j["name"] for j in data["jobs"]))
        assert abs(data["taken_at"] - 1_794_837_600) < 60  # 2026-11-16T14:00Z, not today
    assert runs[0] == runs[1] and "mistral-lora-rdlb2" in runs[0]
    assert main(["snapshot", "--demo", "--demo-at", "yesterday"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a time: 'yesterday'" in err
