"""The demo's third cloud: an Azure region (eastus) beside the seeded EC2 fleet and the Alibaba
Cloud region, which stay exactly as they were; one of its VMs is stopped but not deallocated, so
it still bills, until a stop (Azure's deallocate) through the action path ends that."""

from __future__ import annotations

import io
import json
import re
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from rich.style import Style

from gpuconsole.backends.sim import SimWorld
from gpuconsole.cli.main import main
from gpuconsole.core.money import costs
from gpuconsole.core.ops.actions import ActionError, ActionKind, ActionRequest, autopilot_confirmation
from gpuconsole.core.ops.autopilot.actuator import CloudActuator
from gpuconsole.model import InstanceState, Market, SourceKind
from gpuconsole.ui.panes.instances import refusal
from gpuconsole.ui.palette import Palette
from gpuconsole.ui.panes.overview import instances_card
from tests.showcase import FrozenClock, showcase_console
from tests.test_autopilot import sim_console, step

PALETTE = Palette(*[Style()] * 6)

START = 1_790_000_000.0
ARM_VM = re.compile(r"/subscriptions/[0-9a-f-]{36}/resourceGroups/rg-[a-z]+/providers/Microsoft\.Compute/"
                    r"virtualMachines/(?P<name>[a-z0-9-]+)")
NOTEBOOK = "eus-notebook-a100x2"  # shut down from inside: stopped, still allocated and billed


def _worlds(steps: int) -> tuple[SimWorld, SimWorld]:
    two = SimWorld(seed=7, start=START, serving=True, alibaba=True)
    three = SimWorld(seed=7, start=START, serving=True, alibaba=True, azure=True)
    two.step(steps)
    three.step(steps)
    return two, three


def _azure(world: SimWorld) -> dict[str, object]:
    return {i.name: i for i in world.cloud_reading().instances if i.cloud == "azure"}


def test_the_other_clouds_are_the_same_with_the_region_or_without() -> None:
    two, three = _worlds(120)
    before = {i.instance_id: i for i in two.cloud_reading().instances}
    mixed = {i.instance_id: i for i in three.cloud_reading().instances}
    assert {k: mixed[k] for k in before} == before  # same instances, prices, spend, billing
    gpus = {g.uuid: g for g in three.gpu_reading().gpus}
    assert {g.uuid: gpus[g.uuid] for g in two.gpu_reading().gpus} == {g.uuid: g for g in two.gpu_reading().gpus}
    assert three.jobs_reading().jobs == two.jobs_reading().jobs
    assert three.jobs_reading().nodes == two.jobs_reading().nodes
    again = SimWorld(seed=7, start=START, serving=True, alibaba=True, azure=True)
    again.step(120)
    assert again.cloud_reading() == three.cloud_reading() and again.gpu_reading() == three.gpu_reading()


def test_the_region_holds_nc_a100_v4_and_nc_t4_v3_vms_by_arm_id() -> None:
    _, three = _worlds(30)
    vms = _azure(three)
    assert sorted((i.instance_type, i.gpus, i.gpu_model) for i in vms.values()) == [
        ("Standard_NC24ads_A100_v4", 1, "NVIDIA A100 80GB PCIe"),
        ("Standard_NC48ads_A100_v4", 2, "NVIDIA A100 80GB PCIe"),
        ("Standard_NC4as_T4_v3", 1, "Tesla T4"),
        ("Standard_NC64as_T4_v3", 4, "Tesla T4"),
        ("Standard_NC96ads_A100_v4", 4, "NVIDIA A100 80GB PCIe"),
    ]
    for name, vm in vms.items():
        found = ARM_VM.fullmatch(vm.instance_id)
        assert found and found["name"] == name == vm.node, vm.instance_id
        assert vm.region == "eastus" and vm.availability_zone.startswith("eastus-") and vm.currency == "USD"
        assert vm.tag("Owner") and vm.tag("Project") and vm.tag("Budget") == vm.tag("Project")
    assert len({ARM_VM.fullmatch(v.instance_id)["name"] for v in vms.values()}) == len(vms)
    [spot] = [v for v in vms.values() if v.market is Market.SPOT]
    assert spot.stoppable_spot and 0 < spot.price_per_hour < 3.673  # under pay-as-you-go
    assert vms["eus-infer-t4"].price_per_hour == 0.526  # East US, Linux, pay-as-you-go
    running = {v.node for v in vms.values() if v.state is InstanceState.RUNNING}
    assert len(running) == 4
    busy = [g for g in three.gpu_reading().gpus if g.node in running]
    assert len(busy) == 10 and all(g.utilization > 20 and g.processes for g in busy)
    assert not [g for g in three.gpu_reading().gpus if g.node == NOTEBOOK]  # powered off: no GPU reports


def test_a_vm_stopped_but_not_deallocated_bills_on() -> None:
    _, three = _worlds(0)
    first = _azure(three)[NOTEBOOK]
    three.step(3600)
    later = _azure(three)[NOTEBOOK]
    assert later.state is InstanceState.STOPPED and later.stopped_bills and later.bills_now
    assert later.accrued_cost - first.accrued_cost == pytest.approx(7.346)  # an hour of Standard_NC48ads_A100_v4
    assert later.billing[-1].end is None
    assert costs.burn_per_hour([later]) == 7.346


def test_snapshot_json_shows_the_azure_vms_and_the_one_still_billed_while_stopped(tmp_path: Path) -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["snapshot", "--demo", "--no-db", "--json", "--demo-at", "2026-11-16T14:00Z"])
    assert code == 0
    doc = json.loads(out.getvalue())
    azure = {i["name"]: i for i in doc["instances"] if i["cloud"] == "azure"}
    assert len(azure) == 5 and all(ARM_VM.fullmatch(i["instance_id"]) for i in azure.values())
    assert {n: (i["state"], i["bills_now"]) for n, i in azure.items() if i["state"] != "running"} == {
        NOTEBOOK: ("stopped", True)}
    assert {i["cloud"] for i in doc["instances"]} == {"aws", "alibaba", "azure"}
    billed = sum(i["price_per_hour"] for i in doc["instances"] if i["bills_now"])
    assert doc["spend"]["burn_per_hour"] == pytest.approx(billed)  # the stopped VM's $/h among them


def test_a_stop_through_the_action_path_deallocates_it_and_the_overview_stops_counting_it() -> None:
    clock = FrozenClock()
    console = showcase_console(clock=clock)
    try:
        console.hub.poll_once()
        first = console.compose()
        vm = next(i for i in first.instances if i.name == NOTEBOOK)
        assert vm.state is InstanceState.STOPPED and vm.bills_now
        assert refusal(ActionKind.STOP, vm) is None  # the Instances pane offers the stop
        assert refusal(ActionKind.START, vm) is None
        assert first.burn_per_hour == costs.burn_per_hour(first.instances)
        card = instances_card(first, PALETTE).plain
        assert "1 stopped, still billed" in card
        up = sum(1 for i in first.instances if i.state.billed and i.market is Market.ON_DEMAND)
        assert f"{up} on-demand" in card  # the running ones, as the Instances pane counts them
        # The overview's spend today holds the 14 hours since midnight it has billed while stopped.
        now = first.taken_at
        others = [i for i in first.instances if i.name != NOTEBOOK]
        assert first.spend_today - costs.spend(others, costs.day_start(now), now) == pytest.approx(7.346 * 14, abs=0.01)
        result = console.services.cloud.perform(ActionRequest(ActionKind.STOP, vm.instance_id, "eastus", "yes"))
        assert result.ok, result
        clock.advance(120)
        console.hub.poll_once()
        after = console.compose()
        gone = next(i for i in after.instances if i.name == NOTEBOOK)
        assert gone.state is InstanceState.STOPPED and not gone.bills_now and not gone.stopped_bills
        assert after.burn_per_hour == pytest.approx(first.burn_per_hour - 7.346)
        assert refusal(ActionKind.STOP, gone) is not None  # deallocated: nothing left to stop
        assert "still billed" not in instances_card(after, PALETTE).plain
        clock.advance(3600)
        cloud = console.source(SourceKind.CLOUD)
        idle = {i.name: i for i in cloud.poll_instances().instances}[NOTEBOOK]
        assert idle.accrued_cost == gone.accrued_cost  # deallocated: its compute bills no more
    finally:
        console.close()


def test_start_stop_and_terminate_a_running_vm() -> None:
    clock = FrozenClock()
    console = showcase_console(clock=clock)
    try:
        console.refresh()
        cloud = console.source(SourceKind.CLOUD)
        vm = next(i for i in cloud.poll_instances().instances if i.name == "eus-infer-t4")
        ops = console.services.cloud
        assert ops.perform(ActionRequest(ActionKind.STOP, vm.instance_id, "eastus", "yes")).ok
        clock.advance(120)
        stopped = {i.name: i for i in cloud.poll_instances().instances}["eus-infer-t4"]
        assert stopped.state is InstanceState.STOPPED and not stopped.bills_now
        assert vm.node not in {g.node for g in console.source(SourceKind.GPUS).poll_gpus().gpus}
        assert ops.perform(ActionRequest(ActionKind.START, vm.instance_id, "eastus", "yes")).ok
        clock.advance(120)
        started = {i.name: i for i in cloud.poll_instances().instances}["eus-infer-t4"]
        assert started.state is InstanceState.RUNNING and started.bills_now
        assert vm.node in {g.node for g in console.source(SourceKind.GPUS).poll_gpus().gpus}
        assert ops.perform(ActionRequest(ActionKind.TERMINATE, vm.instance_id, "eastus", vm.instance_id)).ok
        clock.advance(120)
        ended = {i.name: i for i in cloud.poll_instances().instances}["eus-infer-t4"]
        assert ended.state is InstanceState.TERMINATED and not ended.bills_now
    finally:
        console.close()


def test_idle_stop_deallocates_the_vm_stopped_but_still_billed(tmp_path: Path) -> None:
    clock = FrozenClock()
    rule = {"name": "speech-idle", "kind": "idle-stop", "scope": "tag:Project=speech", "idle_for": "1m"}
    console = sim_console((rule,), clock, tmp_path)
    try:
        decisions = []
        for _ in range(6):
            snapshot = step(console, clock, 15)
            decisions += console.services.autopilot.engine.tick(snapshot, CloudActuator(console.services.cloud))
        [acted] = [d for d in decisions if d.verb == "stop"]
        vm = next(i for i in snapshot.instances if i.name == NOTEBOOK)
        assert acted.ok and acted.targets == (vm.instance_id,), acted  # the busy trainer is left running
        [request] = [r.request for r in console.services.cloud.log.recent() if r.request.kind is ActionKind.STOP]
        assert request.target == vm.instance_id and request.confirmation == autopilot_confirmation("speech-idle")
        after = step(console, clock, 120)
        vm = next(i for i in after.instances if i.name == NOTEBOOK)
        assert vm.state is InstanceState.STOPPED and not vm.bills_now  # deallocated, never only powered off
    finally:
        console.close()


def test_an_a100_pcie_is_named_short_like_the_sxm_one() -> None:
    from gpuconsole.ui.format import short_model

    assert short_model("NVIDIA A100 80GB PCIe") == short_model("NVIDIA A100-SXM4-80GB") == "A100-80GB"
    assert short_model("Tesla T4") == "T4" and short_model("NVIDIA H100 80GB HBM3") == "H100-80GB"


def test_power_off_keeps_a_vm_allocated_and_billed_until_a_stop_deallocates_it() -> None:
    clock = FrozenClock()
    console = showcase_console(clock=clock)
    try:
        cloud = console.source(SourceKind.CLOUD)
        ops = console.services.cloud
        by_name = {i.name: i for i in cloud.poll_instances().instances}
        vm, ec2 = by_name["eus-infer-t4x4"], by_name["train-h100-01"]
        result = ops.perform(ActionRequest(ActionKind.POWER_OFF, vm.instance_id, "eastus", "yes"))
        assert result.ok and "still bills" in result.message, result
        clock.advance(120)
        off = {i.name: i for i in cloud.poll_instances().instances}["eus-infer-t4x4"]
        assert off.state is InstanceState.STOPPED and off.stopped_bills and off.bills_now
        assert vm.node not in {g.node for g in console.source(SourceKind.GPUS).poll_gpus().gpus}
        clock.advance(3600)
        later = {i.name: i for i in cloud.poll_instances().instances}["eus-infer-t4x4"]
        assert later.accrued_cost - off.accrued_cost == pytest.approx(4.352)  # an hour, powered off
        assert ops.perform(ActionRequest(ActionKind.STOP, vm.instance_id, "eastus", "yes")).ok  # deallocate
        clock.advance(120)
        gone = {i.name: i for i in cloud.poll_instances().instances}["eus-infer-t4x4"]
        assert gone.state is InstanceState.STOPPED and not gone.bills_now
        with pytest.raises(ActionError, match="power-off is not offered by this cloud"):  # EC2 has no power-off apart from stop
            ops.perform(ActionRequest(ActionKind.POWER_OFF, ec2.instance_id, ec2.region, "yes"))
        assert {i.name: i for i in cloud.poll_instances().instances}["train-h100-01"].state is InstanceState.RUNNING
    finally:
        console.close()
