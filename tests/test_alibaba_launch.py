"""What a launch on Alibaba Cloud offers and asks for, through the official SDK against the local
ECS peer (tests/alibaba_peer.py): the VSwitches, security groups and key pairs of a region, paged
as documented, and the provider's own launch options (AlibabaLaunchOptions) in RunInstances."""

from __future__ import annotations

import pytest

from gpuconsole.backends.alibaba import AlibabaCloud, AlibabaSettings
from gpuconsole.backends.base import BackendError
from gpuconsole.core.ops.launch_checks import build_options, option_fields, validate
from gpuconsole.model import AlibabaLaunchOptions, KeyPair, LaunchSpec, Market

REGION = "cn-hangzhou"


@pytest.fixture
def peer(ecs):
    return ecs


@pytest.fixture
def cloud(peer):
    return AlibabaCloud(AlibabaSettings(regions=(REGION,), endpoint=peer.url))


def test_vswitches_security_groups_and_key_pairs_of_a_region(peer, cloud):
    vswitches = cloud.subnets(REGION)
    assert [(v.subnet_id, v.availability_zone, v.cidr, v.default_for_az) for v in vswitches][:2] == [
        ("vsw-bp100000000000000000", "cn-hangzhou-i", "192.168.0.0/20", True),
        ("vsw-bp100000000000000001", "cn-hangzhou-j", "192.168.16.0/20", False),
    ]
    assert all(v.vpc_id == "vpc-bp1gpu00000000000001" and v.available_ips > 4000 for v in vswitches)
    groups = cloud.security_groups(REGION)
    assert [(g.group_id, g.name) for g in groups] == [("sg-bp1default000000001", "default"),
                                                      ("sg-bp1training00000002", "gpu-training")]
    assert groups[1].description.startswith("NCCL")
    assert cloud.key_pairs(REGION) == (KeyPair("platform-ops"), KeyPair("ci-runner"))
    assert cloud.subnets("cn-beijing") == ()  # another region's rows are not this one's


def test_a_long_list_is_read_page_by_page(peer, cloud):
    base = peer.world.vswitches[0]
    peer.world.vswitches += [{**base, "VSwitchId": f"vsw-bp2{n:017d}", "IsDefault": False} for n in range(70)]
    assert len(cloud.subnets(REGION)) == 73
    pages = [p for a, p in peer.world.calls if a == "DescribeVSwitches"]
    assert [(p["PageNumber"], p["PageSize"]) for p in pages] == [("1", "50"), ("2", "50")]


def _spec(**kw):
    base = dict(region=REGION, instance_type="ecs.gn7i-c8g1.2xlarge", image_id="ubuntu_22_04_x64_20G_alibase_20240101.vhd",
                availability_zone="cn-hangzhou-i", subnet_id="vsw-bp100000000000000000",
                security_group_ids=("sg-bp1training00000002",), key_name="platform-ops", market=Market.SPOT)
    return LaunchSpec(**{**base, **kw})


def test_the_providers_own_options_reach_run_instances(peer, cloud):
    options = AlibabaLaunchOptions(system_disk_category="cloud_auto", spot_duration=0, spot_interruption="Stop",
                                   public_bandwidth_mbps=10, deletion_protection=True)
    (made,) = cloud.launch(_spec(options=options))
    sent = [p for a, p in peer.world.calls if a == "RunInstances"][-1]
    assert (sent["SystemDisk.Category"], sent["SpotDuration"], sent["SpotInterruptionBehavior"]) == ("cloud_auto", "0", "Stop")
    assert "SystemDisk.PerformanceLevel" not in sent  # a level is an ESSD's only
    assert (sent["InternetMaxBandwidthOut"], sent["DeletionProtection"].lower()) == ("10", "true")
    assert (sent["VSwitchId"], sent["KeyPairName"]) == ("vsw-bp100000000000000000", "platform-ops")
    with pytest.raises(BackendError, match="DeletionProtection"):
        cloud.terminate(REGION, made.instance_id)  # the cloud holds the guard
    assert made.instance_id in peer.world.instances


def test_without_options_a_launch_asks_what_ecs_does_by_default(peer, cloud):
    cloud.launch(_spec(market=Market.ON_DEMAND))
    sent = [p for a, p in peer.world.calls if a == "RunInstances"][-1]
    assert (sent["SystemDisk.Category"], sent["SystemDisk.PerformanceLevel"]) == ("cloud_essd", "PL1")
    assert sent["InternetMaxBandwidthOut"] == "0" and "SpotDuration" not in sent and "SpotStrategy" not in sent


def test_options_are_checked_with_the_type_that_names_their_cloud():
    assert option_fields("p4d.24xlarge") == ()  # AWS declares none: its wizard is unchanged
    fields = {f.name: f for f in option_fields("ecs.gn6i-c4g1.xlarge")}
    assert fields["options.system_disk_category"].choices[0] == "cloud_essd"
    assert (fields["options.public_bandwidth_mbps"].kind, fields["options.deletion_protection"].kind) == ("number", "flag")
    assert fields["options.spot_interruption"].label == "On reclaim"
    wide = _spec(options=AlibabaLaunchOptions(public_bandwidth_mbps=500))
    assert "100" in validate(wide)["options.public_bandwidth_mbps"]
    aws = LaunchSpec("us-east-1", "p4d.24xlarge", "ami-0abc1234", options=AlibabaLaunchOptions())
    assert "does not apply to AWS" in validate(aws)["options"]
    built, problems = build_options("ecs.gn6i-c4g1.xlarge", {"public_bandwidth_mbps": "5", "spot_duration": 0})
    assert problems == {} and built == AlibabaLaunchOptions(public_bandwidth_mbps=5, spot_duration=0)
    assert validate(_spec(options=built)) == {}
