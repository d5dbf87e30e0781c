"""Choosing, pricing, checking and launching GPU instances, on fakes and on the simulated cloud."""

from __future__ import annotations

import pytest
from msgspec.structs import replace

from gpuconsole.backends.base import (
    BackendError,
    CapacityError,
    DryRunFailed,
    Provisioner,
)
from gpuconsole.backends.sim import make_sim
from gpuconsole.backends.sim.world import SimWorld
from gpuconsole.core.money.catalog import Catalog, CatalogService, bundled_catalog
from gpuconsole.core.ops.actions import ActionKind, ActionRequest
from gpuconsole.core.ops.provision import (
    Launcher,
    PriceRow,
    TypeFilter,
    alternatives,
    estimate,
    gpu_family,
    price_rows,
    recommend,
    validate,
)
from gpuconsole.model import (
    InstanceState,
    InstanceType,
    LaunchAttempt,
    LaunchSpec,
    Market,
    RegionPrice,
    SpotPrice,
    Subnet,
    Workload,
)
from tests.helpers import START, FrozenClock, demo_console

AMI = "ami-0123456789abcdef0"


def names(types: list[InstanceType]) -> list[str]:
    return [t.name for t in types]


# --------------------------------------------------------------------------- prices


def test_price_row_per_gpu_and_saving() -> None:
    row = PriceRow("p4d.24xlarge", "us-east-1", "us-east-1a", 8, 32.0, 12.0, 10.0, 14.0)
    assert row.on_demand_per_gpu == 4.0 and row.spot_per_gpu == 1.5
    assert row.saving_percent == pytest.approx(62.5)
    empty = PriceRow("x.large", "us-east-1", "", 0, None, None, None, None)
    assert empty.on_demand_per_gpu is None and empty.spot_per_gpu is None and empty.saving_percent is None
    assert PriceRow("x", "r", "z", 1, None, 1.0, 1.0, 1.0).saving_percent is None


def test_estimate_scales_with_count() -> None:
    cost = estimate(2.5, count=2)
    assert (cost.per_hour, cost.per_day, cost.per_30_days) == (5.0, 120.0, 3600.0)
    assert estimate(1.0).per_hour == 1.0


def test_price_rows_join_offerings_and_spot_history() -> None:
    cat = bundled_catalog()
    spot = (
        SpotPrice("g5.xlarge", "us-east-1a", 0.40, START - 3000),
        SpotPrice("g5.xlarge", "us-east-1a", 0.35, START - 100),
        SpotPrice("g5.xlarge", "us-east-1a", 0.45, START - 90000),
        SpotPrice("g5.xlarge", "us-east-1b", 0.50, START - 10),
        SpotPrice("g6.xlarge", "us-east-1a", 0.30, START - 10),
    )
    offerings = {"g5.xlarge": ("us-east-1b", "us-east-1a", "us-east-1c"), "g6.xlarge": ("us-east-1a",),
                 "g4dn.xlarge": ()}
    rows = price_rows(cat, "us-east-1", ["g6.xlarge", "g5.xlarge", "g4dn.xlarge"], spot, offerings)
    assert [(r.instance_type, r.availability_zone) for r in rows] == [
        ("g6.xlarge", "us-east-1a"),
        ("g5.xlarge", "us-east-1a"), ("g5.xlarge", "us-east-1b"), ("g5.xlarge", "us-east-1c"),
    ]  # g4dn.xlarge: no zone offers it
    g5a = rows[1]
    assert (g5a.spot, g5a.spot_min, g5a.spot_max, g5a.on_demand, g5a.gpus) == (0.35, 0.35, 0.45, 1.006, 1)
    assert g5a.saving_percent == pytest.approx((1 - 0.35 / 1.006) * 100)
    assert rows[3].spot is None and rows[3].saving_percent is None and rows[3].on_demand == 1.006
    # Nothing says which zones sell what: one row per type, on-demand only.
    bare = price_rows(cat, "us-east-1", ["p5.48xlarge"], (), {})
    assert [(r.availability_zone, r.on_demand, r.gpus) for r in bare] == [("", 98.32, 8)]


# --------------------------------------------------------------------------- recommendations


def test_recommend_training_types() -> None:
    cat = bundled_catalog()
    training = recommend(cat, Workload.TRAINING, "us-east-1")
    assert names(training) == ["p4de.24xlarge", "p5en.48xlarge", "p5.48xlarge"]  # cheapest first
    for t in training:
        assert t.gpu_memory_gib >= 80 and t.nvlink and t.nvme_gb > 0
    assert "p5e.48xlarge" in names(recommend(cat, Workload.TRAINING, "us-east-2"))  # sold there only
    assert "p4de.24xlarge" not in names(recommend(cat, Workload.TRAINING, "eu-west-1"))  # not sold there


def test_recommend_inference_types_and_filters() -> None:
    cat = bundled_catalog()
    inference = recommend(cat, Workload.INFERENCE, "us-east-1")
    assert inference[0].name == "g4dn.xlarge"
    assert {gpu_family(t.gpu_model) for t in inference} == {"T4", "A10G", "L4", "L40S"}
    prices = [cat.price(t.name, "us-east-1") for t in inference]
    assert prices == sorted(prices)
    assert not any(t.name.startswith(("p3", "p4", "p5")) for t in inference)

    l40s = recommend(cat, Workload.INFERENCE, "us-east-1", TypeFilter(min_gpu_memory_gib=40))
    assert l40s and all(t.gpu_model == "NVIDIA L40S" for t in l40s)
    a10g = recommend(cat, Workload.INFERENCE, "us-east-1", TypeFilter(gpu_model="a10g", gpu_count=4))
    assert names(a10g) == ["g5.12xlarge", "g5.24xlarge"]
    cheap = recommend(cat, Workload.INFERENCE, "us-east-1", TypeFilter(max_price=1.0))
    assert cheap and all((cat.price(t.name, "us-east-1") or 99) <= 1.0 for t in cheap)
    assert "g5.xlarge" not in names(cheap)
    l4 = recommend(cat, Workload.INFERENCE, "us-east-1", TypeFilter(gpu_model="L4"))
    assert {t.gpu_model for t in l4} == {"NVIDIA L4", "NVIDIA L40S"}  # a substring, as typed
    assert recommend(cat, Workload.TRAINING, "us-east-1", TypeFilter(gpu_model="h200")) == [cat.get("p5en.48xlarge")]


def test_recommend_in_a_region_without_prices_uses_reference_prices() -> None:
    cat = bundled_catalog()
    far = recommend(cat, Workload.TRAINING, "sa-east-1")
    assert "p5e.48xlarge" in names(far)  # nothing is known about the region: everything is a candidate
    assert names(far)[0] == "p4de.24xlarge"


def test_gpu_family_reads_nvml_and_ec2_names() -> None:
    assert gpu_family("NVIDIA A100-SXM4-80GB") == gpu_family("NVIDIA A100") == "A100"
    assert gpu_family("NVIDIA H100 80GB HBM3") == "H100"
    assert gpu_family("Tesla T4") == gpu_family("NVIDIA T4") == "T4"
    assert gpu_family("NVIDIA L40S") == "L40S" and gpu_family("NVIDIA L4") == "L4"
    assert gpu_family("NVIDIA A10G") == "A10G"


# --------------------------------------------------------------------------- alternatives


def _small_catalog() -> Catalog:
    types = (
        InstanceType("a.8x", "NVIDIA A100", 8, 80, 96, 1152, 40.0, nvlink=True, nvme_gb=8000),
        InstanceType("b.8x", "NVIDIA A100-SXM4-80GB", 8, 80, 96, 1152, 45.0),
        InstanceType("c.8x", "NVIDIA H100", 8, 80, 192, 2048, 98.0),
        InstanceType("d.8x", "NVIDIA H200", 8, 141, 192, 2048, 84.0),
        InstanceType("e.8x", "NVIDIA A100", 8, 40, 96, 1152, 32.0),
        InstanceType("f.1x", "NVIDIA A100", 1, 80, 12, 96, 5.0),
        InstanceType("g.8x", "NVIDIA H100", 8, 96, 192, 2048, 70.0),
        InstanceType("h.8x", "NVIDIA A100", 8, 80, 96, 1152, 38.0),
    )
    prices = tuple(RegionPrice(t.name, "us-east-1", t.on_demand_price) for t in types if t.name != "h.8x")
    return Catalog(types, prices + (RegionPrice("h.8x", "us-west-2", 38.0),), "bundled", 0.0)


def test_alternatives_same_model_first_then_memory_class() -> None:
    cat = _small_catalog()
    # Same model (A100) first, then ±25 % of 80 GiB per GPU; never fewer GPUs, never unsold types.
    assert names(alternatives(cat, "a.8x", "us-east-1")) == ["e.8x", "b.8x", "g.8x", "c.8x"]
    assert names(alternatives(cat, "a.8x", "us-west-2")) == ["h.8x"]
    assert alternatives(cat, "nope", "us-east-1") == []
    real = bundled_catalog()
    assert names(alternatives(real, "p5.48xlarge", "us-east-1")) == ["p4de.24xlarge"]
    g5 = alternatives(real, "g5.xlarge", "us-east-1")
    assert len(g5) == 4 and all(t.gpu_model == "NVIDIA A10G" for t in g5) and "g5.xlarge" not in names(g5)


# --------------------------------------------------------------------------- validation


def _spec(**changes) -> LaunchSpec:
    base = LaunchSpec("us-east-1", "g5.xlarge", AMI, tags=(("Owner", "alice"), ("Project", "nlp")))
    return replace(base, **changes)


def test_a_good_spec_passes() -> None:
    assert validate(_spec()) == {}
    assert validate(_spec(market=Market.SPOT, max_spot_price=0.5, subnet_id="subnet-0123abcd",
                          security_group_ids=("sg-0123456789abcdef0",), kms_key_id="alias/ebs-gpu")) == {}
    arn = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    assert validate(_spec(kms_key_id=arn)) == {}
    assert validate(_spec(kms_key_id="1234abcd-12ab-34cd-56ef-1234567890ab")) == {}


def test_validation_messages_by_field() -> None:
    problems = validate(LaunchSpec("", "", "ami-xyz", count=0, root_volume_gib=4))
    assert set(problems) == {"region", "instance_type", "image_id", "count", "root_volume_gib"}
    assert "ami-" in problems["image_id"]
    assert all("\n" not in m for m in problems.values())
    assert "image_id" in validate(_spec(image_id=""))
    assert "image_id" not in validate(_spec(image_id="ami-0123abcd"))
    assert "count" in validate(_spec(count=101)) and "count" not in validate(_spec(count=100))
    assert "root_volume_gib" in validate(_spec(root_volume_gib=16385))
    assert "kms_key_id" in validate(_spec(kms_key_id="alias/x", encrypted=False))
    assert "kms_key_id" in validate(_spec(kms_key_id="my key"))
    assert "max_spot_price" in validate(_spec(max_spot_price=1.0))  # on-demand
    assert "max_spot_price" in validate(_spec(market=Market.SPOT, max_spot_price=0.0))
    assert "subnet_id" in validate(_spec(subnet_id="sub-123"))
    assert "sg-nope" in validate(_spec(security_group_ids=("sg-0123abcd", "sg-nope")))["security_group_ids"]


def test_tag_validation() -> None:
    problems = validate(_spec(tags=(("aws:cloudformation", "x"), ("Owner", "a" * 257), ("k" * 129, "v"))))
    assert set(problems) == {"tag:aws:cloudformation", "tag:Owner", "tag:" + "k" * 129}
    assert "aws:" in problems["tag:aws:cloudformation"]
    assert "256" in problems["tag:Owner"]
    assert validate(_spec(tags=(("Owner", "a" * 256), ("k" * 128, "")))) == {}


# --------------------------------------------------------------------------- the launcher on a fake cloud


class FakeCloud:
    """Launches succeed unless the (type, zone) is full or an error is planned."""

    name = "fake"
    regions = ("us-east-1",)

    def __init__(self) -> None:
        self.full: set[tuple[str, str]] = set()
        self.error: BackendError | None = None
        self.launched: list[LaunchSpec] = []
        self.dry_runs: list[LaunchSpec] = []
        self.zones = {
            "p5.48xlarge": ("us-east-1a", "us-east-1b", "us-east-1c"),
            "p4de.24xlarge": ("us-east-1b", "us-east-1c"),
        }
        self.vpc_subnets = (
            Subnet("subnet-0000000a", "vpc-1", "us-east-1a", "10.0.0.0/20"),
            Subnet("subnet-0000000c", "vpc-1", "us-east-1c", "10.0.32.0/20"),
            Subnet("subnet-0000000b", "vpc-2", "us-east-1b", "10.1.0.0/20"),
        )

    def instance_types(self, region):
        return ()

    def on_demand_prices(self, regions):
        return ()

    def spot_prices(self, region, instance_types, since):
        return ()

    def offerings(self, region, instance_types):
        return {t: self.zones[t] for t in instance_types if t in self.zones}

    def subnets(self, region):
        return self.vpc_subnets

    def security_groups(self, region):
        return ()

    def key_pairs(self, region):
        return ()

    def default_image(self, region, workload):
        raise NotImplementedError

    def launch(self, spec, *, dry_run=False):
        if dry_run:
            self.dry_runs.append(spec)
            return ()
        self.launched.append(spec)
        zone = spec.availability_zone
        if spec.subnet_id:
            zone = next(s.availability_zone for s in self.vpc_subnets if s.subnet_id == spec.subnet_id)
        if self.error is not None:
            raise self.error
        if (spec.instance_type, zone) in self.full:
            raise CapacityError(f"InsufficientInstanceCapacity: no {spec.instance_type} in {zone}")
        from gpuconsole.model import Instance
        return tuple(Instance(f"i-{len(self.launched):017x}", spec.instance_type, spec.region, zone, spec.market,
                              InstanceState.PENDING, START, 1.0) for _ in range(spec.count))

    def start(self, region, instance_id):
        pass

    def stop(self, region, instance_id):
        pass

    def reboot(self, region, instance_id):
        pass

    def terminate(self, region, instance_id):
        pass


def _launcher(cloud: FakeCloud) -> Launcher:
    clock = FrozenClock()
    return Launcher(cloud, bundled_catalog(), cloud.offerings, clock=clock)


def test_the_fake_is_a_provisioner() -> None:
    assert isinstance(FakeCloud(), Provisioner)


def test_launch_as_given() -> None:
    cloud = FakeCloud()
    seen: list[LaunchAttempt] = []
    spec = LaunchSpec("us-east-1", "p5.48xlarge", AMI, availability_zone="us-east-1a", count=2)
    result = _launcher(cloud).launch(spec, seen.append)
    assert result.ok and len(result.instances) == 2 and result.spec == spec
    assert [(a.instance_type, a.availability_zone, a.ok) for a in result.attempts] == [
        ("p5.48xlarge", "us-east-1a", True)]
    assert seen == list(result.attempts) and result.attempts[0].message.startswith("launched i-")
    assert result.attempts[0].ts == START
    assert result.attempts[0].instance_ids == tuple(i.instance_id for i in result.instances)


def test_capacity_error_moves_to_the_next_zone_then_to_similar_types() -> None:
    cloud = FakeCloud()
    cloud.full = {("p5.48xlarge", "us-east-1a"), ("p5.48xlarge", "us-east-1b"), ("p5.48xlarge", "us-east-1c"),
                  ("p4de.24xlarge", "us-east-1b")}
    seen: list[LaunchAttempt] = []

    def note(attempt: LaunchAttempt) -> None:
        # Reported as it happens: the cloud has been asked exactly this often so far.
        assert len(cloud.launched) == len(seen) + 1
        seen.append(attempt)

    spec = LaunchSpec("us-east-1", "p5.48xlarge", AMI, market=Market.SPOT, availability_zone="us-east-1a")
    result = _launcher(cloud).launch(spec, note)
    assert [(a.instance_type, a.availability_zone, a.ok) for a in seen] == [
        ("p5.48xlarge", "us-east-1a", False),
        ("p5.48xlarge", "us-east-1b", False),
        ("p5.48xlarge", "us-east-1c", False),
        ("p4de.24xlarge", "us-east-1b", False),
        ("p4de.24xlarge", "us-east-1c", True),
    ]
    assert "InsufficientInstanceCapacity" in seen[0].message
    assert all(a.market is Market.SPOT for a in seen)
    assert result.ok and result.spec == replace(spec, instance_type="p4de.24xlarge", availability_zone="us-east-1c")
    assert result.attempts == tuple(seen)


def test_no_alternatives_when_not_wanted() -> None:
    cloud = FakeCloud()
    cloud.full = {("p5.48xlarge", z) for z in cloud.zones["p5.48xlarge"]}
    result = _launcher(cloud).launch(LaunchSpec("us-east-1", "p5.48xlarge", AMI, availability_zone="us-east-1b"),
                                     try_alternatives=False)
    assert not result.ok and result.spec is None
    assert [a.availability_zone for a in result.attempts] == ["us-east-1b", "us-east-1a", "us-east-1c"]


def test_a_non_capacity_error_stops_at_once() -> None:
    cloud = FakeCloud()
    cloud.error = BackendError("UnauthorizedOperation: You are not authorized to perform this operation.\nEncoded")
    result = _launcher(cloud).launch(LaunchSpec("us-east-1", "p5.48xlarge", AMI, availability_zone="us-east-1a"))
    assert not result.ok and len(result.attempts) == 1 and len(cloud.launched) == 1
    assert result.attempts[0].message == "UnauthorizedOperation: You are not authorized to perform this operation."


def test_fallback_keeps_to_the_subnets_vpc() -> None:
    cloud = FakeCloud()
    cloud.full = {("p5.48xlarge", "us-east-1a")}
    spec = LaunchSpec("us-east-1", "p5.48xlarge", AMI, subnet_id="subnet-0000000a")
    result = _launcher(cloud).launch(spec)
    # us-east-1b has a subnet only in another VPC, so it is skipped.
    assert [(a.availability_zone, a.ok) for a in result.attempts] == [("us-east-1a", False), ("us-east-1c", True)]
    assert result.spec is not None and result.spec.subnet_id == "subnet-0000000c"
    assert [s.subnet_id for s in cloud.launched] == ["subnet-0000000a", "subnet-0000000c"]


def test_dry_run_asks_the_cloud_with_dry_run() -> None:
    cloud = FakeCloud()
    spec = LaunchSpec("us-east-1", "p5.48xlarge", AMI)
    assert _launcher(cloud).dry_run(spec) is None
    assert cloud.dry_runs == [spec] and cloud.launched == []


# --------------------------------------------------------------------------- the simulated cloud


@pytest.fixture
def sim():
    clock = FrozenClock()
    _, jobs, cloud = make_sim(seed=7, start=START, clock=clock)
    return cloud, clock


def _sim_spec(cloud, **changes) -> LaunchSpec:
    image = cloud.default_image("us-east-1", Workload.TRAINING)
    base = LaunchSpec("us-east-1", "g5.xlarge", image.image_id, availability_zone="us-east-1b",
                      key_name="platform-ops",
                      tags=(("Name", "bench-a10g"), ("Owner", "alice"), ("Project", "nlp"), ("Budget", "research")))
    return replace(base, **changes)


def test_sim_offers_what_the_wizard_needs(sim) -> None:
    cloud, _ = sim
    assert isinstance(cloud, Provisioner) and cloud.regions == ("us-east-1", "us-west-2")
    east = {t.name: t for t in cloud.instance_types("us-east-1")}
    assert east["p5.48xlarge"].on_demand_price == 98.32 and east["p5.48xlarge"].gpu_memory_gib == 80
    assert "p5.48xlarge" not in {t.name for t in cloud.instance_types("us-west-2")}
    prices = {(p.instance_type, p.region): p.price for p in cloud.on_demand_prices(("us-east-1", "us-west-2"))}
    assert prices[("g5.xlarge", "us-west-2")] == 1.006
    offers = cloud.offerings("us-east-1", ("p5.48xlarge", "g5.xlarge"))
    assert offers["p5.48xlarge"] == ("us-east-1a", "us-east-1b")
    assert offers["g5.xlarge"] == ("us-east-1a", "us-east-1b", "us-east-1c")
    assert cloud.offerings("us-west-2", ("p5.48xlarge", "p5e.48xlarge")) == {"p5.48xlarge": (), "p5e.48xlarge": ()}
    subnets = cloud.subnets("us-east-1")
    assert [s.availability_zone for s in subnets] == ["us-east-1a", "us-east-1b", "us-east-1c"]
    assert len({s.vpc_id for s in subnets}) == 1
    assert all(s.subnet_id.startswith("subnet-") and len(s.subnet_id) == 24 for s in subnets)
    assert {g.name for g in cloud.security_groups("us-east-1")} == {"default", "gpu-training"}
    assert "platform-ops" in {k.name for k in cloud.key_pairs("us-west-2")}
    image = cloud.default_image("us-east-1", Workload.TRAINING)
    assert image.image_id.startswith("ami-") and image.name.startswith("Deep Learning Base OSS Nvidia Driver GPU AMI")
    assert image.source.startswith("/aws/service/deeplearning/")
    assert validate(_sim_spec(cloud)) == {}
    with pytest.raises(BackendError, match="InvalidRegion"):
        cloud.subnets("mars-east-1")


def test_sim_spot_history_is_believable_and_seeded(sim) -> None:
    cloud, clock = sim
    history = cloud.spot_prices("us-east-1", ("g5.xlarge",), clock() - 7 * 86400)
    assert {p.availability_zone for p in history} == {"us-east-1a", "us-east-1b", "us-east-1c"}
    assert all(0.25 * 1.006 <= p.price <= 0.8 * 1.006 for p in history)
    for az in ("us-east-1a", "us-east-1b", "us-east-1c"):
        points = sorted((p for p in history if p.availability_zone == az), key=lambda p: p.ts)
        assert len(points) > 10 and points[0].ts <= clock() - 7 * 86400
        now_price = {(s.instance_type, s.availability_zone): s.price for s in cloud.spot_prices()}
        assert points[-1].price == now_price[("g5.xlarge", az)]
    _, _, again = make_sim(seed=7, start=START, clock=lambda: START)
    assert again.spot_prices("us-east-1", ("g5.xlarge",), START - 7 * 86400) == history
    _, _, other = make_sim(seed=8, start=START, clock=lambda: START)
    assert other.spot_prices("us-east-1", ("g5.xlarge",), START - 7 * 86400) != history


def test_provisioning_does_not_disturb_the_world() -> None:
    quiet = SimWorld(seed=7, start=START)
    busy = SimWorld(seed=7, start=START)
    busy.region_subnets("us-east-1")
    busy.spot_history("us-east-1", ("g5.xlarge", "p5.48xlarge"), START - 86400)
    busy.region_image("us-west-2", Workload.INFERENCE)
    quiet.step(300)
    busy.step(300)
    assert quiet.gpu_reading() == busy.gpu_reading()
    assert quiet.jobs_reading() == busy.jobs_reading()


def test_sim_dry_runs(sim) -> None:
    cloud, _ = sim
    assert cloud.launch(_sim_spec(cloud), dry_run=True) == ()
    assert cloud.launch(_sim_spec(cloud, instance_type="p5.48xlarge", availability_zone="us-east-1a"),
                        dry_run=True) == ()  # a dry run does not check capacity
    with pytest.raises(DryRunFailed, match=r"InvalidKeyPair.NotFound: The key pair 'x' does not exist"):
        cloud.launch(_sim_spec(cloud, key_name="x"), dry_run=True)
    with pytest.raises(DryRunFailed, match="InvalidSubnetID.NotFound"):
        cloud.launch(_sim_spec(cloud, subnet_id="subnet-0123456789abcdef0"), dry_run=True)
    with pytest.raises(DryRunFailed, match="InvalidGroup.NotFound"):
        cloud.launch(_sim_spec(cloud, security_group_ids=("sg-0123456789abcdef0",)), dry_run=True)
    with pytest.raises(DryRunFailed, match="Unsupported"):
        cloud.launch(_sim_spec(cloud, instance_type="p5.48xlarge", availability_zone="us-east-1c"), dry_run=True)
    with pytest.raises(DryRunFailed, match="InvalidParameterValue"):
        cloud.launch(_sim_spec(cloud, instance_type="x9.huge"), dry_run=True)
    with pytest.raises(BackendError, match="InvalidKeyPair.NotFound") as info:
        cloud.launch(_sim_spec(cloud, key_name="x"))
    assert not isinstance(info.value, DryRunFailed)


def test_sim_launches_on_demand_and_spot_with_tags(sim) -> None:
    cloud, clock = sim
    group = next(g for g in cloud.security_groups("us-east-1") if g.name == "gpu-training")
    subnet = next(s for s in cloud.subnets("us-east-1") if s.availability_zone == "us-east-1c")
    od = cloud.launch(_sim_spec(cloud, count=2, subnet_id=subnet.subnet_id, security_group_ids=(group.group_id,)))
    assert len(od) == 2 and len({i.instance_id for i in od}) == 2
    for inst in od:
        assert inst.state is InstanceState.PENDING and inst.market is Market.ON_DEMAND
        assert inst.availability_zone == "us-east-1c" and inst.price_per_hour == 1.006
        assert (inst.tag("Owner"), inst.tag("Project"), inst.tag("Budget"), inst.tag("Name")) == (
            "alice", "nlp", "research", "bench-a10g")
        assert inst.name == "bench-a10g"
    spot = cloud.launch(_sim_spec(cloud, market=Market.SPOT, max_spot_price=1.0))[0]
    now_price = {(s.instance_type, s.availability_zone): s.price for s in cloud.spot_prices()}
    assert spot.market is Market.SPOT and spot.price_per_hour == now_price[("g5.xlarge", "us-east-1b")]
    with pytest.raises(BackendError, match="SpotMaxPriceTooLow"):
        cloud.launch(_sim_spec(cloud, market=Market.SPOT, max_spot_price=0.01))
    clock.advance(120)
    listed = {i.instance_id: i for i in cloud.poll_instances().instances}
    assert all(listed[i.instance_id].state is InstanceState.RUNNING for i in (*od, spot))
    assert listed[spot.instance_id].tag("Budget") == "research"


def test_sim_capacity_and_the_launchers_fallback(sim) -> None:
    cloud, clock = sim
    assert ("p5.48xlarge", "us-east-1a") in cloud.sim.world.no_capacity  # the demo's full zone
    spec = _sim_spec(cloud, instance_type="p5.48xlarge", availability_zone="us-east-1a")
    with pytest.raises(CapacityError, match="InsufficientInstanceCapacity.*us-east-1b"):
        cloud.launch(spec)
    service = CatalogService(cloud, clock=clock)
    launcher = Launcher(cloud, service.catalog(cloud.regions), service.offerings, clock=clock)
    result = launcher.launch(spec)
    assert [(a.availability_zone, a.ok) for a in result.attempts] == [("us-east-1a", False), ("us-east-1b", True)]
    assert result.instances[0].availability_zone == "us-east-1b"

    cloud.sim.world.no_capacity |= {("p5.48xlarge", "us-east-1b")}
    result = launcher.launch(spec)
    assert [(a.instance_type, a.availability_zone, a.ok) for a in result.attempts] == [
        ("p5.48xlarge", "us-east-1a", False), ("p5.48xlarge", "us-east-1b", False),
        ("p4de.24xlarge", "us-east-1a", True)]
    cloud.sim.world.no_capacity.clear()
    assert cloud.launch(spec)[0].availability_zone == "us-east-1a"


def test_sim_start_stop_reboot_terminate(sim) -> None:
    cloud, clock = sim
    inst = cloud.launch(_sim_spec(cloud))[0]
    iid = inst.instance_id

    def state() -> InstanceState:
        return {i.instance_id: i.state for i in cloud.poll_instances().instances}[iid]

    with pytest.raises(BackendError, match="IncorrectInstanceState"):
        cloud.reboot("us-east-1", iid)  # still pending
    clock.advance(120)
    assert state() is InstanceState.RUNNING
    cloud.reboot("us-east-1", iid)
    assert state() is InstanceState.RUNNING
    with pytest.raises(BackendError, match="InvalidInstanceID.NotFound"):
        cloud.stop("us-west-2", iid)  # another region's API does not know it
    cloud.stop("us-east-1", iid)
    assert state() is InstanceState.STOPPING
    with pytest.raises(BackendError, match="IncorrectInstanceState"):
        cloud.start("us-east-1", iid)  # not stopped yet
    clock.advance(90)
    assert state() is InstanceState.STOPPED
    with pytest.raises(BackendError, match="IncorrectInstanceState"):
        cloud.reboot("us-east-1", iid)
    cloud.start("us-east-1", iid)
    assert state() is InstanceState.PENDING
    clock.advance(120)
    assert state() is InstanceState.RUNNING
    cloud.terminate("us-east-1", iid)
    assert state() is InstanceState.SHUTTING_DOWN
    clock.advance(120)
    assert state() is InstanceState.TERMINATED
    with pytest.raises(BackendError, match="IncorrectInstanceState"):
        cloud.start("us-east-1", iid)


# --------------------------------------------------------------------------- through the console


def test_console_launches_on_the_simulator_end_to_end() -> None:
    console = demo_console()
    try:
        cloud = console.services.cloud
        assert cloud.available and cloud.regions == ("us-east-1", "us-west-2")
        catalog = cloud.catalog()
        assert catalog.source == "live" and "live catalog" in cloud.catalog_note
        image = cloud.default_image("us-east-1", Workload.TRAINING)
        spec = LaunchSpec("us-east-1", "p5.48xlarge", image.image_id, availability_zone="us-east-1a",
                          key_name="platform-ops", tags=(("Owner", "priya"), ("Project", "research")))
        cloud.dry_run(spec)
        seen: list[LaunchAttempt] = []
        result = cloud.launch(spec, seen.append)
        assert result.ok and seen == list(result.attempts)
        assert [a.availability_zone for a in seen] == ["us-east-1a", "us-east-1b"]
        last = console.services.actions.recent()[-1]
        assert last.ok and last.request.kind is ActionKind.LAUNCH and last.request.target == "p5.48xlarge"
        assert result.instances[0].instance_id in last.message and "us-east-1b" in last.message

        iid = result.instances[0].instance_id
        done = cloud.perform(ActionRequest(ActionKind.TERMINATE, iid, "us-east-1", confirmation=iid))
        assert done.ok and console.services.actions.recent()[-1] is done
    finally:
        console.close()
