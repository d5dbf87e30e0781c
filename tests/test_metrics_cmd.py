"""``gpuconsole metrics``: the fleet on /metrics for a real Prometheus, and rules that fire in it.

The command runs as a user runs it, in a process of its own on 127.0.0.1 (``--port 0``: the port
it prints), on the simulated world from a fixed time so the figures are the same every run. A
real Prometheus scrapes it with the bearer token and evaluates the rules ``metrics rules``
prints (held ``0s`` instead of minutes), and ``promtool`` checks the exposition and the rules.
"""

from __future__ import annotations

import json
import re
import select
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec
import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest

from gpuconsole.cli.main import main
from gpuconsole.core.fleet.metric_rules import RULES, rules_document
from gpuconsole.core.access.audit import AuditLog
from gpuconsole.core.fleet.metrics import AutopilotTally, FleetCollector
from gpuconsole.model import FleetSnapshot, SourceKind, SourceState
from tests.helpers import demo_console
from tests.prometheus_peer import PrometheusProcess, find_prometheus, free_port, parse_exposition

PROMTOOL = shutil.which("promtool")
PROMETHEUS = find_prometheus()
DEMO_AT = "2026-11-16T14:00Z"  # a world with idle billed GPUs and pending jobs
WAIT = 30.0  # generous for a loaded machine; nothing asserts how long anything takes
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
TOKEN = "s3cret-t0ken"
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="no promtool: install Debian's prometheus package")


# --------------------------------------------------------------------------- the command in a process


@contextmanager
def serving(*flags: str, said: list[str] | None = None) -> Iterator[str]:
    """``gpuconsole metrics --demo`` running with ``flags``; yields the URL it prints, and checks
    that SIGTERM ends it with status 0; ``said``: gets everything it wrote."""
    command = [sys.executable, "-m", "gpuconsole", "metrics", "--demo", "--no-db", "--demo-at", DEMO_AT,
               "--interval", "0.5", "--port", "0", *flags]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([process.stdout], [], [], WAIT)
        line = process.stdout.readline() if ready else ""
        found = re.search(r"(https?://\S+/metrics)", line)
        assert found, f"no URL printed: {line!r} {process.stderr.read() if process.poll() is not None else ''}"
        yield found.group(1)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            status = process.wait(WAIT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
            raise
    out, err = process.communicate()
    if said is not None:
        said.append(line + out + err)
    assert status == 0, err


def fetch(url: str, token: str | None = TOKEN, accept: str | None = None,
          context: ssl.SSLContext | None = None) -> tuple[int, str, str]:
    """(status, Content-Type, body) of a GET."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if accept:
        headers["Accept"] = accept
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as answer:
            return answer.status, answer.headers.get("Content-Type", ""), answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read().decode()


def scrape_once_live(url: str, token: str | None = TOKEN, *sources: str) -> str:
    """The first exposition in which every source of ``sources`` (default all three) is up."""
    wanted = set(sources or ("gpus", "jobs", "cloud"))
    deadline = time.monotonic() + WAIT
    while True:
        status, _, text = fetch(url, token=token)
        up = {labels["source"] for labels, value in samples(text).get("gpuconsole_source_up", []) if value == 1.0}
        if status == 200 and wanted <= up:
            return text
        assert time.monotonic() < deadline, f"sources never all up: {text}"
        time.sleep(0.2)


def samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and "{" not in line.split(" ", 1)[0]:
            name, value = line.rsplit(" ", 1)
            out.setdefault(name, []).append(({}, float(value)))
    for name, labels, value in parse_exposition("\n".join(l for l in text.splitlines() if "{" in l)):
        out.setdefault(name, []).append((labels, value))
    return out


FAMILIES = ("idle_gpu_cost_dollars_per_hour", "burn_dollars_per_hour", "namespace_cost_dollars_per_hour",
            "budget_spent_dollars", "budget_limit_dollars", "budget_forecast_dollars", "jobs_pending",
            "pending_gpus", "autopilot_actions_total", "alerts_active", "source_up")


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n", encoding="utf-8")
    return path


@pytest.mark.slow
def test_serves_every_family_that_promtool_accepts_in_both_formats_behind_the_token(token_file: Path,
                                                                                    monkeypatch) -> None:
    monkeypatch.setenv("GPUCONSOLE_LOG", "DEBUG")  # even its debug log never holds the token
    said: list[str] = []
    with serving("--token-file", str(token_file), said=said) as url:
        assert fetch(url, token=None)[0] == 401
        assert fetch(url, token="wrong")[0] == 401
        scrape_once_live(url)
        status, kind, text = fetch(url)
        assert (status, kind.split(";")[0]) == (200, "text/plain")
        for family in FAMILIES:
            assert f"# HELP gpuconsole_{family} " in text, family
        seen = samples(text)
        assert seen["gpuconsole_idle_gpu_cost_dollars_per_hour"][0][1] > 0
        assert {labels["source"]: value for labels, value in seen["gpuconsole_source_up"]} == {
            "gpus": 1.0, "jobs": 1.0, "cloud": 1.0, "services": 1.0}
        assert {"research", "team-nlp"} <= {labels["namespace"] for labels, _ in seen["gpuconsole_jobs_pending"]}
        if PROMTOOL is not None:
            check = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
            assert check.returncode == 0 and not check.stdout.strip(), check.stdout + check.stderr
        status, kind, text = fetch(url, accept=OPENMETRICS)
        assert status == 200 and kind.startswith("application/openmetrics-text"), kind
        assert text.endswith("# EOF\n")
        assert "# UNIT gpuconsole_budget_limit_dollars dollars" in text
        assert "# TYPE gpuconsole_autopilot_actions counter" in text
        assert fetch(url.replace("/metrics", "/elsewhere"))[0] == 404
    assert said and TOKEN not in said[0] and "wrong" not in said[0], "no token, right or wrong, is ever written"


@pytest.mark.slow
def test_a_scrape_never_waits_for_a_hung_source_and_leaves_its_figures_out() -> None:
    with serving("--demo-faults", "cloud:hang") as url:
        scrape_once_live(url, None, "gpus", "jobs")  # the cloud's first poll never answers
        started = time.monotonic()
        status, _, text = fetch(url, token=None)
        assert status == 200 and time.monotonic() - started < 5.0
    seen = samples(text)
    assert {labels["source"]: value for labels, value in seen["gpuconsole_source_up"]}["cloud"] == 0.0
    for family in ("burn_dollars_per_hour", "idle_gpu_cost_dollars_per_hour", "budget_spent_dollars"):
        assert f"gpuconsole_{family}" not in seen, family
    assert "gpuconsole_jobs_pending" in seen and "gpuconsole_budget_limit_dollars" in seen


class RulesPrometheus(PrometheusProcess):
    """A Prometheus of its own that scrapes one target with a bearer token every second and
    evaluates ``rules`` (the suite's :class:`PrometheusProcess` otherwise: query, wait_for, stop)."""

    def __init__(self, binary: str, workdir: Path, target: str, rules: Path, token_file: Path) -> None:
        self.port = free_port()
        config = workdir / "prometheus.yml"
        scrape = {"job_name": "gpuconsole", "static_configs": [{"targets": [target]}],
                  "authorization": {"type": "Bearer", "credentials_file": str(token_file)}}
        settings = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                    "rule_files": [str(rules)], "scrape_configs": [scrape]}
        config.write_text(yaml.safe_dump(settings), encoding="utf-8")
        self.log = (workdir / "prometheus.log").open("wb")
        flags = (f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn")
        self.process = subprocess.Popen([binary, *flags], stdout=self.log, stderr=subprocess.STDOUT)

    def alerts(self) -> list[dict[str, object]]:
        with urllib.request.urlopen(f"{self.url}/api/v1/alerts", timeout=5) as answer:
            return json.loads(answer.read())["data"]["alerts"]


@pytest.mark.slow
@pytest.mark.peer
@pytest.mark.skipif(PROMETHEUS is None, reason="no prometheus binary: install Debian's prometheus package")
def test_a_real_prometheus_scrapes_it_and_a_rule_it_prints_fires(tmp_path: Path, token_file: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", "rules", "--for", "0s"]) == 0
    rules = tmp_path / "rules.yml"
    rules.write_text(capsys.readouterr().out, encoding="utf-8")
    with serving("--token-file", str(token_file)) as url:
        target = url.split("//", 1)[1].split("/", 1)[0]
        prometheus = RulesPrometheus(PROMETHEUS, tmp_path, target, rules, token_file)
        try:
            prometheus.wait_for('up{job="gpuconsole"}', lambda r: bool(r) and r[0]["value"][1] == "1", WAIT)
            prometheus.wait_for("gpuconsole_pending_gpus", lambda r: bool(r) and float(r[0]["value"][1]) > 0, WAIT)
            deadline = time.monotonic() + WAIT
            firing: set[str] = set()
            while "GpuconsoleIdleGpuCost" not in firing:
                assert time.monotonic() < deadline, f"no rule fired; alerts: {prometheus.alerts()}"
                time.sleep(0.5)
                firing = {a["labels"]["alertname"] for a in prometheus.alerts() if a["state"] == "firing"}
            assert "GpuconsolePendingGpus" in firing or "GpuconsolePendingGpus" in {
                a["labels"]["alertname"] for a in prometheus.alerts()}
        finally:
            prometheus.stop()


@pytest.mark.slow
def test_tls_serves_https_with_the_certificate_given(tmp_path: Path) -> None:
    trustme = pytest.importorskip("trustme")
    authority = trustme.CA()
    cert = authority.issue_cert("127.0.0.1")
    chain, key = tmp_path / "chain.pem", tmp_path / "key.pem"
    cert.private_key_pem.write_to_path(key)
    chain.write_bytes(b"".join(blob.bytes() for blob in cert.cert_chain_pems))
    with serving("--tls-cert", str(chain), "--tls-key", str(key)) as url:
        assert url.startswith("https://")
        client = ssl.create_default_context()
        authority.configure_trust(client)
        status, _, text = fetch(url, token=None, context=client)
        assert status == 200 and "# HELP gpuconsole_burn_dollars_per_hour " in text


# --------------------------------------------------------------------------- figures, in this process


def exposition(snapshot) -> dict[str, list[tuple[dict[str, str], float]]]:  # noqa: ANN001 - a FleetSnapshot
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FleetCollector(lambda: snapshot))
    return samples(generate_latest(registry).decode())


def test_a_figure_that_cannot_be_known_is_absent_never_zero() -> None:
    console = demo_console()
    try:
        console.start(open_store=False)
        console.wait_for_first_answers(WAIT)
        snap = console.snapshot
    finally:
        console.close()
    live = exposition(snap)
    assert {"gpuconsole_burn_dollars_per_hour", "gpuconsole_budget_spent_dollars", "gpuconsole_pending_gpus",
            "gpuconsole_namespace_cost_dollars_per_hour", "gpuconsole_idle_gpu_cost_dollars_per_hour"} <= set(live)
    down = tuple(msgspec.structs.replace(s, state=SourceState.ERROR, error="boom") if s.kind is SourceKind.CLOUD else s
                 for s in snap.sources)
    assert snap.burn_per_hour > 0  # the snapshot still carries a number: the metrics must not believe it
    seen = exposition(msgspec.structs.replace(snap, sources=down))
    for family in ("burn_dollars_per_hour", "idle_gpu_cost_dollars_per_hour", "namespace_cost_dollars_per_hour",
                   "budget_spent_dollars", "budget_forecast_dollars"):
        assert f"gpuconsole_{family}" not in seen, family
    assert len(seen["gpuconsole_budget_limit_dollars"]) == len(snap.budgets)  # the limits are known all the same
    assert {labels["source"]: value for labels, value in seen["gpuconsole_source_up"]} == {
        "gpus": 1.0, "jobs": 1.0, "cloud": 0.0, "services": 1.0}
    assert "gpuconsole_pending_gpus" in seen


def test_with_no_backend_only_the_snapshot_time_has_a_sample() -> None:
    console = demo_console(demo=False)
    try:
        console.start(open_store=False)
        console.wait_for_first_answers(WAIT)
        seen = exposition(console.snapshot)
    finally:
        console.close()
    assert set(seen) <= {"gpuconsole_snapshot_timestamp_seconds", "gpuconsole_alerts_active"}, set(seen)


def test_the_autopilot_actions_are_counted_from_the_audit_log(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.db")
    for result in ("started", "ok", "started", "failed: no capacity", "started", "ok"):
        log.append("autopilot:scale-out", "admin", "launch", "us-east-1", [("rule", "scale-out")], result)
    log.append("autopilot:idle", "admin", "stop", "i-1", [], "denied: read-only")
    log.append("alice", "admin", "launch", "us-east-1", [], "ok")  # a person's action is no autopilot's
    tally = AutopilotTally(log)
    tally.refresh()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FleetCollector(lambda: FleetSnapshot(taken_at=0.0), tally.counts))
    counted = {tuple(labels[k] for k in ("rule", "action", "outcome")): value
               for labels, value in samples(generate_latest(registry).decode())["gpuconsole_autopilot_actions_total"]}
    assert counted == {("scale-out", "launch", "ok"): 2.0, ("scale-out", "launch", "failed"): 1.0,
                       ("idle", "stop", "denied"): 1.0}


# --------------------------------------------------------------------------- rules and flags


@needs_promtool
def test_the_rules_pass_promtool_and_for_replaces_every_hold(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", "rules"]) == 0
    path = tmp_path / "rules.yml"
    path.write_text(capsys.readouterr().out, encoding="utf-8")
    check = subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, check.stdout + check.stderr
    holds = {rule["alert"]: rule["for"] for rule in yaml.safe_load(path.read_text())["groups"][0]["rules"]}
    assert holds["GpuconsoleIdleGpuCost"] == "10m" and holds["GpuconsolePendingGpus"] == "1h"
    assert holds["GpuconsoleSourceDown"] == "5m" and len(holds) == len(RULES)
    assert set(yaml.safe_load(rules_document("0s"))["groups"][0]["rules"][i]["for"] for i in range(len(RULES))) == {"0s"}


@pytest.mark.parametrize("argv, words", [
    (["metrics", "rules", "--for", "ten minutes"], "not a Prometheus duration"),
    (["metrics", "--demo", "--tls-key", "key.pem"], "needs --tls-cert"),
    (["metrics", "--demo", "--tls-cert", "missing.pem"], "cannot serve TLS"),
    (["metrics", "--demo", "--token-file", "missing-token"], "cannot read"),
    (["metrics", "--demo", "--port", "70000"], "--port"),
])
def test_a_bad_flag_is_one_line_and_status_2(argv: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1, err


def test_an_empty_token_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "token"
    empty.write_text("\n", encoding="utf-8")
    assert main(["metrics", "--demo", "--token-file", str(empty)]) == 2
    assert "must hold one token" in capsys.readouterr().err


def test_a_port_in_use_is_one_line_before_any_source_is_built(capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        assert main(["metrics", "--demo", "--no-db", "--port", str(taken.getsockname()[1])]) == 2
    assert "cannot listen on 127.0.0.1" in capsys.readouterr().err
