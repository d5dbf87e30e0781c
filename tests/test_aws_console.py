"""The whole console on AWS: moto as the cloud, the fault proxy in between, the real app on top.

Covers what only the pieces together show: instances of two regions priced from the catalog,
the catalog's TTL cache, a capacity error in the first zone followed by a launch in the second,
throttling that leaves the pane stale but full, the wizard's spot and on-demand launches and
its dry-run failure, ``snapshot --json`` on a real account, and that no secret reaches the
database, the log or the screen.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuconsole.backends.aws.source import AwsCloud
from gpuconsole.core.fleet.console import Console, ConsoleOptions
from gpuconsole.core.fleet.sources import SourceOptions
from gpuconsole.core.fleet.store import Store
from gpuconsole.core.ops.cloud_ops import CloudOps, LaunchFailed
from gpuconsole.model import InstanceState, LaunchSpec, Market, SourceKind, SourceState
from tests.aws_peer import (
    TEST_SECRET_ACCESS_KEY,
    AwsPeer,
)
from tests.helpers import wait_for, wait_until
from tests.driving import running
from tests.test_wizard import choose_zone, fill, launch, move_to, text_of, to_review

EAST, WEST = "us-east-1", "us-west-2"

pytestmark = pytest.mark.slow


def aws_console(regions: tuple[str, ...] = (EAST, WEST), store: Store | None = None) -> Console:
    options = ConsoleOptions(sources=SourceOptions(cloud="aws", regions=regions), interval=0.2, timeout=20)
    return Console(options, store=store)


def cloud_state(console: Console) -> SourceState:
    status = console.snapshot.source(SourceKind.CLOUD)
    assert status is not None
    return status.state


def run(peer: AwsPeer, region: str, instance_type: str, **kwargs) -> str:
    answer = peer.client("ec2", region).run_instances(ImageId=peer.image_id(region), InstanceType=instance_type,
                                                      MinCount=1, MaxCount=1, **kwargs)
    return answer["Instances"][0]["InstanceId"]


def test_two_regions_priced_from_the_catalog_and_throttling_keeps_them(aws_peer: AwsPeer) -> None:
    east = run(aws_peer, EAST, "p4d.24xlarge")
    west = run(aws_peer, WEST, "g5.xlarge")
    run(aws_peer, EAST, "t3.micro")  # not a GPU type: not listed
    console = aws_console()
    console.start(open_store=False)
    try:
        wait_for(lambda: len(console.snapshot.instances) == 2, timeout=20)
        by_id = {i.instance_id: i for i in console.snapshot.instances}
        assert by_id[east].region == EAST and by_id[west].region == WEST
        assert (by_id[east].gpus, by_id[east].price_per_hour) == (8, pytest.approx(32.77248))
        assert by_id[west].gpus == 1 and by_id[west].price_per_hour > 0
        assert console.snapshot.burn_per_hour == pytest.approx(by_id[east].price_per_hour + by_id[west].price_per_hour)

        aws_peer.proxy.fail("DescribeInstances", "RequestLimitExceeded", "Request limit exceeded.", status=503)
        console.refresh()
        wait_for(lambda: cloud_state(console) is SourceState.STALE, timeout=30)
        status = console.snapshot.source(SourceKind.CLOUD)
        assert status is not None and (status.error or "").startswith("throttled")
        assert len(console.snapshot.instances) == 2, "throttling never empties the pane"
    finally:
        console.close()


def test_catalog_is_refreshed_from_the_account_and_cached_with_a_ttl(aws_peer: AwsPeer, tmp_path: Path) -> None:
    now = [1_800_000_000.0]
    store = Store(tmp_path / "cache.db")
    try:
        ops = CloudOps(AwsCloud((EAST,)), lambda: store, clock=lambda: now[0])
        catalog = ops.catalog()
        assert catalog.source == "live" and catalog.get("p4d.24xlarge") is not None
        assert catalog.price("p4d.24xlarge", EAST) == pytest.approx(32.77248)  # bundled: moto has no Pricing API
        assert "Pricing" in (ops.service.last_error or "") and "refresh failed" in ops.catalog_note
        listed = len(aws_peer.proxy.sent("DescribeInstanceTypes"))
        assert listed >= 1

        ops.catalog()
        CloudOps(AwsCloud((EAST,)), lambda: store, clock=lambda: now[0]).catalog()  # a new session, same Store
        assert len(aws_peer.proxy.sent("DescribeInstanceTypes")) == listed, "within the TTL nothing is asked again"

        now[0] += 8 * 86400
        CloudOps(AwsCloud((EAST,)), lambda: store, clock=lambda: now[0]).catalog()
        assert len(aws_peer.proxy.sent("DescribeInstanceTypes")) > listed, "past the TTL it is refreshed"
    finally:
        store.close()


def spec(peer: AwsPeer, **changes) -> LaunchSpec:
    fields = dict(region=EAST, instance_type="g5.xlarge", image_id=peer.image_id(), availability_zone="us-east-1a",
                  tags=(("Name", "infer"), ("Owner", "ana"), ("Budget", "inference")))
    fields.update(changes)
    return LaunchSpec(**fields)


def test_capacity_error_in_the_first_zone_then_the_second_launches(aws_peer: AwsPeer) -> None:
    aws_peer.proxy.fail("RunInstances", "InsufficientInstanceCapacity",
                        "We currently do not have sufficient g5.xlarge capacity in the Availability Zone you requested (us-east-1a).",
                        status=500, when={"Placement.AvailabilityZone": "us-east-1a"})
    console = aws_console((EAST,))
    try:
        seen = []
        result = console.services.cloud.launch(spec(aws_peer), seen.append)
        assert [(a.availability_zone, a.ok) for a in seen] == [("us-east-1a", False), ("us-east-1b", True)]
        assert "InsufficientInstanceCapacity" in seen[0].message
        assert result.ok and result.instances[0].availability_zone == "us-east-1b"
        zones = [r.params.get("Placement.AvailabilityZone") for r in aws_peer.proxy.sent("RunInstances")]
        assert zones == ["us-east-1a", "us-east-1b"]
        assert console.services.actions.recent()[-1].ok
    finally:
        console.close()


def test_no_capacity_anywhere_says_what_was_tried(aws_peer: AwsPeer) -> None:
    aws_peer.proxy.fail("RunInstances", "InsufficientInstanceCapacity", "no capacity", status=500)
    console = aws_console((EAST,))
    try:
        with pytest.raises(LaunchFailed, match="nothing launched after") as info:
            console.services.cloud.launch(spec(aws_peer), try_alternatives=False)
        attempts = info.value.result.attempts
        assert len(attempts) >= 2 and not any(a.ok for a in attempts)
        assert not console.services.actions.recent()[-1].ok
    finally:
        console.close()


# --------------------------------------------------------------------------- the wizard on AWS


async def wizard_to_review(app, pilot, peer: AwsPeer, zone: str, market: Market):
    from gpuconsole.ui.widgets.live_table import LiveTable
    from gpuconsole.ui.wizards import ProvisionWizard

    await wait_until(lambda: cloud_state(app.core) is SourceState.LIVE, timeout=20)
    await pilot.press("4")
    await pilot.pause()
    await pilot.press("n")
    await wait_until(lambda: isinstance(app.screen, ProvisionWizard))
    wizard = app.screen
    await wait_until(lambda: bool(wizard.workload_step.types), timeout=20)
    await pilot.pause()
    await pilot.press("tab", "right", "enter")  # inference
    await pilot.pause()
    types = wizard.query_one("#type-table", LiveTable)
    types.focus()
    await pilot.pause()
    await move_to(pilot, types, "g5.xlarge")
    await pilot.press("enter")
    await wait_until(lambda: wizard.step == 1 and bool(wizard.price_step.rows), timeout=20)
    await pilot.pause()
    await choose_zone(pilot, wizard, zone, market)
    image = wizard.query_one("#image")
    # moto has no Deep Learning AMI parameter: the wizard says so, and the user types an id.
    await wait_until(lambda: "no default AMI" in wizard.details_step.image_error, timeout=20)
    await fill(pilot, image, peer.image_id())
    await fill(pilot, wizard.query_one("#tag-Project"), "search")
    await fill(pilot, wizard.query_one("#tag-Budget"), "inference")
    await to_review(pilot, wizard)
    return wizard


@pytest.mark.parametrize("market", [Market.SPOT, Market.ON_DEMAND])
async def test_wizard_launches_on_aws_with_the_reviewed_request(aws_peer: AwsPeer, market: Market) -> None:
    console = aws_console((EAST,))
    async with running(console, live=False) as (app, pilot):
        wizard = await wizard_to_review(app, pilot, aws_peer, "us-east-1b", market)
        assert text_of(wizard, "#dry-run").startswith("Dry run passed")
        [dry] = aws_peer.proxy.sent("RunInstances")
        assert dry.params["DryRun"] == "true"
        await launch(pilot, wizard)
        assert wizard.launch_step.result is not None and wizard.launch_step.result.ok
        sent = aws_peer.proxy.sent("RunInstances")[-1].params
        assert "DryRun" not in sent
        assert sent["MetadataOptions.HttpTokens"] == "required"
        assert sent["BlockDeviceMapping.1.Ebs.Encrypted"] == "true"
        assert sent["Placement.AvailabilityZone"] == "us-east-1b"
        tags = {sent[k]: sent[k[:-3] + "Value"] for k in sent if k.startswith("TagSpecification.1.Tag.") and k.endswith(".Key")}
        assert tags["Project"] == "search" and tags["Budget"] == "inference" and tags["Owner"]
        is_spot = sent.get("InstanceMarketOptions.MarketType") == "spot"
        assert is_spot is (market is Market.SPOT)
        [described] = aws_peer.client("ec2").describe_instances()["Reservations"][0]["Instances"]
        assert (described.get("InstanceLifecycle") == "spot") is (market is Market.SPOT)
        assert described["MetadataOptions"]["HttpTokens"] == "required"


async def test_wizard_shows_a_failed_dry_run_and_keeps_launch_off(aws_peer: AwsPeer) -> None:
    from textual.widgets import Button

    aws_peer.proxy.fail("RunInstances", "UnauthorizedOperation",
                        "You are not authorized to perform this operation.", status=403, when={"DryRun": "true"})
    console = aws_console((EAST,))
    async with running(console, live=False) as (app, pilot):
        wizard = await wizard_to_review(app, pilot, aws_peer, "us-east-1a", Market.ON_DEMAND)
        message = text_of(wizard, "#dry-run")
        assert message.startswith("Dry run failed") and "UnauthorizedOperation" in message
        assert wizard.query_one("#launch", Button).disabled
        await pilot.press("ctrl+n")
        await pilot.pause()
        assert wizard.step == 3, "Launch stays refused"
        assert [r.params.get("DryRun") for r in aws_peer.proxy.sent("RunInstances")] == ["true"]


# --------------------------------------------------------------------------- scripts and secrets


def test_snapshot_json_reads_the_account_in_two_regions(aws_peer: AwsPeer, tmp_path: Path) -> None:
    east = run(aws_peer, EAST, "g5.xlarge", TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "Owner", "Value": "ana"}]}])
    west = run(aws_peer, WEST, "g6.xlarge")
    result = subprocess.run(
        [sys.executable, "-m", "gpuconsole", "snapshot", "--json", "--region", EAST, "--region", WEST, "--no-db"],
        capture_output=True, text=True, timeout=120, env=dict(os.environ), cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    instances = {i["instance_id"]: i for i in data["instances"]}
    assert set(instances) == {east, west}
    assert instances[east]["region"] == EAST and instances[west]["region"] == WEST
    assert instances[east]["state"] == InstanceState.RUNNING.value and instances[east]["price_per_hour"] > 0
    cloud = next(s for s in data["sources"] if s["kind"] == "cloud")
    assert cloud["name"] == "aws" and cloud["state"] == "live"
    assert TEST_SECRET_ACCESS_KEY not in result.stdout + result.stderr


async def test_no_secret_in_the_database_the_log_or_the_screen(aws_peer: AwsPeer, tmp_path: Path) -> None:
    log_file = tmp_path / "gpuconsole.log"
    handler = logging.FileHandler(log_file)
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)  # botocore logs requests and headers at DEBUG
    run(aws_peer, EAST, "g5.xlarge")
    store = Store(tmp_path / "cache.db")
    console = aws_console((EAST,), store=store)
    try:
        async with running(console, live=False) as (app, pilot):
            await wait_until(lambda: len(app.snapshot.instances) == 1, timeout=20)
            console.services.cloud.catalog()
            console.services.cloud.spot_prices(EAST, ("g5.xlarge",))
            console.services.cloud.launch(spec(aws_peer, availability_zone="us-east-1c"))
            aws_peer.proxy.fail("DescribeInstances", "AuthFailure", "AWS was not able to validate the provided access credentials")
            console.refresh()
            await wait_until(lambda: cloud_state(console) is SourceState.ERROR, timeout=20)
            await pilot.press("4")
            await wait_until(lambda: "AuthFailure" in app.export_screenshot())
            screen = app.export_screenshot()
            console.cache.persist(SourceKind.CLOUD, "aws", console.hub.reading(SourceKind.CLOUD))
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        handler.close()
        store.close()
    assert "AuthFailure" in screen
    files = [log_file, *tmp_path.glob("cache.db*")]
    assert log_file.stat().st_size > 0 and any(p.name == "cache.db" for p in files)
    secret = TEST_SECRET_ACCESS_KEY.encode()
    for path in files:
        assert secret not in path.read_bytes(), f"the secret key reached {path.name}"
    assert TEST_SECRET_ACCESS_KEY not in screen


def test_billed_spend_from_cost_explorer_shows_with_its_age_and_respects_the_bound(aws_peer: AwsPeer) -> None:
    from tests.test_cost_explorer import _canned, _day

    _canned(aws_peer, {"ResultsByTime": [_day("2026-11-01", "2026-11-02", "120.50"), _day("2026-11-02", "2026-11-03", "79.50")]})
    off = Console(ConsoleOptions(sources=SourceOptions(cloud="aws", regions=(EAST,)), cost_explorer_calls=0))
    assert off.services.cost_explorer is None
    off.close()
    console = Console(ConsoleOptions(sources=SourceOptions(cloud="aws", regions=(EAST,)), cost_explorer_calls=1))
    try:
        assert console.services.cost_explorer is not None and console.services.cost_explorer.refresh(max_age_s=0)
        console.start(open_store=False)
        wait_for(lambda: console.snapshot.billed_month == pytest.approx(200.0), timeout=20)
        assert console.snapshot.billed_note.startswith("Cost Explorer, ")
        assert not console.services.cost_explorer.refresh(max_age_s=0), "one call a day: the second is not made"
        assert len(aws_peer.proxy.sent("GetCostAndUsage")) == 1
    finally:
        console.close()
