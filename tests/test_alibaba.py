"""Alibaba Cloud ECS through the official SDK against the local RPC peer (tests/alibaba_peer.py)."""

from __future__ import annotations

import socket

import pytest

from gpuconsole.backends.alibaba import AlibabaCloud, AlibabaSettings
from gpuconsole.backends.alibaba import split_endpoint
from gpuconsole.backends.base import BackendError, BackendThrottled, CapacityError, DryRunFailed
from gpuconsole.model import InstanceState, LaunchSpec, Market
from gpuconsole.model.cloud import is_instance_id

REGION = "cn-hangzhou"


@pytest.fixture
def peer(ecs):
    return ecs


@pytest.fixture
def cloud(peer):
    return AlibabaCloud(AlibabaSettings(regions=(REGION,), endpoint=peer.url))


def test_lists_gpu_instances_with_gpus_price_and_currency(peer, cloud):
    a10 = peer.world.add("ecs.gn7i-c8g1.2xlarge", tags={"Project": "chat"})
    peer.world.add("ecs.g7.large")  # no GPU: left out
    for _ in range(3):
        peer.world.add("ecs.gn6i-c4g1.xlarge")  # with a page size of 100 all fit; NextToken is followed below
    instances = {i.instance_id: i for i in cloud.poll_instances().instances}
    assert len(instances) == 4
    one = instances[a10]
    assert (one.cloud, one.gpus, one.gpu_model, one.currency) == ("alibaba", 1, "NVIDIA A10", "CNY")
    assert one.price_per_hour == 14.9 and one.market is Market.ON_DEMAND and one.tag("Project") == "chat"
    assert one.state is InstanceState.RUNNING and one.bills_now and is_instance_id(a10)


def test_follows_next_token(peer, cloud, monkeypatch):
    for _ in range(120):
        peer.world.add("ecs.gn6i-c4g1.xlarge")
    assert len(cloud.poll_instances().instances) == 120
    assert peer.actions().count("DescribeInstances") == 2


def test_stop_asks_for_economical_mode_and_says_what_still_bills(peer, cloud):
    payg = peer.world.add("ecs.gn7i-c8g1.2xlarge")
    prepaid = peer.world.add("ecs.gn7i-c8g1.2xlarge", charge="PrePaid")
    cloud.stop(REGION, payg)
    cloud.stop(REGION, prepaid)
    stop = [p for a, p in peer.world.calls if a == "StopInstance"]
    assert all(p["StoppedMode"] == "StopCharging" for p in stop)
    by_id = {i.instance_id: i for i in cloud.poll_instances().instances}
    assert by_id[payg].state is InstanceState.STOPPED and not by_id[payg].bills_now
    assert by_id[prepaid].state is InstanceState.STOPPED and by_id[prepaid].bills_now  # KeepCharging


def test_start_reboot_delete(peer, cloud):
    iid = peer.world.add("ecs.gn7e-c16g1.4xlarge", status="Stopped", stopped_mode="StopCharging")
    cloud.start(REGION, iid)
    cloud.reboot(REGION, iid)
    cloud.terminate(REGION, iid)
    assert peer.actions()[-3:] == ["StartInstance", "RebootInstance", "DeleteInstance"]
    assert cloud.poll_instances().instances == ()


def test_reclaim_notice_of_a_preemptible_instance(peer, cloud):
    peer.world.add("ecs.gn6i-c4g1.xlarge", spot="SpotAsPriceGo", locks=("Recycling",))
    (one,) = cloud.poll_instances().instances
    assert one.market is Market.SPOT and "reclaimed" in one.state_reason and one.spot_status == "marked-for-termination"
    assert one.price_per_hour == pytest.approx(2.48)  # the last DescribeSpotPriceHistory point


def test_catalog_stock_and_prices(peer, cloud):
    types = {t.name: t for t in cloud.instance_types(REGION)}
    assert types["ecs.gn6i-c4g1.xlarge"].gpu_model == "NVIDIA T4"
    assert types["ecs.gn7i-c8g1.2xlarge"].gpu_model == "NVIDIA A10"
    assert "ecs.g7.large" not in types
    peer.world.sold_out.add("ecs.gn7e-c16g1.4xlarge")
    zones = cloud.offerings(REGION, ("ecs.gn7i-c8g1.2xlarge", "ecs.gn7e-c16g1.4xlarge"))
    assert zones == {"ecs.gn7i-c8g1.2xlarge": ("cn-hangzhou-i",), "ecs.gn7e-c16g1.4xlarge": ()}
    prices = {p.instance_type: p.price for p in cloud.on_demand_prices((REGION,))}
    assert prices["ecs.gn7e-c16g1.4xlarge"] == 41.6
    history = cloud.spot_prices(REGION, ("ecs.gn7i-c8g1.2xlarge",), 0.0)
    assert [p.ts for p in history] == sorted(p.ts for p in history) and len(history) == 3


def _spec(**kw):
    base = dict(region=REGION, instance_type="ecs.gn7i-c8g1.2xlarge", image_id="ubuntu_22_04_x64_20G_alibase",
                availability_zone="cn-hangzhou-i", subnet_id="vsw-bp1abc", security_group_ids=("sg-bp1abc",),
                kms_key_id="key-hzz1", market=Market.SPOT, max_spot_price=5.0, tags=(("Owner", "ana"),))
    return LaunchSpec(**{**base, **kw})


def test_launch_dry_run_then_launch_with_token_tags_spot_and_encrypted_disk(peer, cloud):
    assert cloud.launch(_spec(), dry_run=True) == ()
    (made,) = cloud.launch(_spec())
    run = [p for a, p in peer.world.calls if a == "RunInstances"]
    assert run[0]["DryRun"].lower() == "true" and "DryRun" not in run[1]
    sent = run[1]
    assert sent["ClientToken"] and sent["SpotStrategy"] == "SpotWithPriceLimit" and sent["SpotPriceLimit"] == "5.0"
    assert sent["SystemDisk.Encrypted"] == "true" and sent["SystemDisk.KMSKeyId"] == "key-hzz1"
    assert (sent["Tag.1.Key"], sent["Tag.1.Value"]) == ("Owner", "ana") and sent["VSwitchId"] == "vsw-bp1abc"
    assert made.cloud == "alibaba" and peer.world.instances[made.instance_id]["SpotStrategy"] == "SpotWithPriceLimit"
    cloud.launch(_spec(market=Market.SPOT, max_spot_price=None))
    assert [p for a, p in peer.world.calls if a == "RunInstances"][-1]["SpotStrategy"] == "SpotAsPriceGo"


def test_errors_map_to_the_same_typed_errors_as_ec2(peer, cloud):
    with pytest.raises(DryRunFailed, match="InvalidInstanceType.NotFound"):
        cloud.launch(_spec(instance_type="ecs.gn99-nothing"), dry_run=True)
    peer.world.sold_out.add("ecs.gn7i-c8g1.2xlarge")
    with pytest.raises(CapacityError, match="OperationDenied.NoStock"):
        cloud.launch(_spec())
    peer.world.fail["DescribeInstances"] = "Throttling.User"
    with pytest.raises(BackendThrottled, match="^cn-hangzhou: Throttling.User"):
        cloud.poll_instances()
    with pytest.raises(BackendError, match="InvalidInstanceId.NotFound"):
        cloud.stop(REGION, "i-bp999999999999999999")


def test_endpoint_url_is_split_for_the_sdk():
    assert split_endpoint("https://ecs.cn-hangzhou.aliyuncs.com") == ("ecs.cn-hangzhou.aliyuncs.com", "https")
    assert split_endpoint("http://127.0.0.1:8080") == ("127.0.0.1:8080", "http")
    with pytest.raises(ValueError):
        split_endpoint("ftp://x")


def test_no_connection_leaves_127_0_0_1(peer, cloud, monkeypatch):
    """Credentials come from the environment; the metadata service (100.100.100.200) is never asked."""
    reached: list[object] = []
    real = socket.socket.connect

    def connect(self, address):  # records every address, connects as before
        reached.append(address)
        return real(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    peer.world.add("ecs.gn7i-c8g1.2xlarge")
    cloud.poll_instances()
    assert reached and all(a[0] == "127.0.0.1" for a in reached if isinstance(a, tuple))


def test_published_figures_fill_what_the_api_leaves_out(peer, cloud):
    from gpuconsole.backends.alibaba.source import published_types

    known = published_types()
    assert {known[n].gpu_model for n in ("ecs.gn6i-c4g1.xlarge", "ecs.gn7i-c8g1.2xlarge", "ecs.gn7e-c16g1.4xlarge",
                                         "ecs.gn6v-c8g1.2xlarge", "ecs.gn8is.2xlarge")} == {
        "NVIDIA T4", "NVIDIA A10", "NVIDIA A100", "NVIDIA V100", "NVIDIA L20"}
    assert known["ecs.gn7i-c8g1.2xlarge"].gpu_memory_gib == 24  # per GPU, as the EC2 catalog counts it
    types = {t.name: t for t in cloud.instance_types(REGION)}
    assert types["ecs.gn7e-c16g1.4xlarge"].gpu_memory_gib == 80


def test_an_ack_nodes_provider_id_names_its_instance():
    from gpuconsole.backends.kube.records import _instance_id

    assert _instance_id("cn-hangzhou.i-bp1g6zv0ce8oghu7k2xx") == "i-bp1g6zv0ce8oghu7k2xx"
    assert _instance_id("aws:///us-east-1a/i-0123456789abcdef0") == "i-0123456789abcdef0"
    assert _instance_id("gce://project/zone/name") is None and _instance_id("cn-hangzhou.192.168.0.1") is None
