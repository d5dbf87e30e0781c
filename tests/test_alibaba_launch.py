"""What a launch on Alibaba Cloud offers and asks for, through the official SDK against the local
ECS peer (tests/alibaba_peer.py): the VSwitches, security groups and key pairs of a region, paged
as documented."""

from __future__ import annotations

import pytest

from gpuconsole.backends.alibaba import AlibabaCloud, AlibabaSettings
from gpuconsole.model import KeyPair
from tests.alibaba_peer import EcsPeer

REGION = "cn-hangzhou"


@pytest.fixture
def peer(monkeypatch):
    monkeypatch.setenv("ALIBABA_CLOUD_ECS_METADATA_DISABLED", "true")
    monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_ID", "LTAI5tTestKeyId")
    monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "test-secret")
    with EcsPeer() as p:
        yield p


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
