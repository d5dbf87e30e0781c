"""The GPU catalog: the bundled data file, live refreshes, TTLs and the Store cache."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from importlib import resources

import pytest

from gpuconsole.backends.base import BackendError, NotSupported, Provisioner
from gpuconsole.backends.sim import catalog as sim_catalog
from gpuconsole.backends.sim import make_sim
from gpuconsole.core.fleet.store import Store
from gpuconsole.core.money.catalog import (
    RETRY_FAILED_AFTER,
    CatalogService,
    bundled_catalog,
)
from gpuconsole.model import InstanceType, RegionPrice
from tests.helpers import START, FrozenClock

MAIN_REGIONS = ("us-east-1", "us-east-2", "us-west-2", "eu-west-1", "eu-central-1", "ap-northeast-1",
                "ap-southeast-1")
REQUIRED_TYPES = (
    "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p4d.24xlarge", "p4de.24xlarge", "p3.2xlarge",
    "p3.8xlarge", "p3.16xlarge", "p3dn.24xlarge", "g4dn.metal",
    *(f"g6e.{s}" for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge")),
    *(f"g6.{s}" for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge")),
    *(f"g5.{s}" for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge")),
    *(f"g4dn.{s}" for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge")),
)


class CountingProvisioner:
    """Wraps the simulated cloud, counting calls and failing on demand."""

    def __init__(self, seed: int = 7) -> None:
        _, _, self.inner = make_sim(seed=seed, start=START, clock=lambda: START)
        self.name = "counting"
        self.regions = self.inner.regions
        self.calls: list[str] = []
        self.fail: BackendError | None = None
        self.prices: tuple[RegionPrice, ...] | None = None
        self._lock = threading.Lock()

    def _call(self, what: str) -> None:
        with self._lock:
            self.calls.append(what)
        if self.fail is not None:
            raise self.fail

    def instance_types(self, region):
        self._call(f"instance_types:{region}")
        return self.inner.instance_types(region)

    def on_demand_prices(self, regions):
        self._call("on_demand_prices")
        return self.prices if self.prices is not None else self.inner.on_demand_prices(regions)

    def spot_prices(self, region, instance_types, since):
        self._call(f"spot_prices:{region}")
        return self.inner.spot_prices(region, instance_types, since)

    def offerings(self, region, instance_types):
        self._call(f"offerings:{region}")
        return self.inner.offerings(region, instance_types)

    def subnets(self, region):
        return self.inner.subnets(region)

    def security_groups(self, region):
        return self.inner.security_groups(region)

    def key_pairs(self, region):
        return self.inner.key_pairs(region)

    def default_image(self, region, workload):
        return self.inner.default_image(region, workload)

    def launch(self, spec, *, dry_run=False):
        return self.inner.launch(spec, dry_run=dry_run)

    def start(self, region, instance_id):
        self.inner.start(region, instance_id)

    def stop(self, region, instance_id):
        self.inner.stop(region, instance_id)

    def reboot(self, region, instance_id):
        self.inner.reboot(region, instance_id)

    def terminate(self, region, instance_id):
        self.inner.terminate(region, instance_id)


# --------------------------------------------------------------------------- the bundled file


def test_the_data_file_ships_with_the_package_and_has_the_documented_shape() -> None:
    text = resources.files("gpuconsole.data").joinpath("gpu_catalog.json").read_text(encoding="utf-8")
    data = json.loads(text)
    assert {"as_of", "types", "prices"} <= set(data)
    datetime.fromisoformat(data["as_of"])
    keys = {"name", "gpu_model", "gpu_count", "gpu_memory_gib", "vcpus", "memory_gib", "network", "nvme_gb", "nvlink"}
    assert all(set(t) == keys for t in data["types"])
    names = [t["name"] for t in data["types"]]
    assert len(names) == len(set(names))
    assert set(data["prices"]) == set(names)  # every type is sold somewhere, nothing else is priced


def test_bundled_catalog_covers_the_gpu_types_and_regions() -> None:
    cat = bundled_catalog()
    assert cat.source == "bundled"
    assert cat.fetched_at == datetime.fromisoformat(json.loads(
        resources.files("gpuconsole.data").joinpath("gpu_catalog.json").read_text())["as_of"]).replace(
        tzinfo=UTC).timestamp()
    for name in REQUIRED_TYPES:
        assert cat.get(name) is not None, name
    assert set(MAIN_REGIONS) <= set(cat.regions())
    assert bundled_catalog() is cat  # read once
    models = {t.gpu_model for t in cat.types}
    assert {"NVIDIA H100", "NVIDIA H200", "NVIDIA A100", "NVIDIA A10G", "NVIDIA T4", "NVIDIA L4", "NVIDIA L40S",
            "NVIDIA V100"} <= models
    for t in cat.types:
        assert t.gpu_count > 0 and t.gpu_memory_gib > 0 and t.vcpus > 0 and t.memory_gib > 0 and t.network
    p5 = cat.get("p5.48xlarge")
    assert p5 is not None and (p5.gpu_count, p5.gpu_memory_gib, p5.nvlink) == (8, 80, True) and p5.nvme_gb > 0
    assert cat.get("g6e.xlarge").gpu_memory_gib == 48  # type: ignore[union-attr]
    assert cat.get("p4d.24xlarge").gpu_memory_gib == 40  # type: ignore[union-attr]


def test_bundled_prices_agree_with_the_simulator() -> None:
    cat = bundled_catalog()
    for t in sim_catalog.INSTANCE_TYPES:
        assert cat.price(t.name, "us-east-1") == t.on_demand_price, t.name
        assert cat.get(t.name).on_demand_price == t.on_demand_price  # type: ignore[union-attr]
    assert cat.price("p5.48xlarge", "us-east-1") == 98.32
    assert cat.price("p4de.24xlarge", "eu-west-1") is None  # not sold there
    assert cat.price("nope.xlarge", "us-east-1") is None


def test_reference_price_is_us_east_1_or_the_first_region() -> None:
    cat = bundled_catalog()
    data = json.loads(resources.files("gpuconsole.data").joinpath("gpu_catalog.json").read_text())
    for t in cat.types:
        by_region = data["prices"][t.name]
        expected = by_region.get("us-east-1", next(iter(by_region.values())))
        assert t.on_demand_price == expected


# --------------------------------------------------------------------------- refreshing


def test_no_provisioner_means_the_bundled_catalog_and_no_cloud_answers() -> None:
    service = CatalogService(None)
    assert service.catalog(("us-east-1",)) is bundled_catalog()
    assert service.spot_prices("us-east-1", ("g5.xlarge",)) == ()
    assert service.offerings("us-east-1", ("g5.xlarge",)) == {}
    assert service.cached_spot_price("g5.xlarge", "us-east-1a") is None
    assert service.last_error is None


def test_live_catalog_merges_the_cloud_with_the_bundled_file() -> None:
    clock = FrozenClock()
    prov = CountingProvisioner()
    assert isinstance(prov, Provisioner)
    prov.prices = (RegionPrice("g5.xlarge", "us-east-1", 0.999),)  # the Pricing API knows better
    cat = CatalogService(prov, clock=clock).catalog(("us-east-1", "us-west-2"))
    assert cat.source == "live" and cat.fetched_at == clock()
    assert cat.price("g5.xlarge", "us-east-1") == 0.999
    assert cat.get("g5.xlarge").on_demand_price == 0.999  # type: ignore[union-attr]
    assert cat.price("g4dn.xlarge", "us-west-2") == 0.526  # the type listing's price
    assert cat.price("p5e.48xlarge", "us-east-2") == bundled_catalog().price("p5e.48xlarge", "us-east-2")
    assert cat.get("g6e.48xlarge") is not None  # known only to the bundled file
    p5 = cat.get("p5.48xlarge")
    assert p5 is not None and p5.gpu_model == "NVIDIA H100" and p5.gpu_memory_gib == 80


def test_catalog_is_cached_for_its_ttl_then_refreshed() -> None:
    clock = FrozenClock()
    prov = CountingProvisioner()
    service = CatalogService(prov, clock=clock, ttl=3600.0)
    first = service.catalog(("us-east-1",))
    assert prov.calls == ["instance_types:us-east-1", "on_demand_prices"]
    clock.advance(3599)
    assert service.catalog(("us-east-1",)) is first
    assert len(prov.calls) == 2
    clock.advance(2)
    second = service.catalog(("us-east-1",))
    assert second.fetched_at == clock() and len(prov.calls) == 4
    third = service.catalog(("us-east-1",), refresh=True)
    assert third is not second and len(prov.calls) == 6
    service.catalog(("us-east-1", "us-west-2"))  # a region the cache does not cover
    assert prov.calls[-3:] == ["instance_types:us-east-1", "instance_types:us-west-2", "on_demand_prices"]


def test_catalog_cache_survives_in_the_store(tmp_path) -> None:
    clock = FrozenClock()
    with Store(tmp_path / "cache.db") as store:
        first_prov = CountingProvisioner()
        first = CatalogService(first_prov, store, clock=clock).catalog(("us-east-1",))
        clock.advance(60)
        again_prov = CountingProvisioner()
        again = CatalogService(again_prov, store, clock=clock).catalog(("us-east-1",))
        assert again_prov.calls == []
        assert again.source == "live" and again.fetched_at == first.fetched_at
        assert again.types == first.types and set(again.prices) == set(first.prices)
        assert "key" not in json.dumps(store.get_setting("catalog")).lower()  # nothing secret is kept


def test_failed_refresh_keeps_the_bundled_catalog_and_says_why() -> None:
    prov = CountingProvisioner()
    prov.fail = BackendError("AccessDenied: pricing:GetProducts\nmore detail")
    service = CatalogService(prov, clock=FrozenClock())
    cat = service.catalog(("us-east-1",))
    assert cat is bundled_catalog()
    assert service.last_error == "AccessDenied: pricing:GetProducts"


def test_failed_refresh_keeps_the_last_live_catalog() -> None:
    clock = FrozenClock()
    prov = CountingProvisioner()
    service = CatalogService(prov, clock=clock, ttl=60.0)
    live = service.catalog(("us-east-1",))
    clock.advance(120)
    prov.fail = NotSupported("the Pricing API is not available in this partition")
    assert service.catalog(("us-east-1",)) is live
    assert service.last_error == "the Pricing API is not available in this partition"
    prov.fail = None
    calls = len(prov.calls)
    assert service.catalog(("us-east-1",)) is live, "a refusing API is not asked again at once"
    assert len(prov.calls) == calls
    clock.advance(RETRY_FAILED_AFTER)
    assert service.catalog(("us-east-1",)).fetched_at == clock()
    assert service.last_error is None


def test_asking_for_a_refresh_retries_a_failed_one_at_once() -> None:
    clock = FrozenClock()
    prov = CountingProvisioner()
    service = CatalogService(prov, clock=clock, ttl=60.0)
    service.catalog(("us-east-1",))
    clock.advance(120)
    prov.fail = NotSupported("no")
    service.catalog(("us-east-1",))
    prov.fail = None
    assert service.catalog(("us-east-1",), refresh=True).fetched_at == clock()


def test_concurrent_callers_share_one_refresh() -> None:
    prov = CountingProvisioner()
    service = CatalogService(prov, clock=FrozenClock())
    results = []
    threads = [threading.Thread(target=lambda: results.append(service.catalog(("us-east-1",)))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 8 and all(r is results[0] for r in results)
    assert prov.calls.count("instance_types:us-east-1") == 1


# --------------------------------------------------------------------------- spot prices and offerings


def test_spot_prices_are_cached_and_remembered_per_zone(tmp_path) -> None:
    clock = FrozenClock()
    prov = CountingProvisioner()
    with Store(tmp_path / "cache.db") as store:
        service = CatalogService(prov, store, clock=clock, spot_ttl=600.0)
        assert service.cached_spot_price("g5.xlarge", "us-east-1a") is None
        prices = service.spot_prices("us-east-1", ("g5.xlarge", "g4dn.xlarge"))
        assert prices and {p.instance_type for p in prices} == {"g5.xlarge", "g4dn.xlarge"}
        assert min(p.ts for p in prices) <= clock() - 7 * 86400  # the price in effect a week ago
        assert prov.calls == ["spot_prices:us-east-1"]
        assert service.spot_prices("us-east-1", ("g4dn.xlarge", "g5.xlarge")) == prices  # order does not matter
        assert prov.calls == ["spot_prices:us-east-1"]
        latest = max((p for p in prices if (p.instance_type, p.availability_zone) == ("g5.xlarge", "us-east-1a")),
                     key=lambda p: p.ts)
        assert service.cached_spot_price("g5.xlarge", "us-east-1a") == latest.price
        clock.advance(601)
        service.spot_prices("us-east-1", ("g5.xlarge", "g4dn.xlarge"))
        assert prov.calls == ["spot_prices:us-east-1"] * 2

        other_prov = CountingProvisioner()
        other = CatalogService(other_prov, store, clock=clock, spot_ttl=600.0)
        assert other.spot_prices("us-east-1", ("g5.xlarge", "g4dn.xlarge")) == prices
        assert other_prov.calls == []
        assert other.cached_spot_price("g5.xlarge", "us-east-1a") == latest.price


def test_spot_price_errors_reach_the_caller_unless_something_is_cached() -> None:
    clock = FrozenClock()
    prov = CountingProvisioner()
    service = CatalogService(prov, clock=clock, spot_ttl=60.0)
    prov.fail = BackendError("RequestLimitExceeded: Request limit exceeded.")
    with pytest.raises(BackendError, match="RequestLimitExceeded"):
        service.spot_prices("us-east-1", ("g5.xlarge",))
    prov.fail = None
    prices = service.spot_prices("us-east-1", ("g5.xlarge",))
    clock.advance(120)
    prov.fail = BackendError("RequestLimitExceeded: Request limit exceeded.")
    assert service.spot_prices("us-east-1", ("g5.xlarge",)) == prices  # stale beats nothing


def test_offerings_are_cached_for_their_ttl() -> None:
    clock = FrozenClock()
    prov = CountingProvisioner()
    service = CatalogService(prov, clock=clock, offerings_ttl=3600.0)
    found = service.offerings("us-east-1", ("p5.48xlarge", "g5.xlarge"))
    assert found["p5.48xlarge"] == ("us-east-1a", "us-east-1b")
    assert service.offerings("us-east-1", ("g5.xlarge", "p5.48xlarge")) == found
    assert prov.calls == ["offerings:us-east-1"]
    clock.advance(3601)
    service.offerings("us-east-1", ("g5.xlarge", "p5.48xlarge"))
    assert prov.calls == ["offerings:us-east-1"] * 2


def test_cached_spot_price_never_calls_the_cloud() -> None:
    prov = CountingProvisioner()
    service = CatalogService(prov, clock=FrozenClock())
    assert service.cached_spot_price("p5.48xlarge", "us-east-1b") is None
    assert prov.calls == []


def test_a_store_that_fails_is_only_a_cache_miss() -> None:
    class BrokenStore:
        def get_setting(self, key, default=None):
            raise OSError("disk gone")

        def set_setting(self, key, value):
            raise OSError("disk gone")

    service = CatalogService(CountingProvisioner(), BrokenStore(), clock=FrozenClock())
    assert service.catalog(("us-east-1",)).source == "live"
    assert service.spot_prices("us-east-1", ("g5.xlarge",))


def test_catalog_helpers() -> None:
    cat = bundled_catalog()
    assert cat.has_prices("us-east-1") and not cat.has_prices("sa-east-1")
    assert cat.covers(("us-east-1", "eu-west-1")) and not cat.covers(("sa-east-1",))
    assert all(isinstance(t, InstanceType) for t in cat.types)


def test_a_region_listing_drops_bundled_prices_of_types_it_lacks() -> None:
    from gpuconsole.core.money.catalog import merge

    base = bundled_catalog()
    assert base.price("p5en.48xlarge", "us-east-1") is not None
    only = [t for t in base.types if t.name == "g5.xlarge"]
    live = merge(base, only, [], [], 1.0, present={"us-east-1": {"g5.xlarge"}})
    assert live.price("p5en.48xlarge", "us-east-1") is None, "not listed in us-east-1: not offered there"
    assert live.price("g5.xlarge", "us-east-1") == base.price("g5.xlarge", "us-east-1")
    assert live.price("p5en.48xlarge", "us-west-2") == base.price("p5en.48xlarge", "us-west-2"), "other regions untouched"
