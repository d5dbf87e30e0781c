"""Kubernetes list pages decoded into the fields gpuconsole reads (``kube_schema``) give the same
records as the full objects, and a page that does not fit falls back without losing the rest."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuconsole.backends.kube import mapping as km
from gpuconsole.backends.kube import schema as kube_schema
from tests import kube_server as ks

STATES = ("pending", "running", "complete", "failed", "suspended")
MIG = st.one_of(st.none(), st.dictionaries(st.sampled_from(["1g.10gb", "3g.40gb", "7g.80gb"]),
                                           st.integers(1, 7), min_size=1, max_size=2))


def page(kind: str, items: list[dict]) -> bytes:
    return json.dumps({"kind": kind, "apiVersion": "v1", "metadata": {"resourceVersion": "7", "continue": "next"},
                       "items": items}).encode()


@st.composite
def jobs_and_pods(draw: st.DrawFn) -> tuple[list[dict], list[dict], list[dict]]:
    cron = ks.cronjob("nightly", "ml", gpus=draw(st.integers(0, 8)), mig=draw(MIG), suspend=draw(st.booleans()),
                      time_zone=draw(st.sampled_from([None, "Europe/Berlin"])), last_schedule=time.time() - 60)
    jobs, pods = [], []
    for n in range(draw(st.integers(1, 4))):
        job = ks.job(f"train-{n}", "ml", gpus=draw(st.integers(0, 8)), mig=draw(MIG), state=draw(st.sampled_from(STATES)),
                     owner=draw(st.sampled_from([None, "alice"])), parallelism=draw(st.sampled_from([None, 1, 4])),
                     cronjob=cron if draw(st.booleans()) else None)
        jobs.append(job)
        placed = draw(st.booleans())
        pods.append(ks.pod_for(job, node="gpu-node-1" if placed else None,
                               phase="Running" if placed else "Pending",
                               unschedulable=None if placed else ks.INSUFFICIENT_GPU,
                               waiting=("ImagePullBackOff", "Back-off pulling") if placed and draw(st.booleans()) else None))
    active = jobs[:draw(st.integers(0, 2))]
    if active:
        cron["status"]["active"] = [{"kind": "Job", "name": j["metadata"]["name"], "uid": j["metadata"]["uid"]}
                                    for j in active]
    return jobs, pods, [cron]


@settings(max_examples=40, deadline=None)
@given(jobs_and_pods())
def test_a_decoded_page_reads_as_the_full_objects_do(objects: tuple[list[dict], list[dict], list[dict]]) -> None:
    for kind, read, items in (("Jobs", km.job_record, objects[0]), ("Pods", km.pod_record, objects[1]),
                              ("CronJobs", km.cronjob_record, objects[2])):
        decoded = kube_schema.decode_page(kind, page(kind, items))
        assert decoded is not None
        assert decoded["metadata"] == {"resourceVersion": "7", "continue": "next"}
        assert [read(o) for o in decoded["items"]] == [read(o) for o in items]


def test_only_the_fields_read_are_kept() -> None:
    pod = ks.pod_for(ks.job("train", "ml"))
    pod["spec"]["volumes"] = [{"name": f"v{n}", "emptyDir": {}} for n in range(100)]
    pod["metadata"]["managedFields"] = [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}]
    decoded = kube_schema.decode_page("Pods", page("PodList", [pod]))
    item = decoded["items"][0]
    assert isinstance(item, kube_schema.Pod)
    assert not hasattr(item.spec, "volumes") and not hasattr(item.metadata, "managedFields")
    assert km.pod_record(item) == km.pod_record(pod)


@pytest.mark.parametrize("odd", [
    {"metadata": {"name": "no-uid"}},
    {"metadata": "not an object"},
    {"metadata": {"name": "odd-status", "uid": "u-1"}, "status": "weird"},
    {"metadata": {"name": "odd-containers", "uid": "u-2"}, "spec": {"containers": {"train": {}}}},
])
def test_a_page_with_an_object_that_does_not_fit_is_decoded_in_full(odd: dict) -> None:
    good = ks.pod_for(ks.job("train", "ml"))
    assert kube_schema.decode_page("Pods", page("PodList", [good, odd])) is None
    assert km.pod_record(good).name.startswith("train-")
    with pytest.raises(ValueError, match=r"\$\."):
        km.pod_record(odd)


def test_kinds_without_structures_are_decoded_in_full() -> None:
    assert kube_schema.decode_page("Nodes", page("NodeList", [ks.node("gpu-node-1")])) is None
    assert kube_schema.decode_page("Jobs", b"not json") is None
