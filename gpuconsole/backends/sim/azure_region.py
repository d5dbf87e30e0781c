"""The demo's third cloud: an Azure subscription's eastus region beside the EC2 fleet.

Standalone GPU virtual machines of two families, NC A100 v4 (one, two or four A100 80GB PCIe)
and NC T4 v3 (one or four Tesla T4), each known by its ARM resource id
(``/subscriptions/…/resourceGroups/…/providers/Microsoft.Compute/virtualMachines/NAME``) with the
VM's name as its name and its host name as the node its GPUs report from. One VM is a Spot VM
(evicted by deallocation), and one was shut down from inside: Azure calls it "stopped", keeps
its hardware allocated and bills its compute until it is deallocated, so the overview shows what
it still costs. Stopping a VM here deallocates it (compute billing ends), as the console's stop
means on Azure; idle-stop and a budget's stop-all deallocate the stopped-but-allocated one too.

Azure's power states in the console's words: starting is pending, running is running, stopping
and deallocating are stopping, stopped is stopped and still billed, deallocated is stopped and
not billed. Its instances, ids, GPUs and telemetry come from generators of its own
(:mod:`.cloud_region`), so the rest of the seeded world is the same with the region or without.
"""

from __future__ import annotations

import math

from gpuconsole.backends.sim import catalog
from gpuconsole.backends.sim.cloud_region import CloudRegion
from gpuconsole.backends.sim.state import SimInstance
from gpuconsole.backends.sim.workload import NEMO, PYTORCH, TRITON
from gpuconsole.model import InstanceState, Market

REGION = "eastus"
ZONES = ("eastus-1", "eastus-2", "eastus-3")  # Azure's zones 1, 2 and 3 of the region
ARM_ID = "/subscriptions/{sub}/resourceGroups/{group}/providers/Microsoft.Compute/virtualMachines/{name}"
SPOT_DISCOUNT = (0.6, 0.8)  # a Spot VM's price below pay-as-you-go: the simulator's own draw


_OD, _SPOT = Market.ON_DEMAND, Market.SPOT
# (name, size, zone, owner, project, resource group, days since launch, what runs on it, market,
# hours since it was shut down from inside, or None while it runs). The speech team trains and
# batches here and the imaging team serves (no demo rule or team budget names either, so the
# autopilot leaves them be and the fleet budget stays under its limit with them); bob's
# notebook VM was shut down from inside last night and is still billed.
VMS = (
    ("eus-train-a100x4", "Standard_NC96ads_A100_v4", "eastus-1", "priya", "speech", "rg-speech", 2.5, NEMO, _OD, None),
    ("eus-infer-t4", "Standard_NC4as_T4_v3", "eastus-2", "chen", "imaging", "rg-imaging", 12.0, TRITON, _OD, None),
    ("eus-infer-t4x4", "Standard_NC64as_T4_v3", "eastus-3", "chen", "imaging", "rg-imaging", 7.0, TRITON, _OD, None),
    ("eus-batch-a100", "Standard_NC24ads_A100_v4", "eastus-2", "alice", "speech", "rg-speech", 0.8, PYTORCH, _SPOT, None),
    ("eus-notebook-a100x2", "Standard_NC48ads_A100_v4", "eastus-1", "bob", "speech", "rg-speech", 4.0, PYTORCH, _OD, 18.0),
)


class AzureRegion(CloudRegion):
    """The :data:`VMS` of one subscription as they stand at ``start`` (the world's start), drawn
    from the ``seed``'s own Azure generators."""

    def __init__(self, seed: int, start: float) -> None:
        super().__init__(seed, "azure")
        self.subscription = self.ids.uuid4()
        for name, size, zone, owner, project, group, days, image, market, off_hours in VMS:
            launch = math.floor(start - days * 86400.0 - self.rng.uniform(0, 6 * 3600.0))
            inst = self._vm(size, zone, market, launch, name, owner, project, group)
            if off_hours is not None:
                self.power_off(inst, math.floor(start - off_hours * 3600.0))
                self.instances.append(inst)
                continue
            self.join(inst, inst.launch_time)
            for g in inst.gpus:
                self.run(g, inst, image, start)
            self.instances.append(inst)
        self.warm_up()

    def vm_id(self, group: str, name: str) -> str:
        """The VM's ARM resource id in the region's subscription."""
        return ARM_ID.format(sub=self.subscription, group=group, name=name)

    def _vm(self, size: str, zone: str, market: Market, launch: float, name: str, owner: str, project: str,
            group: str) -> SimInstance:
        spec = catalog.INSTANCE_TYPE_BY_NAME[size]
        price = spec.on_demand_price
        if market is Market.SPOT:
            price = round(price * (1.0 - self.rng.uniform(*SPOT_DISCOUNT)), 4)
        tags = (("Owner", owner), ("Project", project), ("Budget", project))
        inst = SimInstance(self.vm_id(group, name), spec, catalog.gpu_model_of(size), zone, market, price, launch,
                           name, tags, name)  # its GPUs report from its host name, the VM's name
        # A Spot VM evicted by deallocation: stopped and started like a pay-as-you-go one.
        inst.persistent = market is Market.SPOT
        inst.managed = False  # no scale set replaces it
        inst.set_state(InstanceState.RUNNING, launch + self.rng.randint(40, 90))
        return inst

    def power_off(self, inst: SimInstance, ts: float) -> None:
        """Shut down from inside (or powered off): Azure's "stopped", still allocated and billed."""
        inst.set_state(InstanceState.STOPPING, ts)
        inst.stopped_bills = True
        inst.set_state(InstanceState.STOPPED, ts + self.rng.randint(20, 60))
        self.leave(inst)
