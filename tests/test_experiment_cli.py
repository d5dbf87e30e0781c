"""``gpuconsole experiment``: the seeded demo's results, runs in the demo, bad files, stop."""

from __future__ import annotations

import json

import pytest

from gpuconsole.cli.main import main
from tests.test_experiment_spec import EXAMPLE

DEMO = ["--demo", "--no-db"]


def test_the_seeded_experiment_shows_medians_intervals_and_cost_per_epoch(capsys) -> None:
    assert main(["experiment", "show", "resnet50-epoch", *DEMO, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["state"] == "done" and shown["work"]["per"] == "epoch"
    arms = {(a["instance_type"], a["market"]): a for a in shown["arms"]}
    assert set(arms) == {(t, m) for t in ("p4d.24xlarge", "g5.xlarge", "g6.xlarge") for m in ("on-demand", "spot")}
    for arm in arms.values():
        low, high = arm["median_ci"]
        assert arm["runs"] == 3 and low <= arm["median"] <= high
        assert arm["cost_per_work"] > 0 and arm["cost_ci"][0] <= arm["cost_per_work"] <= arm["cost_ci"][1]
    # The public relative throughput: an A100 trains ResNet-50 about 3.5× as fast as an A10G or an L4.
    per_gpu = {t: arms[(t, "on-demand")]["median"] / (8 if t.startswith("p4d") else 1) for t in ("p4d.24xlarge", "g5.xlarge", "g6.xlarge")}
    assert 2.5 < per_gpu["p4d.24xlarge"] / per_gpu["g5.xlarge"] < 4.5 and per_gpu["g5.xlarge"] > per_gpu["g6.xlarge"] * 0.9
    # Spot is cheaper per epoch than on-demand on the same type.
    assert arms[("g5.xlarge", "spot")]["cost_per_work"] < arms[("g5.xlarge", "on-demand")]["cost_per_work"]
    assert {w["criterion"] for w in shown["winners"]} == {"cost", "time", "index"}


def test_show_as_csv_and_as_a_table(capsys) -> None:
    assert main(["experiment", "show", "resnet50-epoch", *DEMO, "--csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("arm,instance_type,market,runs") and len(lines) == 7
    assert main(["experiment", "show", "resnet50-epoch", *DEMO]) == 0
    text = capsys.readouterr().out
    assert "$/epoch" in text and "winner on cost:" in text and "g6.xlarge spot" in text


def test_list_shows_the_finished_and_the_running_one(capsys) -> None:
    assert main(["experiment", "list", *DEMO]) == 0
    out = capsys.readouterr().out
    assert "resnet50-epoch" in out and "done" in out and "resnet50-infer" in out and "running" in out


def test_a_run_in_the_demo_ends_with_every_arm_measured(tmp_path, capsys) -> None:
    path = tmp_path / "exp.toml"
    path.write_text(EXAMPLE.replace('"ml-vision"', '"team-vision"').replace('"resnet50-epoch"', '"my-epoch"'),
                    encoding="utf-8")
    assert main(["experiment", "run", str(path), *DEMO, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["name"] == "my-epoch" and all(a["runs"] == 3 for a in result["arms"])


def test_max_cost_reached_exits_1(tmp_path, capsys) -> None:
    path = tmp_path / "exp.toml"
    text = EXAMPLE.replace('"ml-vision"', '"team-vision"').replace('"resnet50-epoch"', '"tight-budget"')
    path.write_text(text.replace("max_cost = 200", "max_cost = 0.5"), encoding="utf-8")
    assert main(["experiment", "run", str(path), *DEMO]) == 1
    captured = capsys.readouterr()
    assert "max_cost $0.50 reached" in captured.err and "Traceback" not in captured.err


@pytest.mark.parametrize(("change", "key"), [
    (('instance_type = "g5.xlarge"', 'instance_type = "g9.huge"'), "arms[1].instance_type"),
    (("repeats = 3", "repeats = 0"), "repeats"),
    (("max_cost = 200", "max_cost = -1"), "max_cost"),
    (('regex = "samples/s: ([0-9.]+)"', 'regex = "samples/s"'), "metric.regex"),
])
def test_a_bad_file_exits_2_with_one_line_and_submits_nothing(kube, tmp_path, capsys, change, key) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(EXAMPLE.replace(*change, 1), encoding="utf-8")
    assert main(["experiment", "run", str(path), "--jobs", "kube", "--kubeconfig", str(kube.kubeconfig), "--no-db"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f": {key}: " in err
    assert kube.server.requested("/jobs", method="POST") == []


def test_stop_deletes_the_running_jobs(capsys) -> None:
    assert main(["experiment", "stop", "resnet50-infer", *DEMO]) == 0
    assert "stopped resnet50-infer" in capsys.readouterr().out


def test_an_unknown_experiment_is_one_line_and_exit_1(capsys) -> None:
    assert main(["experiment", "show", "nope", *DEMO]) == 1
    assert capsys.readouterr().err.strip() == "gpuconsole: error: no experiment named nope"


@pytest.mark.parametrize(("namespace", "allowed"), [("team-nlp", True), ("research", False)])
def test_a_developer_runs_experiments_in_their_namespaces_only(tmp_path, monkeypatch, capsys, namespace,
                                                               allowed) -> None:
    import time

    from gpuconsole.core.access.audit import AuditLog
    from tests.access_world import make_home

    users, _mfa, _audit, _secret = make_home(tmp_path, time.time)  # dev works in team-nlp
    monkeypatch.setenv("GPUCONSOLE_USERS", str(users.path))
    monkeypatch.setenv("GPUCONSOLE_DEMO_DIR", str(tmp_path / "demo"))
    monkeypatch.setenv("GPUCONSOLE_LOGIN", "dev")  # root plays the developer
    path = tmp_path / "exp.toml"
    text = EXAMPLE.replace('"ml-vision"', f'"{namespace}"').replace('"resnet50-epoch"', '"dev-epoch"')
    path.write_text(text.replace("repeats = 3", "repeats = 1"), encoding="utf-8")
    rc = main(["experiment", "run", str(path), *DEMO])
    err = capsys.readouterr().err
    records = [r for r in AuditLog(tmp_path / "demo" / "audit.db").records() if r.action == "submit-job" and r.result != "started"]
    assert records and all(r.actor == "dev" for r in records)
    if allowed:
        assert rc == 0, err
        assert len(records) >= 3 and all(r.result.startswith("created") or r.result == "ok" for r in records)
    else:
        assert rc == 1 and "denied: " in err and err.count("\n") == 2  # the start line, then the one error
        assert records[-1].result.startswith("denied: ")


def test_an_unwritable_experiments_database_is_one_line(tmp_path, monkeypatch, capsys) -> None:
    blocker = tmp_path / "cache"
    blocker.mkdir()
    (blocker / "experiments.db").mkdir()  # a folder where the database file should be
    monkeypatch.setenv("GPUCONSOLE_DB", str(blocker / "gpuconsole.db"))
    assert main(["experiment", "list"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("gpuconsole: error: cannot open the experiments database") and err.count("\n") == 1


def test_without_a_cluster_nothing_runs_and_one_line_says_why(tmp_path, capsys) -> None:
    path = tmp_path / "exp.toml"
    path.write_text(EXAMPLE, encoding="utf-8")
    assert main(["experiment", "run", str(path), "--no-db"]) == 1
    err = capsys.readouterr().err
    assert "cannot run resnet50-epoch: this job source cannot change jobs" in err and err.count("\n") == 1


def test_no_db_keeps_the_experiments_in_memory(tmp_path) -> None:
    from gpuconsole.cli.main import make_console, parse_args
    from gpuconsole.core.fleet.experiment_door import experiment_store_path

    for flags, expected in ((["--no-db"], ":memory:"), ([], tmp_path / "experiments.db")):
        args = parse_args(["experiment", "list", "--demo", "--db", str(tmp_path / "cache.db"), *flags])
        console = make_console(args)
        try:
            assert experiment_store_path(console) == expected
        finally:
            console.close()


def test_list_as_json_and_an_empty_book(tmp_path, monkeypatch, capsys) -> None:
    assert main(["experiment", "list", *DEMO, "--json"]) == 0
    listed = {e["name"]: e for e in json.loads(capsys.readouterr().out)}
    assert listed["resnet50-epoch"]["state"] == "done" and listed["resnet50-epoch"]["done"] == 18
    assert main(["experiment", "list", "--jobs", "off", "--no-db", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
