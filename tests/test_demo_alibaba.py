"""The demo's second cloud: an Alibaba Cloud region (cn-hangzhou) beside the seeded EC2 fleet,
which stays exactly as it was (same instances, prices, spend, GPUs and jobs)."""

from __future__ import annotations

from gpuconsole.backends.sim import SimWorld
from gpuconsole.core.ops.actions import ActionKind, ActionRequest
from gpuconsole.model import InstanceState, SourceKind
from gpuconsole.model.cloud import ECS_INSTANCE_ID
from tests.showcase import FrozenClock, showcase_console

START = 1_790_000_000.0


def _worlds(steps: int) -> tuple[SimWorld, SimWorld]:
    plain = SimWorld(seed=7, start=START, serving=True)
    both = SimWorld(seed=7, start=START, serving=True, alibaba=True)
    plain.step(steps)
    both.step(steps)
    return plain, both


def test_the_seeded_aws_part_is_the_same_with_the_region_or_without() -> None:
    plain, both = _worlds(120)
    aws = {i.instance_id: i for i in plain.cloud_reading().instances}
    mixed = {i.instance_id: i for i in both.cloud_reading().instances}
    assert {k: mixed[k] for k in aws} == aws  # same instances, prices, spend, billing
    assert {i.cloud for i in aws.values()} == {"aws"}
    gpus = {g.uuid: g for g in both.gpu_reading().gpus}
    assert {g.uuid: gpus[g.uuid] for g in plain.gpu_reading().gpus} == {g.uuid: g for g in plain.gpu_reading().gpus}
    assert both.jobs_reading().jobs == plain.jobs_reading().jobs
    assert both.jobs_reading().nodes == plain.jobs_reading().nodes


def test_the_region_holds_a10_and_t4_inference_nodes_and_an_a100_training_node() -> None:
    _, both = _worlds(30)
    ali = [i for i in both.cloud_reading().instances if i.cloud == "alibaba"]
    assert sorted((i.instance_type, i.gpus, i.gpu_model) for i in ali) == [
        ("ecs.gn6i-c4g1.xlarge", 1, "Tesla T4"),
        ("ecs.gn7e-c16g1.32xlarge", 8, "NVIDIA A100-SXM4-80GB"),
        ("ecs.gn7i-c8g1.2xlarge", 1, "NVIDIA A10"),
    ]
    for inst in ali:
        assert ECS_INSTANCE_ID.fullmatch(inst.instance_id), inst.instance_id
        assert (inst.region, inst.availability_zone[:-2]) == ("cn-hangzhou", "cn-hangzhou")
        assert inst.state is InstanceState.RUNNING and inst.bills_now and inst.accrued_cost > 0
        assert inst.tag("Project") in ("imaging", "research")
    nodes = {i.node for i in ali}
    busy = [g for g in both.gpu_reading().gpus if g.node in nodes]
    assert len(busy) == 10 and all(g.utilization > 20 for g in busy)


def test_stopping_a_hangzhou_instance_goes_through_the_action_path_and_its_gpus_stop_reporting() -> None:
    clock = FrozenClock()
    console = showcase_console(clock=clock)
    try:
        console.refresh()
        cloud = console.source(SourceKind.CLOUD)
        t4 = next(i for i in cloud.poll_instances().instances if i.instance_type == "ecs.gn6i-c4g1.xlarge")
        result = console.services.cloud.perform(ActionRequest(ActionKind.STOP, t4.instance_id, "cn-hangzhou", "yes"))
        assert result.ok, result
        clock.advance(120)
        after = {i.instance_id: i for i in cloud.poll_instances().instances}[t4.instance_id]
        assert after.state is InstanceState.STOPPED and not after.bills_now
        gpus = console.source(SourceKind.GPUS).poll_gpus().gpus
        assert t4.node not in {g.node for g in gpus}
        assert "cn-hangzhou" in {g.node.split(".")[0] for g in gpus}  # the other two still report
    finally:
        console.close()


def test_an_ack_node_is_told_apart_by_its_address():
    from gpuconsole.ui.format import short_node

    assert short_node("cn-hangzhou.192.168.0.223") == "192.168.0.223"
    assert short_node("ip-10-0-1-23.ec2.internal") == "ip-10-0-1-23"
    assert short_node("gpu-node-7") == "gpu-node-7"
