"""A scale rule and the queues: ``autopilot run --once`` on a moto server and the Kubernetes API
test server serving Kueue. GPUs waiting on their queue's quota never make the rule launch (its
plan says they wait on quota); GPUs waiting for capacity beside them still do."""

from __future__ import annotations

from typing import Any

import pytest

from gpuconsole.core.ops.autopilot.rules import RuleError, rule_from_table
from tests import kube_queues as kq
from tests import kube_server as ks
from tests.aws_peer import AwsPeer
from tests.test_autopilot_cloud import home, run_once  # noqa: F401 - the fixture

pytestmark = pytest.mark.slow


def team_a_over_quota(kube: Any) -> None:
    """Queue team-a (namespace ml) uses all of its 16 GPUs; a 4-GPU Job waits on its quota."""
    kube.server.kueue = "v1beta2"
    kube.add(kq.cluster_queue("team-a", gpus=16, used=16, pending=1, admitted=4), kq.local_queue("team-a", "ml", "team-a"))
    job = kube.server.add(kq.queued(ks.job("sweep", "ml", gpus=4), "team-a"))
    kube.server.add(kq.workload(job, "team-a"))


def test_work_waiting_on_quota_never_launches_and_the_plan_says_so(home, aws_peer: AwsPeer, kube: Any) -> None:  # noqa: F811
    team_a_over_quota(kube)
    [decision] = run_once(home)
    assert decision["decision"] == "none", decision["reason"]
    assert decision["figures"]["pending_gpus"] == 0 and decision["figures"]["quota_pending_gpus"] == 4
    assert "4 GPU(s) wait on their queue's quota, which more instances would not start" in decision["reason"]
    assert aws_peer.proxy.sent("RunInstances") == []


def test_work_waiting_for_capacity_beside_it_still_launches(home, aws_peer: AwsPeer, kube: Any) -> None:  # noqa: F811
    team_a_over_quota(kube)
    admitted = kube.server.add(kq.queued(ks.job("fits", "ml", gpus=2), "team-a"))
    kube.server.modify("Job", "fits", "ml", {"spec": {"suspend": False}, "status": {"active": 1}})
    kube.add(kq.workload(admitted, "team-a", state="admitted", cluster="team-a"),
             ks.pod_for(admitted, node=None, phase="Pending", unschedulable=ks.INSUFFICIENT_GPU))
    [decision] = run_once(home)
    assert decision["decision"] == "launch" and decision["ok"] is True, decision
    assert decision["figures"]["pending_gpus"] == 2 and decision["figures"]["quota_pending_gpus"] == 4
    assert len(aws_peer.proxy.sent("RunInstances")) == 1


def test_quota_pending_gpus_cannot_be_a_scale_out_condition() -> None:
    table = {"name": "p", "kind": "scale", "pool": "tag:Pool=train", "scope": "queue:team-a",
             "scale_out": "quota_pending_gpus > 0",
             "launch": {"type": "g5.xlarge", "region": "us-east-1", "ami": "ami-0abc1234"}}
    with pytest.raises(RuleError, match="quota_pending_gpus cannot launch instances"):
        rule_from_table(table)
    table.update(scale_out="pending_gpus > 0", scale_in="quota_pending_gpus == 0 and idle_gpus >= 2")
    rule = rule_from_table(table)
    assert rule.jobs.text() == "queue:team-a"
