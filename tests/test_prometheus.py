"""The Prometheus GPU source: DCGM series → model, the exporter's format, HTTP, errors, settings."""

from __future__ import annotations

import base64
import json
import subprocess
import threading
import types
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuconsole.backends.base import (
    BackendError,
    BackendPermissionDenied,
    BackendThrottled,
    BackendTimeout,
    Capability,
)
from gpuconsole.backends.prometheus import answers as pa
from gpuconsole.backends.prometheus import mapping as pm
from gpuconsole.backends.prometheus.source import (
    PASSWORD_ENV,
    TOKEN_ENV,
    PrometheusGpus,
    PrometheusSettings,
)
from gpuconsole.backends.sim import make_sim
from gpuconsole.backends.sim.exporter import render, sm_clock
from gpuconsole.model import Gpu, MigMode
from tests.prometheus_peer import (
    CannedPrometheus,
    exposition_vectors,
    free_port,
    parse_exposition,
    series,
)

UUID_A = "GPU-aaaaaaaa-0000-0000-0000-000000000001"
UUID_M = "GPU-bbbbbbbb-0000-0000-0000-000000000002"


@pytest.fixture
def canned():
    server = CannedPrometheus()
    yield server
    server.stop()


def source_for(url: str, **kw) -> PrometheusGpus:
    return PrometheusGpus(PrometheusSettings(url, **kw), env=kw.pop("env", {}))


# --------------------------------------------------------------------------- parsing


def fleet_answers() -> dict[str, list]:
    """One whole GPU held by a pod, one MIG GPU with two instances (one held)."""
    a = {"UUID": UUID_A, "gpu": "3", "Hostname": "node-a"}
    m = {"UUID": UUID_M, "gpu": "0", "Hostname": "node-b"}
    ident_a = {**a, "modelName": "NVIDIA A100-SXM4-80GB", "pod": "bert-ft-x7k2p", "namespace": "nlp",
               "container": "train", "DCGM_FI_DRIVER_VERSION": "550.54.15"}
    gi1 = {**m, "GPU_I_ID": "1", "GPU_I_PROFILE": "3g.40gb", "modelName": "NVIDIA A100-SXM4-80GB",
           "pod": "eval-abcde", "namespace": "research", "DCGM_FI_DRIVER_VERSION": "550.54.15"}
    gi2 = {**m, "GPU_I_ID": "2", "GPU_I_PROFILE": "1g.10gb", "modelName": "NVIDIA A100-SXM4-80GB"}
    return {
        pm.FB_USED: [series(1024, **ident_a), series(20000, **gi1), series(0, **gi2)],
        pm.FB_FREE: [series(80896, **a), series(20192, UUID=UUID_M, GPU_I_ID="1"), series(9856, UUID=UUID_M, GPU_I_ID="2")],
        pm.UTIL: [series(2, **a)],
        pm.TEMP: [series(41, **a), series(55, **m)],
        pm.POWER: [series(88.5, **a), series(120.25, **m)],
        pm.POWER_LIMIT: [series(400, **a), series(400, **m)],
        pm.SM_CLOCK: [series(1410, **a), series("NaN", **m)],
        pm.GR_ENGINE: [series(0.02, **a), series(0.5, UUID=UUID_M, GPU_I_ID="1"), series(0, UUID=UUID_M, GPU_I_ID="2")],
        pm.XID: [series(0, **a), series(79, **m)],
    }


def test_series_become_gpus_with_mig_instances_and_pods():
    columns, roster = pm.collect(fleet_answers())
    whole, mig = pm.build_gpus(columns, roster)
    assert (whole.uuid, whole.node, whole.index, whole.name) == (UUID_A, "node-a", 3, "NVIDIA A100-SXM4-80GB")
    assert (whole.utilization, whole.memory_used_mib, whole.memory_total_mib) == (2.0, 1024, 81920)
    assert (whole.temperature_c, whole.power_w, whole.power_limit_w, whole.sm_clock_mhz) == (41, 88.5, 400.0, 1410)
    assert (whole.pod, whole.namespace, whole.xid_errors, whole.gr_engine_active) == ("bert-ft-x7k2p", "nlp", 0, 2.0)
    assert whole.mig_mode is MigMode.DISABLED
    # Values the exporter does not report are N/A, never made up.
    assert whole.memory_clock_mhz is None and whole.memory_utilization is None
    assert mig.mig_mode is MigMode.ENABLED and mig.node == "node-b"
    assert mig.pod is None, "the pod of one MIG instance is not the whole GPU's"
    assert mig.sm_clock_mhz is None, "NaN reads as N/A"
    assert mig.xid_errors == 79
    big, small = mig.mig_slices
    assert (big.gi_id, big.profile, big.memory_used_mib, big.memory_total_mib) == (1, "3g.40gb", 20000, 40192)
    assert (big.utilization, big.pod, big.namespace) == (50.0, "eval-abcde", "research")
    assert (small.gi_id, small.profile, small.utilization, small.pod) == (2, "1g.10gb", 0.0, None)
    assert big.uuid == f"MIG-{UUID_M}/1/0" and big.gpu_uuid == UUID_M
    # Without a whole-GPU series, memory and utilization come from the instances.
    assert (mig.memory_used_mib, mig.memory_total_mib) == (20000, 50048)
    assert mig.utilization == pytest.approx(50.0 * 3 / 7, abs=0.05)
    assert pm.driver_versions(roster) == (("driver", "550.54.15"),)


def test_gpus_are_listed_by_node_and_index_whatever_order_the_series_come_in():
    import random

    nodes = ("node-c", "node-a", "node-b")
    labels = [{"UUID": f"GPU-{n}-{i}", "gpu": str(i), "Hostname": node, "modelName": "NVIDIA H100 80GB HBM3"}
              for n, node in enumerate(nodes) for i in (7, 0, 10, 2)]
    mig = {"UUID": "GPU-mig", "gpu": "1", "Hostname": "node-a", "modelName": "NVIDIA A100-SXM4-80GB"}
    for seed in range(5):
        shuffled = random.Random(seed).sample(labels, len(labels))
        answers = {pm.FB_USED: [series(1, **lab) for lab in shuffled]
                   + [series(5, **mig, GPU_I_ID="1", GPU_I_PROFILE="3g.40gb")],
                   pm.TEMP: [series(40, **lab) for lab in reversed(shuffled)] + [series(50, **mig)]}
        gpus = pm.build_gpus(*pm.collect(answers))
        assert [(g.node, g.index) for g in gpus] == sorted((g.node, g.index) for g in gpus)
        assert ("node-a", 1) in [(g.node, g.index) for g in gpus if g.mig_mode is MigMode.ENABLED]


def test_unreadable_series_are_skipped_not_fatal():
    answers = {pm.FB_USED: [{"metric": {"UUID": UUID_A}}, {"value": [0, "1"]}, series("x", UUID=UUID_A),
                            series(5, UUID=UUID_A, Hostname="n", gpu="0")]}
    (gpu,) = pm.build_gpus(*pm.collect(answers))
    assert gpu.memory_used_mib == 5 and gpu.temperature_c == 0 and gpu.sm_clock_mhz is None


def test_an_exporter_without_uuid_is_keyed_by_node_and_index():
    answers = {pm.FB_USED: [series(1, Hostname="n1", gpu="0"), series(2, Hostname="n1", gpu="1")],
               pm.UTIL: [series(50, Hostname="n1", gpu="1")]}
    gpus = pm.build_gpus(*pm.collect(answers))
    assert [(g.uuid, g.utilization) for g in gpus] == [("n1:0", 0.0), ("n1:1", 50.0)]


def test_queries_ask_only_for_the_labels_read():
    queries = pm.instant_queries('cluster="prod"')
    assert set(queries) == {pm.IDENTITY, *pm.METRICS} and set(pm.METRICS) == {*pm.FAST, *pm.SLOW}
    assert queries[pm.UTIL] == 'max by (UUID, GPU_I_ID) (DCGM_FI_DEV_GPU_UTIL{cluster="prod"})'
    assert "modelName" in queries[pm.IDENTITY] and "pod" in queries[pm.IDENTITY] and pm.FB_USED in queries[pm.IDENTITY]
    assert queries[pm.IDENTITY].startswith("count by ("), "counted: the answer changes only with the labels"
    assert "Hostname, gpu" in pm.instant_queries(by_uuid=False)[pm.TEMP]
    with pytest.raises(ValueError, match="label matcher"):
        pm.check_selector("up")
    assert pm.check_selector('{a="x,y", b=~"z"}') == 'a="x,y", b=~"z"'


def test_range_answers_merge_into_samples():
    def matrix(points):
        return [{"metric": {}, "values": [[t, str(v)] for t, v in points]}]

    out = pm.samples({"utilization": matrix([(10, 5), (20, 7.25)]), "memory": matrix([(10, 100)]),
                      "temperature": matrix([(20, 50)]), "power": []})
    assert [(s.ts, s.utilization, s.memory_used_mib, s.temperature_c, s.power_w) for s in out] == [
        (10.0, 5.0, 100.0, 0.0, 0.0), (20.0, 7.2, 0.0, 50.0, 0.0)]
    queries = pm.history_queries('GPU-1"x')
    assert 'UUID="GPU-1\\"x"' in queries["utilization"]


# --------------------------------------------------------------------------- the exporter's format


def test_sim_exporter_round_trips_through_the_parser():
    gpus_face, jobs_face, _ = make_sim(seed=7, start=1_764_480_000.0, clock=lambda: 1_764_480_000.0)
    reading = gpus_face.poll_gpus()
    jobs = jobs_face.poll_jobs()
    text = render(reading.gpus, jobs)
    assert text.startswith("# HELP DCGM_FI_DEV_SM_CLOCK")
    samples = parse_exposition(text)
    names = {name for name, _, _ in samples}
    assert {pm.UTIL, pm.FB_USED, pm.FB_FREE, pm.TEMP, pm.POWER, pm.SM_CLOCK, pm.GR_ENGINE, pm.XID} <= names
    parsed = {g.uuid: g for g in pm.build_gpus(*pm.collect(exposition_vectors(text)))}
    assert set(parsed) == {g.uuid for g in reading.gpus}
    pods = {j.pod_uid: j for j in jobs.jobs}
    held = 0
    for gpu in reading.gpus:
        got = parsed[gpu.uuid]
        assert (got.node, got.index, got.name) == (gpu.node, gpu.index, gpu.name)
        assert (got.utilization, got.memory_used_mib, got.memory_total_mib) == (gpu.utilization, gpu.memory_used_mib, gpu.memory_total_mib)
        assert (got.temperature_c, got.power_w, got.power_limit_w) == (gpu.temperature_c, gpu.power_w, gpu.power_limit_w)
        assert got.sm_clock_mhz == sm_clock(gpu)
        assert got.mig_mode is gpu.mig_mode
        assert [(s.gi_id, s.profile, s.memory_used_mib, s.memory_total_mib, s.utilization) for s in got.mig_slices] == [
            (s.gi_id, s.profile, s.memory_used_mib, s.memory_total_mib, s.utilization) for s in gpu.mig_slices]
        for mine, theirs in zip(got.mig_slices, gpu.mig_slices, strict=True):
            job = pods.get(theirs.pod_uid)
            assert (mine.pod, mine.namespace) == ((job.pod, job.namespace) if job else (None, None))
        owner = next((pods[p.pod_uid] for p in gpu.processes if p.pod_uid in pods), None)
        if not gpu.mig_slices and owner is not None:
            held += 1
            assert (got.pod, got.namespace) == (owner.pod, owner.namespace)
    assert held > 10
    assert any(g.mig_slices for g in parsed.values())


# --------------------------------------------------------------------------- HTTP


def test_poll_reads_every_metric_once_for_the_whole_fleet(canned):
    canned.answers = fleet_answers()
    source = source_for(canned.url)
    try:
        reading = source.poll_gpus()
    finally:
        source.close()
    assert [g.uuid for g in reading.gpus] == [UUID_A, UUID_M]
    assert reading.gpus[0].pod == "bert-ft-x7k2p" and reading.gpus[1].xid_errors == 79
    paths = [path for path, _, _ in canned.requests]
    assert paths == ["/api/v1/query"] * (len(pm.METRICS) + 1)
    assert sorted(params["query"] for _, params, _ in canned.requests) == sorted(pm.instant_queries().values())
    assert all("Authorization" not in headers for _, _, headers in canned.requests)
    assert Capability.HISTORY in source.capabilities and source.name.startswith("prometheus 127.0.0.1:")


def test_identity_and_seldom_changing_values_are_read_again_when_due_or_a_gpu_appears(canned, monkeypatch):
    from gpuconsole.backends.prometheus import source as module

    canned.answers = fleet_answers()
    source = source_for(canned.url)
    source.poll_gpus()
    canned.requests.clear()
    again = source.poll_gpus()
    fast = sorted(pm.instant_query(m) for m in pm.FAST)
    assert sorted(params["query"] for _, params, _ in canned.requests) == fast
    assert again.gpus[0].pod == "bert-ft-x7k2p" and again.gpus[1].xid_errors == 79, "kept from the last full read"
    # A GPU the identity does not name yet: read it at once.
    canned.answers[pm.FB_USED] = [*canned.answers[pm.FB_USED], series(7, UUID="GPU-new", gpu="1", Hostname="node-c",
                                                                      modelName="Tesla T4")]
    canned.requests.clear()
    grown = source.poll_gpus()
    assert len(canned.requests) == len(pm.METRICS) + 1
    assert [(g.uuid, g.node, g.name) for g in grown.gpus][-1] == ("GPU-new", "node-c", "Tesla T4")
    canned.requests.clear()
    # When they will be due by the next poll, they are read between the two, not by the poll.
    monkeypatch.setattr(module, "SLOW_EVERY_S", 0.0)
    canned.answers[pm.XID] = [series(0, UUID=UUID_A), series(13, UUID=UUID_M)]
    canned.answers[pm.FB_USED][0]["metric"]["pod"] = "bert-ft-next"
    polled = source.poll_gpus()
    assert sorted(params["query"] for _, params, _ in canned.requests) == fast
    assert polled.gpus[1].xid_errors == 79 and polled.gpus[0].pod == "bert-ft-x7k2p"
    source.settle(10)
    between = [params["query"] for _, params, _ in canned.requests[len(fast):]]
    assert sorted(between) == sorted(pm.instant_queries()[m] for m in (pm.IDENTITY, pm.FB_USED, *pm.SLOW))
    canned.requests.clear()
    monkeypatch.setattr(module, "SLOW_EVERY_S", 3600.0)
    after = source.poll_gpus()
    assert sorted(params["query"] for _, params, _ in canned.requests) == fast
    assert after.gpus[1].xid_errors == 13 and after.gpus[0].pod == "bert-ft-next", "what was read between the polls"
    source.close()


def polled_once(canned: CannedPrometheus) -> PrometheusGpus:
    """A source of the fleet of :func:`fleet_answers`, after its first poll (which reads everything)."""
    canned.answers = fleet_answers()
    source = source_for(canned.url)
    source.poll_gpus()
    return source


RESTARTING = (503, b'{"status":"error","errorType":"unavailable","error":"restarting"}')


def test_a_failed_read_between_polls_is_made_again_by_the_next_poll(canned, monkeypatch):
    from gpuconsole.backends.prometheus import source as module

    source = polled_once(canned)
    monkeypatch.setattr(module, "SLOW_EVERY_S", 0.0)
    source.poll_gpus()
    canned.status, canned.body = RESTARTING
    source.settle(10)  # fails: nothing is shown of it yet
    canned.status = canned.body = None
    monkeypatch.setattr(module, "SLOW_EVERY_S", 3600.0)
    canned.requests.clear()
    source.poll_gpus()
    assert len(canned.requests) == len(pm.METRICS) + 1, "the poll read everything itself"
    canned.status, canned.body = RESTARTING
    with pytest.raises(BackendError, match="unavailable: restarting"):
        source.poll_gpus()
    source.close()


def test_a_read_between_polls_waits_for_its_moment_and_ends_with_the_source(canned, monkeypatch):
    from gpuconsole.backends.prometheus import source as module

    source = polled_once(canned)
    monkeypatch.setattr(module, "SLOW_EVERY_S", 60.0)
    source._polled_at -= 600  # as if the last poll was ten minutes ago: the next read a minute away (at most)
    canned.requests.clear()
    source.poll_gpus()
    thread, _go = source._between
    assert thread.is_alive() and len(canned.requests) == len(pm.FAST), "waiting for its moment"
    source.close()
    thread.join(5)
    assert not thread.is_alive() and len(canned.requests) == len(pm.FAST), "closing ended it, unread"


def test_memory_size_stays_true_while_only_memory_used_is_read_again(canned):
    """Free memory is read with the seldom-changing values, but it moves with the memory used: a
    refresh between full reads keeps each GPU's (and instance's) size, not used now + free then."""
    canned.answers = fleet_answers()
    source = source_for(canned.url)
    first = {g.uuid: g for g in source.poll_gpus().gpus}
    assert first[UUID_A].memory_total_mib == 81920
    assert [s.memory_total_mib for s in first[UUID_M].mig_slices] == [40192, 9856]
    a = {"UUID": UUID_A, "gpu": "3", "Hostname": "node-a", "modelName": "NVIDIA A100-SXM4-80GB", "pod": "bert-ft-x7k2p",
         "namespace": "nlp", "container": "train", "DCGM_FI_DRIVER_VERSION": "550.54.15"}
    gi1 = {"UUID": UUID_M, "gpu": "0", "Hostname": "node-b", "GPU_I_ID": "1", "GPU_I_PROFILE": "3g.40gb",
           "modelName": "NVIDIA A100-SXM4-80GB", "pod": "eval-abcde", "namespace": "research",
           "DCGM_FI_DRIVER_VERSION": "550.54.15"}
    gi2 = {"UUID": UUID_M, "gpu": "0", "Hostname": "node-b", "GPU_I_ID": "2", "GPU_I_PROFILE": "1g.10gb",
           "modelName": "NVIDIA A100-SXM4-80GB"}
    # The job allocates 40 GiB more, the first instance 10 GiB more: free goes down as much.
    canned.answers[pm.FB_USED] = [series(1024 + 40960, **a), series(30000, **gi1), series(0, **gi2)]
    canned.answers[pm.FB_FREE] = [series(80896 - 40960, UUID=UUID_A), series(10192, UUID=UUID_M, GPU_I_ID="1"),
                                  series(9856, UUID=UUID_M, GPU_I_ID="2")]
    canned.requests.clear()
    later = {g.uuid: g for g in source.poll_gpus().gpus}
    assert {params["query"] for _, params, _ in canned.requests} == {pm.instant_query(m) for m in pm.FAST}
    assert (later[UUID_A].memory_used_mib, later[UUID_A].memory_total_mib) == (41984, 81920)
    big, small = later[UUID_M].mig_slices
    assert (big.memory_used_mib, big.memory_total_mib, small.memory_total_mib) == (30000, 40192, 9856)
    source.close()


def test_an_exporter_without_uuid_labels_is_read_by_node_and_index(canned):
    canned.answers = {pm.FB_USED: [series(5, Hostname="n1", gpu="0", modelName="Tesla T4")],
                      pm.UTIL: [series(40, Hostname="n1", gpu="0")]}
    source = source_for(canned.url)
    (gpu,) = source.poll_gpus().gpus
    assert (gpu.uuid, gpu.node, gpu.utilization, gpu.memory_used_mib) == ("n1:0", "n1", 40.0, 5)
    assert any("Hostname, gpu" in params["query"] for _, params, _ in canned.requests)
    source.close()


def test_answers_come_gzipped_when_asked_and_read_the_same(canned):
    canned.answers = fleet_answers()
    plain = source_for(canned.url)
    expected = plain.poll_gpus().gpus
    plain.close()
    assert {h.get("Accept-Encoding") for _, _, h in canned.requests} == {"identity"}
    canned.requests.clear()
    gzipped = source_for(canned.url, compress=True)
    assert gzipped.poll_gpus().gpus == expected
    gzipped.close()
    assert {h.get("Accept-Encoding") for _, _, h in canned.requests} == {"gzip"}


def test_bearer_token_from_a_file_is_reread_and_basic_auth_from_the_environment(canned, tmp_path):
    canned.answers = fleet_answers()
    token = tmp_path / "token"
    token.write_text("first\n")
    source = source_for(canned.url, token_file=str(token))
    source.poll_gpus()
    token.write_text("second")
    source.poll_gpus()
    source.close()
    seen = [h.get("Authorization") for _, _, h in canned.requests]
    assert seen[0] == "Bearer first" and seen[-1] == "Bearer second"
    canned.requests.clear()
    basic = PrometheusGpus(PrometheusSettings(canned.url, username="ops"), env={PASSWORD_ENV: "s3cret"})
    basic.poll_gpus()
    basic.close()
    expected = "Basic " + base64.b64encode(b"ops:s3cret").decode()
    assert {h.get("Authorization") for _, _, h in canned.requests} == {expected}
    canned.requests.clear()
    env_token = PrometheusGpus(PrometheusSettings(canned.url), env={TOKEN_ENV: "from-env"})
    env_token.poll_gpus()
    env_token.close()
    assert {h.get("Authorization") for _, _, h in canned.requests} == {"Bearer from-env"}


@pytest.mark.parametrize(("status", "body", "error", "words"), [
    (401, b"Unauthorized", BackendPermissionDenied, "refused the credentials (HTTP 401)"),
    (403, b"", BackendPermissionDenied, "HTTP 403"),
    (429, b"", BackendThrottled, "slow down"),
    (400, json.dumps({"status": "error", "errorType": "bad_data", "error": "parse error at char 4\nmore"}).encode(),
     BackendError, "bad_data: parse error at char 4"),
    (502, b"<html>Bad Gateway</html>", BackendError, "answered HTTP 502"),
    (200, b"<html>a login page</html>", BackendError, "not JSON"),
    (200, json.dumps({"status": "success", "data": {"resultType": "matrix", "result": []}}).encode(), BackendError,
     "expected a vector"),
])
def test_http_failures_are_typed_one_line_errors(canned, status, body, error, words):
    canned.status = status if status != 200 else None
    canned.body = body
    source = source_for(canned.url)
    with pytest.raises(error) as info:
        source.poll_gpus()
    source.close()
    assert words in str(info.value) and "\n" not in str(info.value)


def test_no_dcgm_series_says_so(canned):
    source = source_for(canned.url)
    with pytest.raises(BackendError, match="no DCGM exporter series"):
        source.poll_gpus()
    source.close()


def test_slow_and_absent_servers(canned):
    canned.delay = 1.0
    slow = source_for(canned.url, timeout=0.2)
    with pytest.raises(BackendTimeout, match="no answer from Prometheus at 127.0.0.1:.* in 0.2 s"):
        slow.poll_gpus()
    slow.close()
    down = source_for(f"http://127.0.0.1:{free_port()}")
    with pytest.raises(BackendError, match="cannot reach Prometheus at 127.0.0.1") as info:
        down.poll_gpus()
    assert "\n" not in str(info.value)
    down.close()


def test_history_comes_from_query_range(canned):
    asked = []

    def answer(query):
        asked.append(query)
        value = {"utilization": 40, "memory": 1000, "temperature": 50, "power": 99}[
            "utilization" if "GPU_UTIL" in query else "memory" if "FB_USED" in query
            else "temperature" if "TEMP" in query else "power"]
        return {"status": "success", "data": {"resultType": "matrix", "result": [
            {"metric": {}, "values": [[100, str(value)], [160, str(value + 1)]]}]}}

    canned.range_answer = answer
    source = source_for(canned.url)
    samples = source.history(UUID_A, 100, 160, 60)
    source.close()
    assert [(s.ts, s.utilization, s.memory_used_mib, s.temperature_c, s.power_w) for s in samples] == [
        (100.0, 40.0, 1000.0, 50.0, 99.0), (160.0, 41.0, 1001.0, 51.0, 100.0)]
    assert len(asked) == 4 and all(UUID_A in q for q in asked)
    _, params, _ = canned.requests[0]
    assert (params["start"], params["end"], params["step"]) == ("100.000", "160.000", "60")


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key


def test_tls_is_verified_and_a_custom_ca_is_honoured(canned, tmp_path):
    import shutil
    import ssl

    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    cert, key = _self_signed(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    canned.socket = context.wrap_socket(canned.socket, server_side=True)
    canned.answers = fleet_answers()
    url = f"https://127.0.0.1:{canned.server_address[1]}"
    untrusted = source_for(url)
    with pytest.raises(BackendError, match="TLS with Prometheus at 127.0.0.1:.* failed") as info:
        untrusted.poll_gpus()
    assert "\n" not in str(info.value)
    untrusted.close()
    trusted = source_for(url, ca_file=str(cert))
    assert len(trusted.poll_gpus().gpus) == 2
    trusted.close()


# --------------------------------------------------------------------------- settings


def test_settings_are_checked(tmp_path):
    token = tmp_path / "t"
    token.write_text("x")
    assert PrometheusSettings("https://prom.example.com/prometheus", token_file=str(token)).check({})
    assert PrometheusSettings("http://127.0.0.1:9090", token_file=str(token)).check({})
    for settings, words in [
        (PrometheusSettings("prom.example.com"), "not an http"),
        (PrometheusSettings("ftp://prom.example.com"), "not an http"),
        (PrometheusSettings("https://p.example.com/?x=1"), "no query"),
        (PrometheusSettings("http://prom.example.com", token_file=str(token)), "only sent over https"),
        (PrometheusSettings("https://p.example.com", token_file=str(tmp_path / "none")), "no such file"),
        (PrometheusSettings("https://p.example.com", ca_file=str(tmp_path / "none")), "ca file: no such file"),
        (PrometheusSettings("https://p.example.com", token_file=str(token), username="u"), "not both"),
        (PrometheusSettings("https://p.example.com", timeout=0), "timeout"),
    ]:
        with pytest.raises(ValueError, match=words):
            settings.check({})
    with pytest.raises(ValueError, match="only sent over https"):
        PrometheusSettings("http://prom.example.com").check({TOKEN_ENV: "x"})


def test_value_answers_are_read_without_decoding_each_series_and_match_the_json_reading():
    result = [series(45, UUID=UUID_A), series("7.5", GPU_I_ID="1", UUID=UUID_M), series("NaN", UUID="GPU-c"),
              series("+Inf", UUID="GPU-d")]
    compact = json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}},
                         separators=(",", ":")).encode()
    fast = pa.read_values(compact)
    assert (fast.whole, fast.parts) == ({UUID_A: 45.0}, {(UUID_M, "1"): 7.5}), "NaN and Inf are no values"
    assert fast.labels == {}, "read as typed samples of the key only, no labels kept"
    spaced = json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()
    assert (pa.read_values(spaced).whole, pa.read_values(spaced).parts) == (fast.whole, fast.parts)
    finite = pa.read_values(compact.replace(b'"+Inf"', b'"12"'))
    assert finite.whole == {UUID_A: 45.0, "GPU-d": 12.0} and finite.labels == {}
    whole_only = pa.read_values(compact.replace(b'"GPU_I_ID":"1",', b""))
    assert (whole_only.whole, whole_only.parts, whole_only.labels) == ({UUID_A: 45.0, UUID_M: 7.5}, {}, {})
    # One series with another label: the whole answer is decoded as JSON, nothing is lost.
    mixed = pa.read_values(compact.replace(b'{"UUID":"GPU-a', b'{"Hostname":"n","UUID":"GPU-a'))
    assert (mixed.whole, mixed.parts) == (fast.whole, fast.parts)
    assert mixed.labels[(UUID_A, "")] == {"Hostname": "n", "UUID": UUID_A}
    with pytest.raises(pa.PrometheusAnswerError):
        pa.read_values(b"<html>")


def test_identity_labels_are_decoded_only_where_they_changed():
    a = {"Hostname": "node-a", "UUID": UUID_A, "gpu": "3", "modelName": "NVIDIA H100 80GB HBM3"}
    m = {"Hostname": "node-b", "UUID": UUID_M, "gpu": "0", "modelName": "NVIDIA H100 80GB HBM3"}

    def answer(at: str, pod: str) -> bytes:
        result = [{"metric": {**a, "namespace": "nlp", "pod": pod}, "value": [float(at), "1"]},
                  {"metric": m, "value": [float(at), "1"]}]
        return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}},
                          separators=(",", ":")).encode()

    first = pa.read_roster(answer("1764480000.5", "bert-x"))
    again = pa.read_roster(answer("1764480015.5", "bert-x"), first)
    assert [again.named[k] is first.named[k] for k in first.named] == [True, True], "nothing decoded again"
    moved = pa.read_roster(answer("1764480030.5", "bert-y"), again)
    assert moved.gpus[UUID_A] is not again.gpus[UUID_A] and moved.gpus[UUID_A].pod == "bert-y"
    assert moved.gpus[UUID_M] is again.gpus[UUID_M]
    assert pa.without_times(answer("1764480000.5", "p")) == pa.without_times(answer("1764480015.5", "p"))
    assert pa.without_times(answer("1764480000.5", "p")) != pa.without_times(answer("1764480000.5", "q"))
    # Labels as no Prometheus writes them (a brace in a value): the whole answer is decoded, nothing is lost.
    braces = pa.read_roster(answer("1764480045.5", "odd}{pod"), moved)
    assert braces.gpus[UUID_A].pod == "odd}{pod" and set(braces.gpus) == {UUID_A, UUID_M}


def test_seldom_changing_answers_are_read_again_only_when_they_changed(canned, monkeypatch):
    from gpuconsole.backends.prometheus import source as module

    canned.compact = True  # as Prometheus writes: every sample at the query's time
    canned.answers = fleet_answers()
    monkeypatch.setattr(module, "SLOW_EVERY_S", 0.0)  # everything is due on every poll

    class Moment(threading.Event):
        """The read between polls waits for its moment; here that is when the test settles it
        (due at once, it would race the changes the test makes to the answers)."""

        def wait(self, timeout: float | None = None) -> bool:
            return super().wait()

    monkeypatch.setattr(module, "threading", types.SimpleNamespace(Thread=threading.Thread, Event=Moment,
                                                                    Lock=threading.Lock))
    reads: list[str] = []
    read_values, read_roster = pa.read_values, pa.read_roster
    monkeypatch.setattr(pa, "read_values", lambda body: reads.append("values") or read_values(body))
    monkeypatch.setattr(pa, "read_roster", lambda body, last: reads.append("identity") or read_roster(body, last))
    source = source_for(canned.url)
    first = source.poll_gpus()
    assert reads.count("identity") == 1 and reads.count("values") == len(pm.METRICS)
    source.poll_gpus()  # the second poll plans a read between it and the next
    reads.clear()
    canned.requests.clear()
    source.settle(10)
    assert len(canned.requests) == len(pm.SLOW) + 2, "every seldom-changing query and the identity were sent again"
    assert reads == ["values"], "the unchanged ones were not read again: only the memory used, to size the memory"
    again = source.poll_gpus()
    assert again.gpus == first.gpus
    # A changed power limit and a pod that moved are read by the next read between polls.
    canned.answers[pm.POWER_LIMIT] = [series(350, UUID=UUID_A), series(400, UUID=UUID_M)]
    canned.answers[pm.FB_USED][0]["metric"]["pod"] = "bert-ft-new"
    reads.clear()
    source.settle(10)
    assert sorted(reads) == ["identity", "values", "values"]
    moved = source.poll_gpus()
    assert (moved.gpus[0].power_limit_w, moved.gpus[0].pod) == (350.0, "bert-ft-new")
    source.close()


def test_a_mig_gpu_known_by_its_instances_keeps_its_index_where_whole_gpu_values_come_by_key(canned):
    """DCGM reports memory per MIG instance but temperature and power per GPU, and the value
    queries keep only a series' key: the GPU's node and index still come from the identity."""
    m = {"UUID": UUID_M, "gpu": "5", "Hostname": "node-b", "modelName": "NVIDIA A100-SXM4-80GB"}
    canned.answers = {pm.FB_USED: [series(20000, **m, GPU_I_ID="1", GPU_I_PROFILE="3g.40gb"),
                                   series(0, **m, GPU_I_ID="2", GPU_I_PROFILE="1g.10gb")],
                      pm.TEMP: [series(55, UUID=UUID_M)], pm.POWER: [series(120, UUID=UUID_M)]}
    source = source_for(canned.url)
    (gpu,) = source.poll_gpus().gpus
    source.close()
    assert (gpu.node, gpu.index, gpu.name, gpu.temperature_c, gpu.power_w) == ("node-b", 5, "NVIDIA A100-SXM4-80GB", 55, 120.0)
    assert [s.profile for s in gpu.mig_slices] == ["3g.40gb", "1g.10gb"] and gpu.memory_used_mib == 20000


def _built_one_by_one(columns: dict[str, pa.Column], roster: pa.Roster) -> list[Gpu]:
    """What build_gpus makes of whole GPUs, written GPU by GPU as the rules say."""
    out = []
    for key, ident in roster.gpus.items():
        v = {m: columns[m].whole.get(key) if m in columns else None for m in pm.METRICS}
        gr = round(v[pm.GR_ENGINE] * 100.0, 1) if v[pm.GR_ENGINE] is not None else None
        util = round(v[pm.UTIL], 1) if v[pm.UTIL] is not None else (gr if gr is not None else 0.0)
        used = v[pm.FB_USED] or 0.0
        whole = lambda m: round(v[m]) if v[m] is not None else None  # noqa: E731
        out.append(Gpu(ident.uuid, ident.node, ident.index, ident.model, util, round(used),
                       round(used + (v[pm.FB_FREE] or 0.0) + (v[pm.FB_RESERVED] or 0.0)),
                       int(v[pm.TEMP]) if v[pm.TEMP] is not None else 0,
                       round(v[pm.POWER], 1) if v[pm.POWER] is not None else 0.0,
                       round(v[pm.POWER_LIMIT], 1) if v[pm.POWER_LIMIT] is not None else 0.0,
                       memory_utilization=v[pm.MEM_COPY_UTIL], sm_clock_mhz=whole(pm.SM_CLOCK),
                       memory_clock_mhz=whole(pm.MEM_CLOCK), xid_errors=whole(pm.XID), gr_engine_active=gr,
                       pod=ident.pod, namespace=ident.namespace))
    return out


_VALUE = st.one_of(st.integers(0, 100_000).map(float), st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False))


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 12).flatmap(lambda n: st.tuples(
    st.just(n),
    st.dictionaries(st.sampled_from(pm.METRICS),
                    st.one_of(st.lists(_VALUE, min_size=n, max_size=n).map(lambda vs: dict(enumerate(vs))),
                              st.dictionaries(st.integers(0, n - 1), _VALUE))))))
def test_gpus_built_column_by_column_are_the_gpus_built_one_by_one(fleet):
    """Every metric present for all GPUs, for some, or absent; whole numbers and fractions."""
    n, metrics = fleet
    keys = [f"GPU-{i:04d}" for i in range(n)]
    labels = [{"UUID": k, "Hostname": f"node-{i % 3}", "gpu": str(i), "modelName": "NVIDIA H100 80GB HBM3",
               **({"pod": f"train-{i}", "namespace": "nlp"} if i % 2 else {})} for i, k in enumerate(keys)]
    roster = pa.Roster({(k, ""): pa.Identity(lab, k) for k, lab in zip(keys, labels)})
    columns = {m: pa.Column({keys[i]: value for i, value in values.items()}) for m, values in metrics.items()}
    built = pm.build_gpus(columns, roster)
    expected = _built_one_by_one(columns, roster)
    assert list(built) == expected
    fields = list(Gpu.__struct_fields__)
    assert [[type(getattr(g, f)) for f in fields] for g in built] == [[type(getattr(g, f)) for f in fields] for g in expected]


def test_building_gpus_leaves_the_garbage_collector_as_it_was():
    import gc

    columns, roster = pm.collect(fleet_answers())
    assert gc.isenabled()
    assert len(pm.build_gpus(columns, roster)) == 2
    assert gc.isenabled()
    gc.disable()
    try:
        pm.build_gpus(columns, roster)
        assert not gc.isenabled(), "a collector turned off elsewhere stays off"
    finally:
        gc.enable()
