"""``gpuconsole service list / show / scale`` and the ``services`` section of ``snapshot --json``,
on the demo's inference pool: the JSON shape, unknown figures as null, a scale through the one
action path (audited, refused for a developer outside their namespaces, MFA for an admin taking
a service to zero), and bad input as one line with exit status 2."""

from __future__ import annotations

import json
import time

import pytest

from gpuconsole.cli.main import main
from gpuconsole.core.access.access import Role
from gpuconsole.core.access.audit import AuditLog
from gpuconsole.core.access.mfa import code_at
from tests.access_world import NAMES, use_home

DEMO = ["--demo", "--no-db", "--demo-at", "2026-11-16T14:00Z"]
FIELDS = ("namespace", "name", "kind", "replicas_desired", "replicas_ready", "gpus", "gpus_per_replica", "rps",
          "p50_ms", "p99_ms", "mean_ms", "ttft_ms", "tokens_per_s", "queue_depth", "usd_per_hour",
          "usd_per_million_tokens", "metrics_source", "slo")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main([*argv])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def by_key(services: list[dict]) -> dict[str, dict]:
    return {f"{s['namespace']}/{s['name']}": s for s in services}


@pytest.fixture
def home(tmp_path, monkeypatch):
    _users, _mfa, audit, secret = use_home(tmp_path, time.time, monkeypatch.setenv)
    return tmp_path, secret


def demo_audit(root) -> AuditLog:
    return AuditLog(root / "demo" / "audit.db")


def test_service_list_json_has_every_field_and_null_for_what_is_unknown(home, capsys) -> None:
    rc, out, err = run(capsys, *DEMO, "service", "list", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    services = by_key(doc["services"])
    assert set(services) == {"chat/vllm-llama3", "search/text-embed", "imaging/ct-imaging", "risk/risk-scorer",
                             "research/notebook-llm"}
    for service in services.values():
        assert set(FIELDS) <= set(service), set(FIELDS) - set(service)
        assert "replicas" not in service  # only `service show` lists the pods
    llm = services["chat/vllm-llama3"]
    assert llm["kind"] == "Deployment" and llm["metrics_source"] == "vllm"
    assert llm["gpus"] == llm["gpus_per_replica"] * llm["replicas_ready"] == 6
    assert llm["tokens_per_s"] > 0 and llm["usd_per_million_tokens"] > 0 and llm["p99_ms"] > llm["p50_ms"]
    # an idle notebook server with no metrics: figures unknown (null), never 0; its GPUs still cost
    idle = services["research/notebook-llm"]
    for figure in ("rps", "p50_ms", "p99_ms", "mean_ms", "ttft_ms", "tokens_per_s", "queue_depth",
                   "usd_per_million_tokens", "metrics_source", "slo"):
        assert idle[figure] is None, figure
    assert idle["usd_per_hour"] > 0 and idle["gpus"] == 1
    # Triton without histograms: a mean latency, no quantiles, no tokens
    ct = services["imaging/ct-imaging"]
    assert ct["metrics_source"] == "triton" and ct["mean_ms"] > 0
    assert ct["p99_ms"] is None and ct["tokens_per_s"] is None and ct["usd_per_million_tokens"] is None
    # grouped by namespace, by $/h
    assert doc["services"][0]["namespace"] == "chat"


def test_snapshot_json_has_a_services_section_like_service_list(home, capsys) -> None:
    rc, out, err = run(capsys, *DEMO, "snapshot", "--json")
    assert rc == 0, err
    services = by_key(json.loads(out)["services"])
    assert "chat/vllm-llama3" in services and set(FIELDS) <= set(services["chat/vllm-llama3"])
    assert services["research/notebook-llm"]["p99_ms"] is None


def test_service_list_text_fits_80_columns_and_shows_unknown_as_a_dash(home, capsys) -> None:
    rc, out, err = run(capsys, *DEMO, "service", "list")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["NAMESPACE", "NAME"] and all(len(line) <= 80 for line in lines)
    notebook = next(line for line in lines if "notebook-llm" in line)
    assert "–" in notebook and " 0 " not in notebook


def test_service_show_json_lists_replicas_and_text_says_no_serving_metrics(home, capsys) -> None:
    rc, out, err = run(capsys, *DEMO, "service", "show", "chat/vllm-llama3", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["hpa"]["max_replicas"] == 4 and len(doc["replicas"]) == doc["replicas_desired"]
    assert {"pod", "node", "gpus", "gpu_utilization", "running", "waiting"} <= set(doc["replicas"][0])
    rc, out, err = run(capsys, *DEMO, "service", "show", "research/notebook-llm")
    assert rc == 0, err
    assert "no serving metrics" in out and "[[services.metrics]]" in out
    assert all(len(line) <= 80 for line in out.splitlines())


def test_scale_is_audited_with_the_replicas_asked_for(home, monkeypatch, capsys) -> None:
    root, _secret = home
    monkeypatch.setenv("GPUCONSOLE_LOGIN", NAMES[Role.DEVELOPER])
    rc, out, err = run(capsys, *DEMO, "service", "scale", "chat/vllm-llama3", "4")
    assert rc == 0, err
    assert out.startswith("scaled Deployment chat/vllm-llama3 to 4 replicas")
    assert "HorizontalPodAutoscaler vllm-llama3" in out  # it may change them again: said
    record = [r for r in demo_audit(root).records() if r.action == "scale-service"][-1]
    assert (record.actor, record.role, record.target) == ("dev", "developer", "chat/vllm-llama3")
    assert not record.result.startswith(("denied", "failed", "refused"))
    params = json.loads(record.params)
    assert params["replicas"] == "4" and params["from"] == "3" and params["namespace"] == "chat"


def test_a_developer_outside_their_namespace_is_refused_in_one_line_and_audited(home, monkeypatch, capsys) -> None:
    root, _secret = home
    monkeypatch.setenv("GPUCONSOLE_LOGIN", NAMES[Role.DEVELOPER])
    rc, _out, err = run(capsys, *DEMO, "service", "scale", "research/notebook-llm", "2")
    assert rc == 1
    assert err.startswith("gpuconsole: error: denied: developer dev may act only in") and err.count("\n") == 1
    record = [r for r in demo_audit(root).records() if r.action == "scale-service"][-1]
    assert record.target == "research/notebook-llm" and record.result.startswith("denied: ")


def test_an_admin_scaling_to_zero_needs_an_mfa_code(home, monkeypatch, capsys) -> None:
    root, secret = home
    monkeypatch.setenv("GPUCONSOLE_LOGIN", NAMES[Role.ADMIN])
    rc, _out, err = run(capsys, *DEMO, "service", "scale", "imaging/ct-imaging", "0")
    assert rc == 1 and "needs a current MFA code" in err and err.count("\n") == 1
    rc, out, err = run(capsys, *DEMO, "service", "scale", "imaging/ct-imaging", "0",
                       "--mfa-code", code_at(secret, time.time()))
    assert rc == 0, err
    assert "to 0 replicas" in out
    results = [r.result for r in demo_audit(root).records() if r.action == "scale-service"]
    assert results[0].startswith("denied: ") and not results[-1].startswith("denied")
    # another count is no stop: no code asked
    rc, _out, err = run(capsys, *DEMO, "service", "scale", "imaging/ct-imaging", "3")
    assert rc == 0, err


@pytest.mark.parametrize("argv, words", [
    (("service", "scale", "chat", "3"), "expected NAMESPACE/NAME"),
    (("service", "scale", "chat/vllm-llama3", "three"), "expected a whole number of replicas"),
    (("service", "scale", "chat/vllm-llama3", "-1"), "replicas must be from 0 to 1000"),
    (("service", "scale", "chat/vllm-llama3", "5000"), "replicas must be from 0 to 1000"),
    (("service", "scale", "chat/no-such-model", "2"), "no service chat/no-such-model"),
    (("service", "show", "chat/no-such-model"), "no service chat/no-such-model"),
])
def test_bad_input_is_one_line_and_exit_2_and_nothing_is_recorded(home, capsys, argv, words) -> None:
    root, _secret = home
    rc, out, err = run(capsys, *DEMO, *argv)
    assert rc == 2 and out == ""
    assert err.startswith("gpuconsole: error: ") and words in err and err.count("\n") == 1
    assert [r for r in demo_audit(root).records() if r.action == "scale-service"] == []
