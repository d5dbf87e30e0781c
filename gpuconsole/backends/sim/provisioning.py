"""What the simulated account offers a launch: zones, prices, networks, keys and images, and the
launch itself, checked the way EC2 checks a ``RunInstances`` request.

Everything drawn here (resource ids, spot price histories) comes from generators of its own,
seeded from the world's seed, so adding or using provisioning never changes what the rest of
the world does: the fleet, the jobs and the telemetry replay exactly as before.
"""

from __future__ import annotations

import math
import random
import re

from gpuconsole.backends.base import BackendError, CapacityError, DryRunFailed
from gpuconsole.backends.sim import catalog
from gpuconsole.backends.sim.actions import Actions, instance_model
from gpuconsole.backends.sim.ids import IdFactory
from gpuconsole.model import (
    Instance,
    InstanceState,
    InstanceType,
    KeyPair,
    LaunchSpec,
    MachineImage,
    Market,
    RegionPrice,
    SecurityGroup,
    SpotPrice,
    Subnet,
    Workload,
)

SPOT_HISTORY_DAYS = 14  # how far back the simulated spot price history reaches
_AMI = re.compile(r"^ami-(?:[0-9a-f]{8}|[0-9a-f]{17})$")
_ROOT_MIN_GIB = 8
_MAX_COUNT = 100


class Provisioning(Actions):
    """The provisioning side of :class:`~gpuconsole.backends.sim.world.SimWorld`.

    Attributes:
        no_capacity: ``(instance_type, zone)`` pairs where a launch fails with
            ``InsufficientInstanceCapacity``; tests and demos change it freely.
    """

    seed: int
    no_capacity: set[tuple[str, str]]
    _born_at: float
    _vpcs: dict[str, str]
    _subnets: dict[str, tuple[Subnet, ...]]
    _groups: dict[str, tuple[SecurityGroup, ...]]
    _images: dict[str, MachineImage]
    _spot_history: dict[tuple[str, str], tuple[SpotPrice, ...]]

    def _init_provisioning(self) -> None:
        """Build the account's networks and images from a generator of their own."""
        ids = IdFactory(random.Random(f"{self.seed}:provisioning"))
        self.no_capacity = set(catalog.NO_CAPACITY_AT_START)
        self._born_at = self._now
        self._vpcs = {}
        self._subnets = {}
        self._groups = {}
        self._images = {}
        self._spot_history = {}
        for region, zones in catalog.REGIONS.items():
            vpc = self._vpcs[region] = ids.resource_id("vpc")
            second = catalog.VPC_SECOND_OCTET.get(region, 2)
            self._subnets[region] = tuple(
                Subnet(ids.resource_id("subnet"), vpc, az, f"10.{second}.{16 * (ord(az[-1]) - ord('a'))}.0/20",
                       name=f"default-{az}", default_for_az=True, available_ips=4091 - 37 * (k + 1))
                for k, az in enumerate(zones)
            )
            self._groups[region] = tuple(SecurityGroup(ids.resource_id("sg"), name, vpc, description)
                                         for name, description in catalog.SECURITY_GROUPS)
            self._images[region] = MachineImage(ids.resource_id("ami"), catalog.DLAMI_NAME, catalog.DLAMI_SSM_PATH)

    # ----------------------------------------------------------------- what is offered

    def _region(self, region: str) -> tuple[str, ...]:
        zones = catalog.REGIONS.get(region)
        if zones is None:
            raise ValueError(f"InvalidRegion: the region '{region}' is not enabled for this account; "
                             f"enabled: {', '.join(catalog.REGIONS)}")
        return zones

    def offered_zones(self, instance_type: str, region: str) -> tuple[str, ...]:
        zones = self._region(region)
        return tuple(z for z in catalog.OFFERINGS.get(instance_type, ()) if z in zones)

    def region_types(self, region: str) -> tuple[InstanceType, ...]:
        """The GPU types sold in ``region``, described as DescribeInstanceTypes describes them."""
        self._region(region)
        return tuple(
            InstanceType(t.name, catalog.EC2_GPU_NAME.get(t.gpu_model, t.gpu_model), t.gpu_count,
                         t.gpu_memory_gib, t.vcpus, t.memory_gib, t.on_demand_price, t.network, t.nvme_gb,
                         t.nvlink)
            for t in catalog.INSTANCE_TYPES if self.offered_zones(t.name, region)
        )

    def region_prices(self, regions: tuple[str, ...]) -> tuple[RegionPrice, ...]:
        return tuple(RegionPrice(t.name, region, t.on_demand_price)
                     for region in regions for t in self.region_types(region))

    def zone_offerings(self, region: str, instance_types: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
        """Zones offering each type; a type offered nowhere in the region maps to ``()``."""
        return {name: self.offered_zones(name, region) for name in instance_types}

    def spot_history(self, region: str, instance_types: tuple[str, ...], since: float) -> tuple[SpotPrice, ...]:
        """Price changes since ``since`` (and the price in effect then), newest first."""
        out: list[SpotPrice] = []
        for name in instance_types:
            if name not in catalog.INSTANCE_TYPE_BY_NAME:
                continue
            for az in self.offered_zones(name, region):
                points = self._history(name, az)
                before = [p for p in points if p.ts <= since]
                out.extend(p for p in points if p.ts > since)
                if before:
                    out.append(before[-1])
        out.sort(key=lambda p: (-p.ts, p.instance_type, p.availability_zone))
        return tuple(out)

    def _history(self, instance_type: str, az: str) -> tuple[SpotPrice, ...]:
        """A believable history ending at today's price: a change every few hours, a few percent
        each, never above 80 % nor below 25 % of on-demand. Fixed by the seed, type and zone."""
        key = (instance_type, az)
        points = self._spot_history.get(key)
        if points is None:
            rng = random.Random(f"{self.seed}:spot:{instance_type}:{az}")
            on_demand = catalog.INSTANCE_TYPE_BY_NAME[instance_type].on_demand_price
            price = self._spot_prices[key]
            ts = math.floor(self._born_at - rng.uniform(600.0, 3 * 3600.0))
            oldest = self._born_at - SPOT_HISTORY_DAYS * 86400.0
            rows = []
            while ts > oldest:
                rows.append(SpotPrice(instance_type, az, round(price, 4), float(ts)))
                price = min(0.8 * on_demand, max(0.25 * on_demand, price * (1.0 + rng.uniform(-0.06, 0.06))))
                ts -= math.floor(rng.uniform(1.0, 9.0) * 3600.0)
            points = self._spot_history[key] = tuple(reversed(rows))
        return points

    def region_subnets(self, region: str) -> tuple[Subnet, ...]:
        self._region(region)
        return self._subnets[region]

    def region_security_groups(self, region: str) -> tuple[SecurityGroup, ...]:
        self._region(region)
        return self._groups[region]

    def region_key_pairs(self, region: str) -> tuple[KeyPair, ...]:
        self._region(region)
        return tuple(KeyPair(name, key_type) for name, key_type in catalog.KEY_PAIRS)

    def region_image(self, region: str, workload: Workload) -> MachineImage:
        """The Deep Learning Base AMI (one image serves training and inference alike)."""
        self._region(region)
        return self._images[region]

    # ----------------------------------------------------------------- launching

    def _refusal(self, spec: LaunchSpec) -> tuple[str, str]:
        """The zone ``spec`` lands in, and EC2's refusal of it ("" when it would pass)."""
        zones = catalog.REGIONS.get(spec.region)
        if zones is None:
            return "", f"InvalidRegion: the region '{spec.region}' is not enabled for this account"
        if spec.instance_type not in catalog.INSTANCE_TYPE_BY_NAME:
            return "", f"InvalidParameterValue: Invalid value '{spec.instance_type}' for InstanceType."
        if not _AMI.match(spec.image_id):
            return "", f"InvalidAMIID.Malformed: Invalid id: \"{spec.image_id}\" (expecting \"ami-...\")"
        if not 1 <= spec.count <= _MAX_COUNT:
            return "", f"InvalidParameterValue: MinCount and MaxCount must be between 1 and {_MAX_COUNT}"
        if spec.root_volume_gib < _ROOT_MIN_GIB:
            return "", (f"InvalidBlockDeviceMapping: Volume of size {spec.root_volume_gib}GB is smaller than "
                        f"snapshot, expect size >= {_ROOT_MIN_GIB}GB")
        if spec.key_name and spec.key_name not in {name for name, _ in catalog.KEY_PAIRS}:
            return "", f"InvalidKeyPair.NotFound: The key pair '{spec.key_name}' does not exist"
        subnets = self._subnets[spec.region]
        az = spec.availability_zone
        if spec.subnet_id:
            subnet = next((s for s in subnets if s.subnet_id == spec.subnet_id), None)
            if subnet is None:
                return "", f"InvalidSubnetID.NotFound: The subnet ID '{spec.subnet_id}' does not exist"
            az = subnet.availability_zone
        elif az and az not in zones:
            return "", f"InvalidParameterValue: Invalid availability zone: [{az}]"
        known_groups = {g.group_id for g in self._groups[spec.region]}
        for group in spec.security_group_ids:
            if group not in known_groups:
                return az, f"InvalidGroup.NotFound: The security group '{group}' does not exist"
        if spec.market is Market.SPOT and spec.max_spot_price is not None and spec.max_spot_price <= 0:
            return az, "InvalidParameterValue: The Spot price must be more than 0"
        offered = self.offered_zones(spec.instance_type, spec.region)
        if not offered:
            return az, (f"Unsupported: Your requested instance type ({spec.instance_type}) is not supported "
                        f"in {spec.region}.")
        if not az:
            az = next((z for z in offered if (spec.instance_type, z) not in self.no_capacity), offered[0])
        elif az not in offered:
            return az, (f"Unsupported: Your requested instance type ({spec.instance_type}) is not supported in "
                        f"your requested Availability Zone ({az}). Please retry your request by not "
                        f"specifying an Availability Zone or choosing {', '.join(offered)}.")
        return az, ""

    def launch_spec(self, spec: LaunchSpec, dry_run: bool = False) -> tuple[Instance, ...]:
        """Run ``spec`` as ``RunInstances`` would: ``()`` for a dry run that would pass.

        Raises:
            DryRunFailed: a dry run EC2 would refuse.
            CapacityError: no capacity for the type in the zone (a dry run does not check).
            BackendError: any other refusal.
        """
        az, refusal = self._refusal(spec)
        if refusal:
            raise DryRunFailed(refusal) if dry_run else BackendError(refusal)
        if dry_run:
            return ()
        itype = spec.instance_type
        if (itype, az) in self.no_capacity:
            others = [z for z in self.offered_zones(itype, spec.region)
                      if z != az and (itype, z) not in self.no_capacity]
            hint = f" or choosing {', '.join(others)}" if others else ""
            raise CapacityError(
                f"InsufficientInstanceCapacity: We currently do not have sufficient {itype} capacity in the "
                f"Availability Zone you requested ({az}). Our system will be working on provisioning "
                f"additional capacity. You can currently get {itype} capacity by not specifying an "
                f"Availability Zone in your request{hint}.")
        if spec.market is Market.SPOT and spec.max_spot_price is not None:
            current = self._spot_prices[(itype, az)]
            if spec.max_spot_price < current:
                raise BackendError(
                    f"SpotMaxPriceTooLow: Your Spot request price of {spec.max_spot_price:g} is lower than the "
                    f"minimum required Spot request fulfillment price of {current:g}.")
        name = spec.tag("Name") or ""
        owner = spec.tag("Owner") or ""
        project = spec.tag("Project") or ""
        out = []
        for _ in range(spec.count):
            inst = self._launch(itype, az, spec.market, self._now, name, owner, project)
            inst.tags = tuple(spec.tags)
            inst.managed = False
            out.append(instance_model(inst, self._now))
        return tuple(out)

    # ----------------------------------------------------------------- instance actions

    def checked_id(self, region: str, instance_id: str) -> str:
        """``instance_id`` if it lives in ``region``; KeyError otherwise, as EC2's regional API says."""
        if self._instance(instance_id).region != region:
            raise KeyError(f"InvalidInstanceID.NotFound: The instance ID '{instance_id}' does not exist")
        return instance_id

    def start_instance(self, instance_id: str) -> Instance:
        """Start a stopped instance; it is ``pending`` until its node joins again.

        Raises:
            KeyError: no such instance.
            ValueError: not stopped (a pending or running instance is left as it is).
        """
        inst = self._instance(instance_id)
        if inst.state in (InstanceState.PENDING, InstanceState.RUNNING):
            return instance_model(inst, self._now)
        if inst.state is not InstanceState.STOPPED:
            raise ValueError(f"IncorrectInstanceState: The instance '{instance_id}' is not in a state from "
                             "which it can be started.")
        inst.set_state(InstanceState.PENDING, self._now)
        inst.stopped_bills = False  # started: a later stop ends its billing (deallocates)
        self._at(self._now + self._rng.randint(40, 90), "running", inst)
        return instance_model(inst, self._now)

    def reboot_instance(self, instance_id: str) -> Instance:
        """Reboot a running instance (it stays ``running``, as EC2 reports a reboot).

        Raises:
            KeyError: no such instance.
            ValueError: not running.
        """
        inst = self._instance(instance_id)
        if inst.state is not InstanceState.RUNNING:
            raise ValueError(f"IncorrectInstanceState: The instance '{instance_id}' is not in a state from "
                             "which it can be rebooted.")
        return instance_model(inst, self._now)
