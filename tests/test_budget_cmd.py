"""``gpuconsole budget``: add, list, remove and check, as a script or cron job uses them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuconsole.cli.main import main
from gpuconsole.model import Budget, BudgetPeriod, PendingAction, from_jsonable
from tests.aws_peer import AwsPeer


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuconsole: error: "), err
    return lines[0]


def test_add_list_remove(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "budget", "add", "pause-at-1000", "--amount", "1000", "--threshold",
                         "100:notify+stop-all", "--automatic")
    assert code == 0 and err == ""
    assert out.startswith("added budget pause-at-1000: $1,000 from ") and "(cumulative)" in out
    assert "thresholds 100:notify+stop-all, automatic" in out
    code, out, _ = run(capsys, "budget", "add", "team", "--amount", "$25,000", "--period", "monthly", "--scope",
                       "tag:Project=nlp", "--threshold", "80", "--threshold", "100f:notify",
                       "--webhook", "https://hooks.example.com/x", "--notify-command", "logger over")
    assert code == 0
    code, out, _ = run(capsys, "budget", "add", "november", "--amount", "500", "--period", "custom",
                       "--from", "2026-11-01", "--to", "2026-11-30", "--scope", "namespace:research")
    assert code == 0 and "2026-11-01 to 2026-11-30" in out

    code, out, _ = run(capsys, "budget", "list")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "AMOUNT", "PERIOD", "SCOPE", "THRESHOLDS", "AUTO", "FROM"]
    assert [line.split()[0] for line in lines[1:]] == ["november", "pause-at-1000", "team"]

    code, out, _ = run(capsys, "budget", "list", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["schema"] == "gpuconsole.budgets/1" and doc["config"] is None
    budgets = {b["name"]: b for b in doc["budgets"]}
    pause = from_jsonable(Budget, budgets["pause-at-1000"])
    assert pause.period is BudgetPeriod.CUSTOM and pause.starts is not None and pause.ends is None and pause.automatic
    assert budgets["pause-at-1000"]["thresholds_text"] == ["100:notify+stop-all"]
    assert budgets["team"]["thresholds_text"] == ["80:notify", "100f:notify"]
    assert budgets["team"]["webhook"] == "https://hooks.example.com/x" and budgets["team"]["origin"] == "store"

    code, out, _ = run(capsys, "budget", "remove", "team")
    assert (code, out) == (0, "removed budget team\n")
    code, out, _ = run(capsys, "budget", "list")
    assert "team" not in out


@pytest.mark.parametrize(("argv", "words"), [
    (["budget"], "required: ACTION"),
    (["budget", "add", "x"], "required: --amount"),
    (["budget", "add", "x", "--amount", "lots"], "argument --amount: expected a number of dollars"),
    (["budget", "add", "x", "--amount", "0"], "must be more than $0"),
    (["budget", "add", "x", "--amount", "5", "--threshold", "80:boom"], "unknown action 'boom'"),
    (["budget", "add", "x", "--amount", "5", "--threshold", "forecast:100:notify"], "bad threshold"),
    (["budget", "add", "x", "--amount", "5", "--scope", "team"], "bad budget scope"),
    (["budget", "add", "x", "--amount", "5", "--period", "weekly"], "invalid choice"),
    (["budget", "add", "x", "--amount", "5", "--from", "yesterday"], "bad date"),
    (["budget", "add", "x", "--amount", "5", "--period", "daily", "--to", "2026-12-01"], "--from and --to go with --period custom"),
    (["budget", "add", "x", "--amount", "5", "--from", "2026-12-05", "--to", "2026-12-01"], "ends before it starts"),
    (["budget", "add", "x y", "--amount", "5"], "bad budget name"),
    (["budget", "add", "x", "--amount", "5", "--webhook", "http://hooks.example.com"], "https://"),
    (["budget", "add", "x", "--amount", "5", "--no-db"], "without --no-db"),
    (["budget", "remove", "nope"], "no budget named nope"),
    (["budget", "check", "--demo", "--no-db", "nope"], "no budget named nope"),
])
def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str], words: str) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert words in one_error_line(err)


def test_budgets_of_the_config_file_and_its_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[[budgets]]\nname = "declared"\namount = 1\nthresholds = ["100:notify"]\n')
    code, out, _ = run(capsys, "budget", "list", "--config", str(config))
    assert code == 0 and "declared" in out and "config" in out
    code, _, err = run(capsys, "budget", "remove", "declared", "--config", str(config))
    assert code == 2 and "declared in the config file" in one_error_line(err)
    code, _, err = run(capsys, "budget", "add", "declared", "--amount", "5", "--config", str(config))
    assert code == 2 and "cannot be changed" in one_error_line(err)
    code, out, _ = run(capsys, "budget", "check", "--demo", "--no-db", "--config", str(config), "declared")
    assert code == 1 and "budget declared: " in out and "crossed 100:notify" in out

    config.write_text('[[budgets]]\nname = "declared"\namount = "lots"\n')
    for argv in (["budget", "list"], ["budget", "check", "--demo", "--no-db"], ["budget", "add", "x", "--amount", "1"]):
        code, _, err = run(capsys, *argv, "--config", str(config))
        line = one_error_line(err)
        assert code == 2 and str(config) in line and "key amount" in line
    code, _, err = run(capsys, "budget", "list", "--config", str(tmp_path / "missing.toml"))
    assert code == 2 and "no such configuration file" in one_error_line(err)


@pytest.mark.slow
def test_check_exit_codes_on_the_demo(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # The sprint is sized so it takes minutes to pass 50%: under all thresholds right after start.
    code, out, err = run(capsys, "budget", "check", "--demo", "--no-db", "sprint")
    assert (code, err) == (0, "") and "under all thresholds" in out
    config = tmp_path / "config.toml"
    config.write_text('[[budgets]]\nname = "small"\namount = 1\n')
    code, out, _ = run(capsys, "budget", "check", "--demo", "--no-db", "--config", str(config))
    assert code == 1
    assert [line.split(":")[0] for line in out.splitlines() if line.startswith("budget ")] == [
        "budget fleet", "budget team-nlp", "budget research-daily", "budget inference", "budget sprint", "budget small"]
    code, _, err = run(capsys, "budget", "check", "--demo", "--no-db", "--demo-faults", "cloud:error", "--wait", "2")
    assert code == 2 and "the cloud source is error" in one_error_line(err)


@pytest.mark.slow
def test_check_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[[budgets]]\nname = "small"\namount = 1\nthresholds = ["50:notify", "100:notify+stop-spot"]\n')
    code, out, _ = run(capsys, "budget", "check", "--demo", "--no-db", "--json", "--config", str(config))
    doc = json.loads(out)
    assert code == 1 == doc["exit"] and doc["schema"] == "gpuconsole.budget-check/1"
    assert doc["status"] == "crossed" and doc["demo"] is True and doc["errors"] == [] and doc["enforced"] == []
    small = next(b for b in doc["budgets"] if b["name"] == "small")
    assert set(small) == {"name", "amount", "period", "period_start", "period_end", "scope", "origin", "automatic",
                          "spent", "forecast", "percent", "burn_per_hour", "crossed"}
    assert small["crossed"] == ["50:notify", "100:notify+stop-spot"] and small["origin"] == "config"
    assert small["percent"] == pytest.approx(100 * small["spent"] / small["amount"])
    pending = from_jsonable(tuple[PendingAction, ...], doc["pending_actions"])
    [spot] = [p for p in pending if p.budget == "small"]
    # The one spot instance a stop can take is the demo's Azure Spot VM (deallocated, kept); EC2's
    # one-time spot instances cannot be stopped, and the detail says so.
    assert [t.rsplit("/", 1)[-1] for t in spot.targets] == ["eus-batch-a100"]
    assert "cannot stop one-time spot instance" in spot.detail

    code, out, _ = run(capsys, "budget", "check", "--demo", "--no-db", "--json", "--demo-faults", "cloud:error", "--wait", "2")
    doc = json.loads(out)
    assert code == 2 and doc["status"] == "error" and doc["errors"]


@pytest.mark.slow
def test_check_enforce_against_moto(capsys: pytest.CaptureFixture[str], aws_peer: AwsPeer) -> None:
    ec2 = aws_peer.client("ec2")

    def launch(**kwargs) -> str:  # noqa: ANN003
        answer = ec2.run_instances(ImageId=aws_peer.image_id(), InstanceType="p4d.24xlarge", MinCount=1, MaxCount=1, **kwargs)
        return answer["Instances"][0]["InstanceId"]

    tagged = launch(TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "Budget", "Value": "research"}]}])
    other = launch()
    code, _, _ = run(capsys, "budget", "add", "research", "--amount", "0.001", "--period", "custom", "--from", "2020-01-01",
                     "--scope", "tag:Budget=research", "--threshold", "100:notify+stop-all", "--automatic")
    assert code == 0

    code, out, err = run(capsys, "budget", "check", "--region", "us-east-1")
    assert code == 1 and "budget research:" in out and "runs automatically with --enforce" in out
    assert aws_peer.proxy.sent("StopInstances") == [], "check alone changes nothing"

    code, out, err = run(capsys, "budget", "check", "--enforce", "--region", "us-east-1")
    assert code == 1, err
    assert f"done: budget research at 100%: stopped {tagged}" in out
    assert [r.params["InstanceId.1"] for r in aws_peer.proxy.sent("StopInstances")] == [tagged]
    described = {i["InstanceId"]: i["State"]["Name"] for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]}
    assert described[tagged] in ("stopping", "stopped") and described[other] == "running"

    ec2.start_instances(InstanceIds=[tagged])  # someone starts it again in the same period
    code, out, _ = run(capsys, "budget", "check", "--enforce", "--json", "--region", "us-east-1")
    doc = json.loads(out)
    assert code == 1 and [r["kind"] for r in doc["enforced"]] == []
    assert len(aws_peer.proxy.sent("StopInstances")) == 1, "once per threshold per period"
    [pending] = doc["pending_actions"]
    assert pending["targets"] == [tagged] and pending["automatic"] is False


@pytest.mark.slow
def test_budget_check_as_a_process(tmp_path: Path) -> None:
    """The way cron runs it: a process, its exit status, nothing but the report on stdout."""
    config = tmp_path / "config.toml"
    config.write_text('[[budgets]]\nname = "small"\namount = 1\n')
    done = subprocess.run([sys.executable, "-m", "gpuconsole", "budget", "check", "--demo", "--no-db",
                           "--config", str(config), "small"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stderr == ""
    assert done.stdout.startswith("budget small: ")


@pytest.mark.slow
def test_on_a_shared_machine_an_automatic_budget_of_a_logins_own_file_only_plans(
        capsys: pytest.CaptureFixture[str], aws_peer: AwsPeer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Site settings exist: what acts by itself comes from the site config (or ``budget add
    --automatic``, admin, MFA, audited); an automatic budget in a login's own file is shown with
    what it would stop, says it is plan only, and stops nothing, even with ``--enforce``."""
    answer = aws_peer.client("ec2").run_instances(
        ImageId=aws_peer.image_id(), InstanceType="p4d.24xlarge", MinCount=1, MaxCount=1,
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "Budget", "Value": "research"}]}])
    tagged = answer["Instances"][0]["InstanceId"]
    mine = tmp_path / "mine.toml"
    mine.write_text('[[budgets]]\nname = "research"\namount = 0.001\nperiod = "custom"\nstarts = 2020-01-01\n'
                    'scope = "tag:Budget=research"\nthresholds = ["100:notify+stop-all"]\nautomatic = true\n')
    site = tmp_path / "site"
    site.mkdir(mode=0o755)
    (site / "users.json").write_text(json.dumps({"users": {"root": {"role": "admin"}}}))
    (site / "users.json").chmod(0o644)
    monkeypatch.setenv("GPUCONSOLE_SITE_DIR", str(site))

    code, out, err = run(capsys, "budget", "check", "--enforce", "--region", "us-east-1", "--no-db", "--config", str(mine))
    assert code == 1, err
    said = " ".join(out.split())  # lines wrap at 80 columns
    assert "plan only: on a shared machine a budget acts by itself only from the site config" in said
    assert tagged in said and "waits for a user's yes" in said
    assert aws_peer.proxy.sent("StopInstances") == []

    monkeypatch.delenv("GPUCONSOLE_SITE_DIR")  # a machine of one login: its own file acts, as before
    code, out, err = run(capsys, "budget", "check", "--enforce", "--region", "us-east-1", "--no-db", "--config", str(mine))
    assert code == 1 and f"stopped {tagged}" in out, err
