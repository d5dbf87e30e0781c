"""The AWS adapter against moto's HTTP server, with faults injected by a proxy in between.

Everything talks to 127.0.0.1 only: boto3 finds the proxy through ``AWS_ENDPOINT_URL``, exactly
as a user's LocalStack or moto set-up would, and set-up calls go straight to moto.
"""

from __future__ import annotations

import time

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

from gpuconsole.backends.aws import mapping as aws_mapping
from gpuconsole.backends.aws.source import DLAMI_PARAMETER, AwsCloud
from gpuconsole.backends.base import (
    BackendError,
    BackendPermissionDenied,
    BackendThrottled,
    BackendTimeout,
    BackendUnavailable,
    CapacityError,
    CloudBackend,
    DryRunFailed,
    NotSupported,
    Provisioner,
)
from gpuconsole.model import InstanceState, LaunchSpec, Market, Workload
from tests.aws_peer import (
    TEST_ACCESS_KEY_ID,
    TEST_SECRET_ACCESS_KEY,
    AwsPeer,
    free_port,
)

WEST = "us-west-2"
EAST = "us-east-1"


def _run(peer: AwsPeer, region: str, instance_type: str, *, name: str = "", zone: str = "") -> str:
    """Launch one instance straight on moto (not through the adapter); return its id."""
    params: dict = {"ImageId": peer.image_id(region), "InstanceType": instance_type, "MinCount": 1, "MaxCount": 1}
    if name:
        params["TagSpecifications"] = [{"ResourceType": "instance", "Tags": [{"Key": "Name", "Value": name},
                                                                             {"Key": "Owner", "Value": "ana"}]}]
    if zone:
        params["Placement"] = {"AvailabilityZone": zone}
    return peer.client("ec2", region).run_instances(**params)["Instances"][0]["InstanceId"]


def _spec(peer: AwsPeer, **overrides) -> LaunchSpec:
    fields = dict(region=EAST, instance_type="g5.xlarge", image_id=peer.image_id(EAST), availability_zone="us-east-1b",
                  tags=(("Name", "trainer"), ("Owner", "ana"), ("Project", "llm")))
    fields.update(overrides)
    return LaunchSpec(**fields)


def _state(peer: AwsPeer, instance_id: str, region: str = EAST) -> str:
    reservations = peer.client("ec2", region).describe_instances(InstanceIds=[instance_id])["Reservations"]
    return reservations[0]["Instances"][0]["State"]["Name"]


# --------------------------------------------------------------------------- set-up and polling


def test_the_constructor_and_regions_touch_no_network(aws_peer: AwsPeer) -> None:
    cloud = AwsCloud()
    assert isinstance(cloud, CloudBackend) and isinstance(cloud, Provisioner)
    assert cloud.regions == (EAST,)  # from AWS_DEFAULT_REGION
    assert AwsCloud((WEST, EAST)).regions == (WEST, EAST)
    assert aws_peer.proxy.requests == []


def test_poll_lists_gpu_instances_of_every_region(aws_peer: AwsPeer) -> None:
    east = _run(aws_peer, EAST, "g5.xlarge", name="east-box", zone="us-east-1c")
    west = _run(aws_peer, WEST, "p4d.24xlarge", name="west-box")
    _run(aws_peer, EAST, "t3.micro", name="web")
    before = time.time()

    reading = AwsCloud((EAST, WEST)).poll_instances()

    by_id = {i.instance_id: i for i in reading.instances}
    assert set(by_id) == {east, west}
    box = by_id[east]
    assert (box.instance_type, box.region, box.availability_zone) == ("g5.xlarge", EAST, "us-east-1c")
    assert box.market is Market.ON_DEMAND and box.state in (InstanceState.PENDING, InstanceState.RUNNING)
    assert box.name == "east-box" and box.tags == (("Name", "east-box"), ("Owner", "ana"))
    assert before - 120 < box.launch_time <= time.time() + 1
    assert (box.price_per_hour, box.gpus, box.gpu_model) == (0.0, 0, "")  # the core fills these in
    assert by_id[west].region == WEST and by_id[west].instance_type == "p4d.24xlarge"
    assert reading.taken_at >= before
    sent = aws_peer.proxy.sent("DescribeInstances")
    assert sorted(r.region for r in sent) == [EAST, WEST]


def test_all_types_lists_every_instance(aws_peer: AwsPeer) -> None:
    _run(aws_peer, EAST, "g5.xlarge")
    _run(aws_peer, EAST, "t3.micro")
    types = sorted(i.instance_type for i in AwsCloud(all_types=True).poll_instances().instances)
    assert types == ["g5.xlarge", "t3.micro"]


def _interrupted_spot_instance(request_id: str) -> str:
    """A DescribeInstances answer holding one interrupted spot instance linked to ``request_id``.

    moto launches spot instances but leaves ``SpotInstanceRequestId`` out of DescribeInstances,
    so the proxy serves EC2's document for this one call.
    """
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
  <requestId>7a62c49f-347e-4fc4-9331-6e8eEXAMPLE</requestId>
  <reservationSet><item>
    <reservationId>r-0a1b2c3d4e5f60718</reservationId><ownerId>123456789012</ownerId>
    <instancesSet><item>
      <instanceId>i-0123456789abcdef0</instanceId><instanceType>g5.xlarge</instanceType>
      <instanceState><code>48</code><name>terminated</name></instanceState>
      <placement><availabilityZone>us-east-1a</availabilityZone></placement>
      <launchTime>2026-03-01T12:00:00.000Z</launchTime>
      <instanceLifecycle>spot</instanceLifecycle>
      <spotInstanceRequestId>{request_id}</spotInstanceRequestId>
      <stateReason><code>Server.SpotInstanceTermination</code>
        <message>Server.SpotInstanceTermination: Spot instance termination</message></stateReason>
      <tagSet><item><key>Owner</key><value>ana</value></item><item><key>Name</key><value>spotty</value></item></tagSet>
    </item></instancesSet>
  </item></reservationSet>
</DescribeInstancesResponse>"""


def test_spot_instances_carry_their_request_status(aws_peer: AwsPeer) -> None:
    ec2 = aws_peer.client("ec2")
    answer = ec2.request_spot_instances(LaunchSpecification={"ImageId": aws_peer.image_id(), "InstanceType": "g5.xlarge"})
    request_id = answer["SpotInstanceRequests"][0]["SpotInstanceRequestId"]
    aws_peer.proxy.answer("DescribeInstances", _interrupted_spot_instance(request_id))

    [instance] = AwsCloud().poll_instances().instances

    assert (instance.instance_id, instance.market, instance.state) == ("i-0123456789abcdef0", Market.SPOT, InstanceState.TERMINATED)
    assert instance.state_reason == "Server.SpotInstanceTermination: Spot instance termination"
    assert instance.name == "spotty" and instance.tags == (("Name", "spotty"), ("Owner", "ana"))
    assert instance.launch_time == 1772366400.0  # 2026-03-01T12:00:00Z
    [request] = ec2.describe_spot_instance_requests()["SpotInstanceRequests"]
    assert instance.spot_status == request["Status"]["Code"] != ""
    [sent] = aws_peer.proxy.sent("DescribeSpotInstanceRequests")
    assert sent.params == {"SpotInstanceRequestId.1": request_id}


def test_a_failing_spot_status_lookup_does_not_fail_the_poll(aws_peer: AwsPeer) -> None:
    aws_peer.proxy.answer("DescribeInstances", _interrupted_spot_instance("sir-12345678"))
    aws_peer.proxy.fail("DescribeSpotInstanceRequests", "UnauthorizedOperation", "no spot for you", status=403)
    [instance] = AwsCloud().poll_instances().instances
    assert instance.market is Market.SPOT and instance.spot_status == ""


def test_a_failing_region_fails_the_poll_and_is_named(aws_peer: AwsPeer) -> None:
    aws_peer.proxy.fail("DescribeInstances", "UnauthorizedOperation", "You are not authorized", region=WEST)
    with pytest.raises(BackendPermissionDenied, match=r"^us-west-2: UnauthorizedOperation: You are not authorized"):
        AwsCloud((EAST, WEST)).poll_instances()


# --------------------------------------------------------------------------- catalog


def test_instance_types_are_the_nvidia_gpu_types(aws_peer: AwsPeer) -> None:
    types = {t.name: t for t in AwsCloud().instance_types(EAST)}
    p4d = types["p4d.24xlarge"]
    assert (p4d.gpu_model, p4d.gpu_count, p4d.gpu_memory_gib) == ("NVIDIA A100", 8, 40)
    assert (p4d.vcpus, p4d.memory_gib, p4d.nvme_gb, p4d.nvlink) == (96, 1152, 8000, True)
    assert p4d.network and p4d.on_demand_price == 0.0
    g5 = types["g5.xlarge"]
    assert (g5.gpu_model, g5.gpu_count, g5.gpu_memory_gib, g5.nvlink) == ("NVIDIA A10G", 1, 22, False)
    assert not types["g5.48xlarge"].nvlink and types["p5.48xlarge"].gpu_model == "NVIDIA H100"
    assert "t3.micro" not in types and "m5.large" not in types
    [sent] = aws_peer.proxy.sent("DescribeInstanceTypes")
    assert sent.params["Filter.1.Name"] == "instance-type" and "p4d.*" in sent.params.values()


def test_offerings_map_types_to_sorted_zones(aws_peer: AwsPeer) -> None:
    zones = AwsCloud().offerings(EAST, ("g5.xlarge", "p4d.24xlarge"))
    assert set(zones) == {"g5.xlarge", "p4d.24xlarge"}
    for offered in zones.values():
        assert offered and list(offered) == sorted(offered) and all(z.startswith(EAST) for z in offered)
    [sent] = aws_peer.proxy.sent("DescribeInstanceTypeOfferings")
    assert sent.params["LocationType"] == "availability-zone"
    assert {sent.params["Filter.1.Value.1"], sent.params["Filter.1.Value.2"]} == {"g5.xlarge", "p4d.24xlarge"}


def test_spot_price_history(aws_peer: AwsPeer) -> None:
    since = time.time() - 3 * 86400
    prices = AwsCloud().spot_prices(EAST, ("g5.xlarge",), since)
    assert prices and {p.instance_type for p in prices} == {"g5.xlarge"}
    assert all(p.availability_zone.startswith(EAST) and isinstance(p.price, float) and p.ts > 0 for p in prices)
    [sent] = aws_peer.proxy.sent("DescribeSpotPriceHistory")
    assert sent.params["ProductDescription.1"] == "Linux/UNIX" and sent.params["InstanceType.1"] == "g5.xlarge"
    assert sent.params["StartTime"].startswith(time.strftime("%Y-%m-%d", time.gmtime(since)))


def test_subnets_security_groups_and_key_pairs(aws_peer: AwsPeer) -> None:
    ec2 = aws_peer.client("ec2")
    vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="172.31.200.0/24", AvailabilityZone="us-east-1d",
                               TagSpecifications=[{"ResourceType": "subnet", "Tags": [{"Key": "Name", "Value": "gpu-private"}]}])
    group = ec2.create_security_group(GroupName="gpu-ssh", Description="ssh from the office", VpcId=vpc)
    ec2.create_key_pair(KeyName="ana-laptop", KeyType="ed25519")
    cloud = AwsCloud()

    subnets = {s.subnet_id: s for s in cloud.subnets(EAST)}
    mine = subnets[subnet["Subnet"]["SubnetId"]]
    assert (mine.name, mine.vpc_id, mine.availability_zone, mine.cidr) == ("gpu-private", vpc, "us-east-1d", "172.31.200.0/24")
    assert not mine.default_for_az and mine.available_ips > 200
    assert any(s.default_for_az for s in subnets.values())
    groups = {g.group_id: g for g in cloud.security_groups(EAST)}
    assert groups[group["GroupId"]].name == "gpu-ssh" and groups[group["GroupId"]].description == "ssh from the office"
    assert [(k.name, k.key_type) for k in cloud.key_pairs(EAST)] == [("ana-laptop", "ed25519")]


def test_default_image_without_the_public_parameter_asks_for_an_ami(aws_peer: AwsPeer) -> None:
    with pytest.raises(BackendError, match="no Deep Learning AMI parameter in us-east-1; enter an AMI id"):
        AwsCloud().default_image(EAST, Workload.TRAINING)


def test_default_image_reads_the_public_parameter(aws_peer: AwsPeer) -> None:
    aws_peer.proxy.answer("GetParameter", {"Parameter": {"Name": DLAMI_PARAMETER, "Type": "String",
                                                         "Value": "ami-0123456789abcdef0", "Version": 7}})
    image = AwsCloud().default_image(EAST, Workload.INFERENCE)
    assert (image.image_id, image.source) == ("ami-0123456789abcdef0", DLAMI_PARAMETER)
    assert aws_peer.proxy.sent("GetParameter")[0].params == {"Name": DLAMI_PARAMETER}


def test_on_demand_prices_are_not_supported_by_moto(aws_peer: AwsPeer) -> None:
    """moto has no Pricing API: the adapter says so cleanly and the core uses bundled prices."""
    with pytest.raises(NotSupported, match="Pricing API"):
        AwsCloud(max_attempts=2).on_demand_prices((EAST,))


def test_on_demand_prices_parse_the_price_list(aws_peer: AwsPeer) -> None:
    def product(instance_type: str, usd: str) -> str:
        import json

        return json.dumps({
            "product": {"attributes": {"instanceType": instance_type, "regionCode": WEST}},
            "terms": {"OnDemand": {"SKU.JRTCKXETXF": {"priceDimensions": {"SKU.JRTCKXETXF.6YS6EN2CT7": {
                "unit": "Hrs", "pricePerUnit": {"USD": usd}}}}}},
        })

    aws_peer.proxy.answer("GetProducts", {"PriceList": [product("g5.xlarge", "1.2060000000"),
                                                        product("p5.48xlarge", "55.0400000000"),
                                                        product("g6.xlarge", "0.0000000000")],
                                          "FormatVersion": "aws_v1"})
    prices = AwsCloud().on_demand_prices((WEST,))
    assert [(p.instance_type, p.region, p.price) for p in prices] == [("g5.xlarge", WEST, 1.206), ("p5.48xlarge", WEST, 55.04)]
    [sent] = aws_peer.proxy.sent("GetProducts")
    assert sent.region == "us-east-1" and sent.service == "pricing"
    filters = {f["Field"]: f["Value"] for f in sent.params["Filters"]}
    assert filters == {"regionCode": WEST, "operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA",
                       "capacitystatus": "Used", "instanceFamily": "GPU instance"}


# --------------------------------------------------------------------------- launching


def test_launch_on_demand_sends_the_reviewed_request(aws_peer: AwsPeer) -> None:
    [instance] = AwsCloud().launch(_spec(aws_peer))

    [sent] = aws_peer.proxy.sent("RunInstances")
    p = sent.params
    assert (p["InstanceType"], p["Placement.AvailabilityZone"], p["MinCount"], p["MaxCount"]) == ("g5.xlarge", "us-east-1b", "1", "1")
    assert p["BlockDeviceMapping.1.Ebs.Encrypted"] == "true" and p["BlockDeviceMapping.1.Ebs.VolumeType"] == "gp3"
    assert p["MetadataOptions.HttpTokens"] == "required"
    assert p["TagSpecification.1.ResourceType"] == "instance" and p["TagSpecification.2.ResourceType"] == "volume"
    assert (p["TagSpecification.1.Tag.1.Key"], p["TagSpecification.1.Tag.1.Value"]) == ("Name", "trainer")
    assert not any(k.startswith("InstanceMarketOptions") for k in p) and "DryRun" not in p

    assert instance.market is Market.ON_DEMAND and instance.name == "trainer" and instance.availability_zone == "us-east-1b"
    described = aws_peer.client("ec2").describe_instances(InstanceIds=[instance.instance_id])["Reservations"][0]["Instances"][0]
    assert described["MetadataOptions"]["HttpTokens"] == "required" and "InstanceLifecycle" not in described
    volumes = aws_peer.client("ec2").describe_volumes(Filters=[{"Name": "attachment.instance-id", "Values": [instance.instance_id]}])
    assert [v["Encrypted"] for v in volumes["Volumes"]] == [True]


def test_launch_spot(aws_peer: AwsPeer) -> None:
    [instance] = AwsCloud().launch(_spec(aws_peer, market=Market.SPOT, max_spot_price=1.5))
    p = aws_peer.proxy.sent("RunInstances")[0].params
    assert p["InstanceMarketOptions.MarketType"] == "spot"
    assert p["InstanceMarketOptions.SpotOptions.MaxPrice"] == "1.5000"
    assert p["InstanceMarketOptions.SpotOptions.SpotInstanceType"] == "one-time"
    assert instance.market is Market.SPOT
    [polled] = AwsCloud().poll_instances().instances
    assert polled.instance_id == instance.instance_id and polled.market is Market.SPOT


def test_dry_run_that_would_pass_returns_nothing_and_launches_nothing(aws_peer: AwsPeer) -> None:
    assert AwsCloud().launch(_spec(aws_peer), dry_run=True) == ()
    assert aws_peer.proxy.sent("RunInstances")[0].params["DryRun"] == "true"
    assert aws_peer.client("ec2").describe_instances()["Reservations"] == []


def test_dry_run_refused_says_why(aws_peer: AwsPeer) -> None:
    aws_peer.proxy.fail("RunInstances", "UnauthorizedOperation", "You are not authorized to perform this operation.",
                        status=403, when={"DryRun": "true"})
    with pytest.raises(DryRunFailed, match=r"^UnauthorizedOperation: You are not authorized to perform this operation\.$"):
        AwsCloud().launch(_spec(aws_peer), dry_run=True)


def test_capacity_error_in_one_zone(aws_peer: AwsPeer) -> None:
    aws_peer.proxy.fail("RunInstances", "InsufficientInstanceCapacity",
                        "We currently do not have sufficient g5.xlarge capacity in the Availability Zone you requested",
                        status=500, when={"Placement.AvailabilityZone": "us-east-1a"})
    cloud = AwsCloud(max_attempts=2)
    with pytest.raises(CapacityError, match="InsufficientInstanceCapacity"):
        cloud.launch(_spec(aws_peer, availability_zone="us-east-1a"))
    with pytest.raises(CapacityError):  # a dry run keeps the type: the wizard tries another zone
        cloud.launch(_spec(aws_peer, availability_zone="us-east-1a"), dry_run=True)
    [instance] = cloud.launch(_spec(aws_peer, availability_zone="us-east-1b"))
    assert instance.availability_zone == "us-east-1b"


def test_stop_start_reboot_terminate(aws_peer: AwsPeer) -> None:
    instance_id = _run(aws_peer, WEST, "g5.xlarge")
    cloud = AwsCloud((WEST,))
    cloud.stop(WEST, instance_id)
    assert _state(aws_peer, instance_id, WEST) == "stopped"
    [stopped] = cloud.poll_instances().instances
    assert stopped.state is InstanceState.STOPPED and stopped.state_reason
    cloud.start(WEST, instance_id)
    assert _state(aws_peer, instance_id, WEST) == "running"
    cloud.reboot(WEST, instance_id)
    cloud.terminate(WEST, instance_id)
    assert _state(aws_peer, instance_id, WEST) == "terminated"
    assert aws_peer.proxy.actions("ec2")[-5:] == ["StopInstances", "DescribeInstances", "StartInstances",
                                                  "RebootInstances", "TerminateInstances"]
    with pytest.raises(BackendError, match="InvalidInstanceID"):
        cloud.stop(WEST, "i-0000000000000dead")


# --------------------------------------------------------------------------- faults


def test_throttling_twice_is_absorbed_by_retries(aws_peer: AwsPeer) -> None:
    _run(aws_peer, EAST, "g5.xlarge")
    aws_peer.proxy.fail("DescribeInstances", "RequestLimitExceeded", "Request limit exceeded.", status=503, times=2)
    assert len(AwsCloud().poll_instances().instances) == 1
    assert len(aws_peer.proxy.sent("DescribeInstances")) == 3


def test_throttling_that_persists_fails_in_bounded_time(aws_peer: AwsPeer) -> None:
    aws_peer.proxy.fail("DescribeInstances", "RequestLimitExceeded", "Request limit exceeded.", status=503)
    started = time.monotonic()
    with pytest.raises(BackendThrottled, match="^us-east-1: RequestLimitExceeded"):
        AwsCloud(max_attempts=2).poll_instances()
    assert time.monotonic() - started < 10
    assert len(aws_peer.proxy.sent("DescribeInstances")) == 2


def test_a_hanging_endpoint_times_out(aws_peer: AwsPeer) -> None:
    aws_peer.proxy.hang("DescribeInstances", 30)
    started = time.monotonic()
    with pytest.raises(BackendTimeout, match="^us-east-1: Read timeout"):
        AwsCloud(read_timeout=0.5, max_attempts=1).poll_instances()
    assert time.monotonic() - started < 5


def test_error_messages_are_one_line_without_credentials(aws_peer: AwsPeer) -> None:
    aws_peer.proxy.fail("DescribeInstances", "AuthFailure",
                        f"AWS was not able to validate\nthe credentials {TEST_SECRET_ACCESS_KEY} "
                        "AKIAIOSFODNN7EXAMPLE token IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQD6")
    with pytest.raises(BackendPermissionDenied) as caught:
        AwsCloud().poll_instances()
    message = str(caught.value)
    assert "\n" not in message and TEST_SECRET_ACCESS_KEY not in message
    assert "AKIAIOSFODNN7EXAMPLE" not in message and "IQoJb3JpZ2lu" not in message
    assert message.startswith("us-east-1: AuthFailure: AWS was not able to validate the credentials ***")


# --------------------------------------------------------------------------- configuration


@pytest.fixture
def empty_aws_config(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No profile files with anything in them, as on a fresh machine."""
    for var, name in (("AWS_CONFIG_FILE", "config"), ("AWS_SHARED_CREDENTIALS_FILE", "credentials")):
        path = tmp_path / f"empty-aws-{name}"
        path.write_text("")
        monkeypatch.setenv(var, str(path))


def test_no_region_is_unavailable_with_a_hint(aws_peer: AwsPeer, empty_aws_config: None,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    cloud = AwsCloud()
    assert cloud.regions == ()
    with pytest.raises(BackendUnavailable, match="no AWS region configured") as caught:
        cloud.poll_instances()
    assert caught.value.hint and "--region" in caught.value.hint
    assert aws_peer.proxy.requests == []


def test_no_credentials_is_unavailable_with_a_hint(aws_peer: AwsPeer, empty_aws_config: None,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    for call in (lambda c: c.poll_instances(), lambda c: c.instance_types(WEST), lambda c: c.stop(WEST, "i-1")):
        with pytest.raises(BackendUnavailable, match="no AWS credentials found") as caught:
            call(AwsCloud())
        assert caught.value.hint and "aws configure" in caught.value.hint
    assert aws_peer.proxy.requests == []


def test_an_unknown_profile_is_unavailable(aws_peer: AwsPeer, empty_aws_config: None) -> None:
    cloud = AwsCloud(profile="nope")
    assert cloud.regions == ()
    with pytest.raises(BackendUnavailable, match="AWS profile 'nope' not found"):
        cloud.poll_instances()


def test_a_missing_profile_named_by_the_environment_is_unavailable(aws_peer: AwsPeer, empty_aws_config: None,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_PROFILE", "gone")
    cloud = AwsCloud()
    assert cloud.regions == ()
    with pytest.raises(BackendUnavailable, match="AWS profile 'gone' not found"):
        cloud.poll_instances()


def test_close_drops_clients_and_the_next_call_works(aws_peer: AwsPeer) -> None:
    cloud = AwsCloud()
    assert cloud.poll_instances().instances == ()
    cloud.close()
    _run(aws_peer, EAST, "g6.xlarge")
    assert [i.instance_type for i in cloud.poll_instances().instances] == ["g6.xlarge"]


def test_a_named_profile_gives_credentials_and_region(aws_peer: AwsPeer, tmp_path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    config, credentials = tmp_path / "config", tmp_path / "credentials"
    config.write_text("[profile gpu-team]\nregion = us-west-2\n")
    credentials.write_text(f"[gpu-team]\naws_access_key_id = {TEST_ACCESS_KEY_ID}\n"
                           f"aws_secret_access_key = {TEST_SECRET_ACCESS_KEY}\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(var)
    instance_id = _run(aws_peer, WEST, "g6e.xlarge")
    cloud = AwsCloud(profile="gpu-team")
    assert cloud.regions == (WEST,)
    assert [i.instance_id for i in cloud.poll_instances().instances] == [instance_id]
    assert [r.region for r in aws_peer.proxy.requests] == [WEST]


def test_an_unreachable_endpoint_is_a_backend_error(aws_peer: AwsPeer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    with pytest.raises(BackendError, match="^us-east-1: Could not connect to the endpoint URL"):
        AwsCloud(max_attempts=1).poll_instances()


def _client_error(code: str, message: str, status: int = 400) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message},
                        "ResponseMetadata": {"HTTPStatusCode": status}}, "RunInstances")


@pytest.mark.parametrize(("exc", "kind", "text"), [
    (_client_error("Throttling", "Rate exceeded"), BackendThrottled, "Throttling: Rate exceeded"),
    (_client_error("InsufficientCapacity", "none left"), CapacityError, "InsufficientCapacity: none left"),
    (_client_error("Unsupported", "Your requested instance type (p5.48xlarge) is not supported in your "
                   "requested Availability Zone (us-east-1e)."), CapacityError, "Unsupported: Your requested"),
    (_client_error("Unsupported", "The requested configuration is currently not supported."), BackendError,
     "Unsupported: The requested configuration"),
    (_client_error("AccessDeniedException", "User is not authorized"), BackendPermissionDenied, "AccessDenied"),
    (_client_error("ExpiredToken", "The security token included in the request is expired"), BackendUnavailable,
     "ExpiredToken"),
    (_client_error("500", "<html><body>Internal Server Error</body></html>", 500), BackendError,
     "500: unexpected answer (HTTP 500)"),
    (ReadTimeoutError(endpoint_url="https://ec2.us-east-1.amazonaws.com/"), BackendTimeout, "Read timeout"),
    (EndpointConnectionError(endpoint_url="https://ec2.mars-1.amazonaws.com/"), BackendError, "Could not connect"),
])
def test_botocore_errors_map_to_backend_errors(exc: Exception, kind: type, text: str) -> None:
    error = aws_mapping.backend_error(exc, "us-east-1")
    assert type(error) is kind
    assert str(error).startswith(f"us-east-1: {text}")
    if kind is BackendUnavailable:
        assert error.hint
