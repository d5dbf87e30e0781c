"""``gpuconsole autopilot`` and ``gpuconsole rule`` from a script: manifests, the plan, rules kept
in the database (audited), and one-line errors with exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gpuconsole.cli.main import main
from gpuconsole.core.access.audit import AuditLog


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, file in (("GPUCONSOLE_AUTOPILOT_DB", "autopilot.db"), ("GPUCONSOLE_DB", "cache.db"),
                       ("GPUCONSOLE_AUDIT_DB", "audit.db"), ("GPUCONSOLE_USERS", "users.toml"),
                       ("GPUCONSOLE_MFA", "mfa.json"), ("GPUCONSOLE_CONFIG", "config.toml")):
        monkeypatch.setenv(name, str(tmp_path / file))
    monkeypatch.setenv("GPUCONSOLE_DEMO_DIR", str(tmp_path / "demo"))
    (tmp_path / "config.toml").write_text('[[rules]]\nname = "autostop"\nkind = "idle-stop"\nidle_for = "30m"\n')
    return tmp_path


def test_manifest_kubernetes_is_the_five_objects_and_systemd_a_unit(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["autopilot", "manifest", "--kubernetes", "--namespace", "ml"]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [d["kind"] for d in docs] == ["ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Deployment"]
    assert all(d["metadata"]["namespace"] == "ml" for d in docs)
    lease_rule = next(r for r in docs[1]["rules"] if r["apiGroups"] == ["coordination.k8s.io"])
    assert set(lease_rule["verbs"]) == {"get", "create", "update"}
    assert "autostop" in docs[3]["data"]["config.toml"]  # the config file travels as the ConfigMap
    assert docs[4]["spec"]["replicas"] == 2
    assert main(["autopilot", "manifest", "--systemd"]) == 0
    unit = capsys.readouterr().out
    assert "autopilot run --json" in unit and "KillSignal=SIGTERM" in unit and "[Install]" in unit


def test_plan_decides_and_changes_nothing(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["autopilot", "plan", "--json", "--demo"]) == 0
    [line] = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert line["rule"] == "autostop" and line["decision"] in ("none", "wait") and line["ok"] is None
    assert not (home / "demo" / "audit.db").exists() or not list(AuditLog(home / "demo" / "audit.db").records())


def test_rules_added_paused_and_removed_are_audited(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rule", "add", '{ name = "night", kind = "idle-stop", scope = "tag:Team=a", idle_for = "2h" }']) == 0
    assert main(["rule", "pause", "night"]) == 0
    assert main(["rule", "list"]) == 0
    out = capsys.readouterr().out
    assert "added rule night (idle-stop, tag:Team=a)" in out
    listed = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith(("autostop ", "night "))}
    assert listed["autostop"][3:5] == ["config", "active"] and listed["night"][3:5] == ["db", "paused"]
    assert main(["rule", "remove", "night"]) == 0
    actions = [(r.action, r.target) for r in AuditLog(home / "audit.db").records()]
    assert ("rule-add", "night") in actions and ("rule-pause", "night") in actions and ("rule-remove", "night") in actions


@pytest.mark.parametrize(("argv", "words"), [
    (["rule", "add", '{ name = "x", kind = "idle-stop", idle_for = "soon" }'], "rule 'x' key idle_for:"),
    (["rule", "add", "not toml"], "not a TOML inline table"),
    (["rule", "add", '{ name = "autostop", kind = "idle-stop" }'], "exists already"),
    (["rule", "remove", "autostop"], "declared in the config file"),
    (["rule", "pause", "nope"], "no rule 'nope'"),
    (["autopilot", "run", "--once", "--demo", "--lease-seconds", "1"], "--lease-seconds must be 2 or more"),
])
def test_bad_input_is_one_line_and_exit_2(home: Path, capsys: pytest.CaptureFixture[str], argv: list[str], words: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1


def test_a_bad_rule_in_the_config_file_names_the_file_rule_and_key(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (home / "config.toml").write_text('[[rules]]\nname = "pool"\nkind = "scale"\npool = "tag:P=1"\nscale_out = "gpu_util > 80 for 10 minutes"\n')
    assert main(["autopilot", "plan", "--demo"]) == 2
    err = capsys.readouterr().err
    assert f"{home / 'config.toml'}: rule 'pool' key scale_out:" in err and err.count("\n") == 1


def test_a_demo_without_rules_plans_the_demos_own(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (home / "config.toml").write_text("")
    assert main(["autopilot", "plan", "--json", "--demo"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(d["rule"], d["kind"]) for d in lines] == [("vision-pool", "scale"), ("autostop", "idle-stop"),
                                                       ("spot-recover", "spot-recover"),
                                                       ("embed-scale", "serve-scale")]
    assert main(["autopilot", "plan"]) == 2  # outside the demo there is nothing to plan
    assert "no autopilot rules" in capsys.readouterr().err


def test_rule_list_says_none_in_words_and_json_lists_every_rule(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (home / "config.toml").write_text("")  # no [[rules]] in the file, none added yet
    assert main(["rule", "list"]) == 0
    assert capsys.readouterr().out.startswith("no autopilot rules: ")
    assert main(["rule", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["rule", "add", '{ name = "night", kind = "idle-stop", scope = "tag:Team=a", idle_for = "2h" }']) == 0
    capsys.readouterr()
    assert main(["rule", "list", "--json"]) == 0
    [rule] = json.loads(capsys.readouterr().out)
    assert (rule["name"], rule["kind"], rule["scope"], rule["origin"], rule["paused"]) == (
        "night", "idle-stop", "tag:Team=a", "db", False)
