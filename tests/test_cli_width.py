"""The command line fits a terminal of 80 columns: every table, message and help text, with the
identifying column of a table (a name, an id) kept whole while another column can give;
``--wide`` prints everything whole. Every list says so, in words and as JSON, when it is empty."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterator

import pytest

from gpuconsole.cli.main import build_parser, main
from gpuconsole.cli.table import ELLIPSIS, WIDTH, Column, render_table, wrap

DEMO = ["--demo", "--no-db", "--demo-at", "2026-11-16T14:00Z"]
LONG = "research-vision-transformer-pretraining-q4"
WIDE_SCOPE = "tag:Project=vision-transformers"
FULL_UUID = re.compile(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def too_wide(text: str) -> list[str]:
    return [line for line in text.splitlines() if len(line) > WIDTH]


# --------------------------------------------------------------------------- every command in 80 columns


@pytest.mark.parametrize("argv", [
    pytest.param(["snapshot", *DEMO], id="snapshot"),
    pytest.param(["budget", "list", *DEMO], id="budget-list"),
    pytest.param(["budget", "check", *DEMO], id="budget-check"),
    pytest.param(["gpus", "--once", "--demo"], id="gpus"),
    pytest.param(["audit", "usage", *DEMO], id="audit-usage"),
    pytest.param(["autopilot", "plan", *DEMO], id="autopilot-plan"),
    pytest.param(["autopilot", "run", "--once", "--read-only", *DEMO], id="autopilot-run"),
    pytest.param(["rule", "list", "--demo"], id="rule-list"),
    pytest.param(["experiment", "list", *DEMO], id="experiment-list"),
    pytest.param(["experiment", "show", "resnet50-epoch", *DEMO], id="experiment-show"),
    pytest.param(["cost", "compare", "--preset", "resnet50"], id="cost-compare"),
])
def test_every_table_and_line_fits_80_columns(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, out, err = run(capsys, *argv)
    assert code in (0, 1), err  # budget check exits 1 past a threshold
    assert out.strip()
    assert too_wide(out) == [] and too_wide(err) == []


def _parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield " ".join(path) or "gpuconsole", parser
    for action in parser._actions:  # noqa: SLF001 - argparse keeps its subcommands here
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


def test_every_help_fits_80_columns_on_a_wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    helps = dict(_parsers(build_parser()))
    assert {"gpuconsole", "cost compare", "budget list", "rule list"} <= set(helps)
    over = {path: too_wide(parser.format_help()) for path, parser in helps.items()}
    assert {path: lines for path, lines in over.items() if lines} == {}
    top = helps["gpuconsole"].format_help()
    assert "--wide" in top and "keys in the console" in top


# --------------------------------------------------------------------------- --wide


def test_wide_prints_the_whole_uuid_and_every_column(capsys: pytest.CaptureFixture[str]) -> None:
    _, narrow, _ = run(capsys, "gpus", "--once", "--demo")
    _, wide, _ = run(capsys, "gpus", "--once", "--demo", "--wide")
    table = [line for line in narrow.splitlines() if line[:3].strip().isdigit()]
    assert table and all(ELLIPSIS in line and not FULL_UUID.search(line) for line in table)
    assert all(FULL_UUID.search(line) for line in wide.splitlines() if line[:3].strip().isdigit())
    assert too_wide(wide) and "NODE" in wide.splitlines()[1] and "NODE" not in narrow.splitlines()[1]


def test_wide_snapshot_shows_every_job_name_whole_and_the_reasons(capsys: pytest.CaptureFixture[str]) -> None:
    _, doc, _ = run(capsys, "snapshot", *DEMO, "--json")
    jobs = json.loads(doc)["jobs"]
    _, narrow, _ = run(capsys, "snapshot", *DEMO)
    _, wide, _ = run(capsys, "snapshot", *DEMO, "--wide")
    for text in (narrow, wide):  # the job's name is the column that is never cut
        assert all(f" {job['name']} " in text for job in jobs)
    reasons = [job["pending_reason"] for job in jobs if job["pending_reason"]]
    assert reasons and all(reason in wide for reason in reasons)
    assert not all(reason in narrow for reason in reasons)


def test_wide_budget_list_and_experiment_show_keep_what_80_columns_leave_out(capsys: pytest.CaptureFixture[str]) -> None:
    _, narrow, _ = run(capsys, "budget", "list", *DEMO)
    _, wide, _ = run(capsys, "budget", "list", *DEMO, "--wide")
    assert "50:notify 80:notify 100:notify 100f:notify" in wide and "from the beginning (cumulative)" in wide
    assert "50:notify 80:notify 100:notify 100f:notify" not in narrow
    assert [line.split()[0] for line in narrow.splitlines()] == [line.split()[0] for line in wide.splitlines()]
    _, narrow, _ = run(capsys, "experiment", "show", "resnet50-epoch", *DEMO)
    _, wide, _ = run(capsys, "experiment", "show", "resnet50-epoch", *DEMO, "--wide")
    assert "95% CI" in wide and "ON-DEM" in wide and "95% CI" not in narrow
    assert "g6.xlarge on-demand" in narrow and "$/epoch" in narrow


# --------------------------------------------------------------------------- long names


def test_a_long_budget_name_stays_whole_and_wide_shows_the_rest(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "budget", "add", LONG, "--amount", "25000", "--period", "monthly", "--scope",
                         WIDE_SCOPE, "--threshold", "50:notify", "--threshold", "100:notify+stop-all+suspend-cronjobs")
    assert code == 0, err
    assert too_wide(out) == [] and out.startswith(f"added budget {LONG}: ")
    _, out, _ = run(capsys, "budget", "list")
    assert too_wide(out) == []
    [row] = out.splitlines()[1:]
    assert row.split()[:3] == [LONG, "$25,000", "monthly"]
    _, wide, _ = run(capsys, "budget", "list", "--wide")
    assert WIDE_SCOPE in wide and "50:notify 100:notify+stop-all+suspend-cronjobs" in wide

    _, out, _ = run(capsys, "audit", "list")  # the same change in the audit log
    assert out.splitlines()[0].split() == ["SEQ", "TIME", "ACTOR", "ROLE", "ACTION", "TARGET", "RESULT"]
    assert too_wide(out) == [] and ELLIPSIS in out
    _, wide, _ = run(capsys, "audit", "list", "--wide")
    assert f"budget-add {LONG} ok" in re.sub(" +", " ", wide) and f"scope={WIDE_SCOPE}" in wide


def test_a_long_login_and_a_long_rule_stay_whole(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    login = "nightly-batch-service-of-the-research-vision-team-x"
    monkeypatch.setenv("GPUCONSOLE_LOGIN", login)
    assert run(capsys, "users", "init", "--no-qr")[0] == 0
    _, out, _ = run(capsys, "users", "list")
    assert too_wide(out) == [] and out.splitlines()[1].split()[:3] == [login, "(you)", "admin"]

    rule = "idle-stop-for-the-vision-research-team"
    table = f'{{ name = "{rule}", kind = "idle-stop", scope = "{WIDE_SCOPE}-and-friends", idle_for = "2h" }}'
    code, out, err = run(capsys, "rule", "add", table)
    assert code == 0, err
    assert too_wide(out) == []
    _, out, _ = run(capsys, "rule", "list")
    assert too_wide(out) == [] and out.splitlines()[1].split()[0] == rule
    assert f"{WIDE_SCOPE}-and-friends" not in out
    _, wide, _ = run(capsys, "rule", "list", "--wide")
    assert f"{WIDE_SCOPE}-and-friends" in wide


# --------------------------------------------------------------------------- empty lists


@pytest.mark.parametrize(("argv", "words", "items"), [
    pytest.param(["budget", "list"], "no budgets (add one with: gpuconsole budget add ", lambda doc: doc["budgets"],
                 id="budget"),
    pytest.param(["rule", "list"], "no autopilot rules: ", lambda doc: doc, id="rule"),
    pytest.param(["experiment", "list", "--jobs", "off", "--no-db"], "no experiments (run one with: ", lambda doc: doc,
                 id="experiment"),
    pytest.param(["audit", "list"], "no audit records yet", lambda doc: doc["records"], id="audit"),
])
def test_an_empty_list_says_so_in_one_line_and_as_json(capsys: pytest.CaptureFixture[str], argv: list[str], words: str,
                                                     items) -> None:  # noqa: ANN001 - a lambda
    code, out, err = run(capsys, *argv)
    assert (code, err) == (0, "")
    assert out.startswith(words) and out.count("\n") == 1 and too_wide(out) == []
    code, out, _ = run(capsys, *argv, "--json")
    assert code == 0 and items(json.loads(out)) == []


def test_filters_that_match_nothing_and_a_period_without_use_say_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "audit", "list", "--actor", "nobody") == (0, "no audit records match these filters\n", "")
    quiet = ["--jobs", "off", "--cloud", "off", "--gpus", "off", "--no-db"]
    code, out, _ = run(capsys, "audit", "usage", *quiet)
    assert code == 0 and out.startswith("no GPU-hours used from ") and out.count("\n") == 1
    code, out, _ = run(capsys, "audit", "usage", *quiet, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["by_user"] == [] and doc["by_namespace"] == []


# --------------------------------------------------------------------------- the table and wrap helpers


COLUMNS = (Column("NAME", key=True), Column("SIZE", right=True), Column("NOTE", give=2, least=8),
           Column("EXTRA", give=3, least=6, drop=True))
ROW = ("a-name-that-is-rather-long-" * 2 + "indeed", "1,234,567", "a note that says a good deal " * 2, "x" * 30)


def test_a_table_cuts_the_giving_columns_then_drops_and_cuts_the_key_last() -> None:
    whole = render_table(COLUMNS, [ROW], None)
    assert whole[1].split()[0] == ROW[0] and ROW[3] in whole[1]
    at_80 = render_table(COLUMNS, [ROW], 80)
    assert all(len(line) <= 80 for line in at_80)
    assert at_80[0].split() == ["NAME", "SIZE", "NOTE"]  # EXTRA dropped once cutting was not enough
    assert at_80[1].startswith(ROW[0] + " 1,234,567 a note") and at_80[1].endswith(ELLIPSIS)
    at_40 = render_table(COLUMNS, [ROW], 40)
    assert len(at_40[1]) == 40 and len(at_40[0]) <= 40 and "1,234,567" in at_40[1]  # a number is never cut
    assert at_40[1].split()[0].endswith(ELLIPSIS)  # the name last, when nothing else can give


def test_cells_are_inert() -> None:
    [_, row] = render_table((Column("NAME", key=True),), [("evil\x1b[2Jname",)])
    assert "\x1b" not in row and "\\x1b[2Jname" in row


def test_wrap_breaks_between_clauses_then_before_an_aside_then_between_words() -> None:
    text = "budget team: $1,143 of $2,000 (57%) daily, forecast $2,360; crossed 50:notify 100f:notify [spend: since last start only]"
    assert wrap(text).splitlines() == [
        "budget team: $1,143 of $2,000 (57%) daily, forecast $2,360;",
        "  crossed 50:notify 100f:notify [spend: since last start only]"]
    assert wrap(text, None) == text
    added = ("added budget demo-cli: $100 from 2026-12-03T11:53Z (cumulative), scope all, thresholds 50:notify "
             "80:notify 100:notify 100f:notify (kept for this demo session only: nothing is saved)")
    assert wrap(added).splitlines() == [
        "added budget demo-cli: $100 from 2026-12-03T11:53Z (cumulative), scope all,",
        "  thresholds 50:notify 80:notify 100:notify 100f:notify",
        "  (kept for this demo session only: nothing is saved)"]
    path = "/" + "deep/" * 20 + "users.json"
    assert wrap(f"the users table is {path} now").splitlines() == ["the users table is", f"  {path}", "  now"]
