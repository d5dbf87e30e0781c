"""Cost truth on AWS: what the console estimates is what EC2 bills, checked on moto (EC2, EBS)
with CloudTrail and Cost Explorer's resource-level costs served by the billing peer."""

from __future__ import annotations

import json
import time

import pytest

from gpuconsole.backends.aws.source import AwsCloud
from gpuconsole.cli.main import main
from gpuconsole.core.money import costs
from gpuconsole.core.money.catalog import bundled_catalog
from gpuconsole.core.money.periods import month_end, month_start
from gpuconsole.core.money.reconcile import full_days
from gpuconsole.core.money.storage import storage_cost
from gpuconsole.core.ops.cloud_ops import CloudOps
from gpuconsole.model import Instance
from tests.aws_peer import TEST_REGION, AwsPeer
from tests.aws_peer_billing import BillingPeer, billing_peer  # noqa: F401 - the fixture

pytestmark = pytest.mark.slow
P4D = bundled_catalog().price("p4d.24xlarge", TEST_REGION)
G5 = bundled_catalog().price("g5.xlarge", TEST_REGION)


def launch(peer: AwsPeer, instance_type: str) -> str:
    answer = peer.client("ec2").run_instances(ImageId=peer.image_id(), InstanceType=instance_type, MinCount=1, MaxCount=1,
                                              Placement={"AvailabilityZone": "us-east-1a"})
    return answer["Instances"][0]["InstanceId"]


def priced(ops: CloudOps, now: float) -> Instance:
    """Poll moto once and price the one instance as the console does, history read first."""
    [raw] = ops.backend.poll_instances().instances
    ops.load_history([raw], now)
    [inst] = ops.price_instances([raw], now)
    return inst


def test_a_just_launched_instance_shows_its_first_minute(aws_peer: AwsPeer, billing_peer: BillingPeer) -> None:
    launch(aws_peer, "p4d.24xlarge")
    ops = CloudOps(AwsCloud(), lambda: None)
    [raw] = ops.backend.poll_instances().instances
    inst = priced(ops, raw.launch_time + 7)
    first_minute = P4D * 60 / 3600
    assert inst.accrued_cost == pytest.approx(first_minute)  # $0.546, not 7 seconds' $0.064
    window = (inst.launch_time, inst.launch_time + 7)
    disks = storage_cost(inst.volumes, *window)  # its root volume, a fraction of a cent
    assert costs.instance_spend(inst, *window) == pytest.approx(first_minute + disks)


def test_a_stop_and_a_start_begin_a_new_minimum(aws_peer: AwsPeer, billing_peer: BillingPeer) -> None:
    billing_peer.trail_refusal = "AccessDeniedException"  # observed runs only: said beside the figure
    instance_id = launch(aws_peer, "g5.xlarge")
    ec2 = aws_peer.client("ec2")
    ops = CloudOps(AwsCloud(), lambda: None)
    t0 = priced(ops, time.time()).launch_time
    priced(ops, t0 + 10)
    ec2.stop_instances(InstanceIds=[instance_id])
    priced(ops, t0 + 20)
    ec2.start_instances(InstanceIds=[instance_id])
    priced(ops, t0 + 30)
    inst = priced(ops, t0 + 40)
    assert inst.history == "observed"
    assert [(s.start - t0, None if s.end is None else s.end - t0) for s in inst.billing] == [(0, 20), (30, None)]
    compute = costs.instance_spend(inst, t0, t0 + 40) - storage_cost(inst.volumes, t0, t0 + 40)
    assert compute == pytest.approx(2 * G5 * 60 / 3600), "two runs, two minimums"


def test_a_stopped_instance_s_volume_keeps_accruing_at_its_type_s_price(aws_peer: AwsPeer, billing_peer: BillingPeer) -> None:
    instance_id = launch(aws_peer, "g5.xlarge")
    ec2 = aws_peer.client("ec2")
    volume = ec2.create_volume(AvailabilityZone="us-east-1a", Size=500, VolumeType="gp3", Iops=4000, Throughput=200)
    ec2.attach_volume(VolumeId=volume["VolumeId"], InstanceId=instance_id, Device="/dev/sdf")
    ec2.stop_instances(InstanceIds=[instance_id])
    ops = CloudOps(AwsCloud(), lambda: None)
    now = time.time() + 60
    inst = priced(ops, now)
    assert inst.state.value == "stopped"
    by_id = {v.volume_id: v for v in inst.volumes}
    gp3 = by_id[volume["VolumeId"]]
    assert (gp3.volume_type, gp3.size_gib, gp3.iops, gp3.throughput) == ("gp3", 500, 4000, 200)
    hour = (now, now + 3600)
    month = (month_end(now) - month_start(now)) if month_end(now) >= hour[1] else None
    if month is None:
        pytest.skip("the hour crosses a month's end")
    others = sum(costs.instance_spend(i, *hour) for i in [inst]) - (500 * 0.08 + 1000 * 0.005 + 75 * 0.04) * 3600 / month
    root = [v for v in inst.volumes if v.volume_id != gp3.volume_id]
    assert others == pytest.approx(sum(v.size_gib * {"gp2": 0.10, "gp3": 0.08}[v.volume_type] for v in root) * 3600 / month)
    assert costs.instance_spend(inst, *hour) > 0, "stopped: no compute, but the disks bill"


def test_a_restarted_instance_includes_its_earlier_runs_from_cloudtrail(aws_peer: AwsPeer, billing_peer: BillingPeer) -> None:
    instance_id = launch(aws_peer, "g5.xlarge")
    ops = CloudOps(AwsCloud(), lambda: None)
    [raw] = ops.backend.poll_instances().instances
    start = raw.launch_time
    billing_peer.record(instance_id, "RunInstances", start - 5 * 3600)
    billing_peer.record(instance_id, "StopInstances", start - 3 * 3600)
    billing_peer.record(instance_id, "StartInstances", start - 2)
    inst = priced(ops, start + 600)
    assert inst.history == "cloudtrail"
    window = (start - 6 * 3600, start + 600)
    spent = costs.instance_spend(inst, *window) - storage_cost(inst.volumes, *window)
    assert spent == pytest.approx(G5 * (2 * 3600 + 602) / 3600), "two hours earlier, then this run"
    assert [r.action for r in aws_peer.proxy.requests if r.service == "cloudtrail"] == ["LookupEvents"]
    ops.load_history([raw], start + 700)  # read once per instance, then kept
    assert [r.action for r in aws_peer.proxy.requests if r.service == "cloudtrail"] == ["LookupEvents"]


def test_cost_reconcile_json_reports_a_known_difference_exactly(aws_peer: AwsPeer, billing_peer: BillingPeer,
                                                                tmp_path, capsys) -> None:
    instance_id = launch(aws_peer, "g5.xlarge")
    [(yesterday, midnight)] = full_days(time.time(), 1)
    billing_peer.record(instance_id, "RunInstances", midnight + 10 * 3600)
    billing_peer.record(instance_id, "StopInstances", midnight + 12 * 3600)
    billing_peer.record(instance_id, "StartInstances", time.time() - 1)
    disks = storage_cost(AwsCloud().volumes(TEST_REGION), midnight, midnight + 86400)  # its root volume
    expected = 2 * G5 + disks
    billing_peer.bill(instance_id, yesterday, expected - 1.5)
    code = main(["cost", "reconcile", "--days", "1", "--json", "--cloud", "aws", "--region", TEST_REGION,
                 "--gpus", "off", "--jobs", "off", "--no-db", "--config", str(tmp_path / "none.toml")])
    out = capsys.readouterr().out
    assert code == 0, out
    doc = json.loads(out)
    [row] = doc["rows"]
    assert (row["instance_id"], row["day"]) == (instance_id, yesterday)
    assert row["estimate"] == pytest.approx(expected, abs=1e-6)
    assert row["difference"] == pytest.approx(1.5, abs=1e-6), "the console counts $1.50 more than the bill"
    assert row["difference_pct"] == pytest.approx(100 * row["difference"] / row["billed"], abs=1e-3)
    assert doc["spend_basis"] == "CloudTrail history"
    assert [r.action for r in aws_peer.proxy.requests if r.service == "ce"] == ["GetCostAndUsageWithResources"]


def test_cost_reconcile_without_a_cloud_says_so_in_one_line(tmp_path, capsys) -> None:
    code = main(["cost", "reconcile", "--demo", "--billing-calls", "0", "--no-db", "--config", str(tmp_path / "none.toml")])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "cannot reconcile" in err


def _cli(*extra: str, config: str) -> list[str]:
    return ["--cloud", "aws", "--region", TEST_REGION, "--gpus", "off", "--jobs", "off", "--config", config, *extra]


def test_reconcile_counts_against_the_billing_calls_limit(aws_peer: AwsPeer, billing_peer: BillingPeer,
                                                          tmp_path, capsys) -> None:
    launch(aws_peer, "g5.xlarge")
    args = ["cost", "reconcile", "--days", "2", *_cli("--billing-calls", "1", "--db", str(tmp_path / "c.db"),
                                                      config=str(tmp_path / "none.toml"))]
    assert main(args) == 0
    table = capsys.readouterr().out
    assert table.startswith("INSTANCE ") and "estimates: CloudTrail history" in table
    assert main(args) == 1, "the day's one Cost Explorer request is spent"
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "limit 1" in err
    assert [r.action for r in aws_peer.proxy.requests if r.service == "ce"] == ["GetCostAndUsageWithResources"]


def test_the_overview_shows_the_fleet_difference_for_the_last_full_day(aws_peer: AwsPeer, billing_peer: BillingPeer) -> None:
    from rich.style import Style

    from gpuconsole.core.fleet.console import Console, ConsoleOptions
    from gpuconsole.core.fleet.sources import SourceOptions
    from gpuconsole.ui.palette import Palette
    from gpuconsole.ui.panes.overview import spend_card

    instance_id = launch(aws_peer, "g5.xlarge")
    [(yesterday, midnight)] = full_days(time.time(), 1)
    billing_peer.record(instance_id, "RunInstances", midnight + 3600)
    billing_peer.record(instance_id, "StopInstances", midnight + 4 * 3600)
    billing_peer.record(instance_id, "StartInstances", time.time() - 1)
    disks = storage_cost(AwsCloud().volumes(TEST_REGION), midnight, midnight + 86400)
    billing_peer.bill(instance_id, yesterday, 3 * G5 + disks + 0.25)  # billed 25 cents more than estimated
    console = Console(ConsoleOptions(sources=SourceOptions(cloud="aws", regions=(TEST_REGION,), gpus="off", jobs="off"),
                                     interval=0.2, timeout=20))
    try:
        console.start(open_store=False)
        console.wait_for_first_answers(20)
        console.stop()
        assert console.services.cost_explorer is not None
        console.services.cost_explorer.fetch_resources()
        console.load_cloud_history()
        snap = console.snapshot
    finally:
        console.close()
    estimate = 3 * G5 + disks
    percent = 100 * -0.25 / (estimate + 0.25)
    assert snap.day_difference == f"{yesterday}: estimate ${estimate:,.2f} vs billed ${estimate + 0.25:,.2f}, -$0.25 ({percent:+.1f}%)"
    assert snap.spend_basis == "CloudTrail history"
    plain = Style()
    card = spend_card(snap, Palette(plain, plain, plain, plain, plain, plain)).plain
    assert f"vs bill {snap.day_difference}" in card and "spend: CloudTrail history" in card


def test_a_budget_says_its_spend_includes_cloudtrail_history(aws_peer: AwsPeer, billing_peer: BillingPeer,
                                                             tmp_path, capsys) -> None:
    instance_id = launch(aws_peer, "g5.xlarge")
    billing_peer.record(instance_id, "RunInstances", time.time() - 1)
    config = tmp_path / "budgets.toml"
    config.write_text('[[budgets]]\nname = "fleet"\namount = 1000\nperiod = "monthly"\n')
    assert main(["budget", "check", "--json", *_cli("--no-db", config=str(config))]) == 0
    [budget] = json.loads(capsys.readouterr().out)["budgets"]
    assert budget["spend_basis"] == "CloudTrail history"
    billing_peer.trail_refusal = "AccessDeniedException"
    assert main(["budget", "check", *_cli("--no-db", config=str(config))]) == 0
    assert "[spend: since last start only]" in capsys.readouterr().out


def test_cloudtrail_history_is_kept_in_the_store_and_only_what_is_newer_is_asked(
        aws_peer: AwsPeer, billing_peer: BillingPeer, tmp_path) -> None:
    from gpuconsole.core.fleet.store import Store

    store = Store(tmp_path / "cache.db")
    instance_id = launch(aws_peer, "g5.xlarge")
    [raw] = AwsCloud().poll_instances().instances
    start = raw.launch_time
    billing_peer.record(instance_id, "RunInstances", start - 5 * 3600)
    billing_peer.record(instance_id, "StopInstances", start - 3 * 3600)
    billing_peer.record(instance_id, "StartInstances", start - 2)
    try:
        priced(CloudOps(AwsCloud(), lambda: store), start + 600)
        billing_peer.events.clear()  # a second session can only know them from the Store
        inst = priced(CloudOps(AwsCloud(), lambda: store), start + 900)
    finally:
        store.close()
    window = (start - 6 * 3600, start + 900)
    spent = costs.instance_spend(inst, *window) - storage_cost(inst.volumes, *window)
    assert spent == pytest.approx(G5 * (2 * 3600 + 902) / 3600)
    first, second = [r for r in aws_peer.proxy.requests if r.action == "LookupEvents"]
    assert first.params["StartTime"] == pytest.approx(start + 600 - 90 * 86400)
    assert second.params["StartTime"] == pytest.approx(start + 600), "only what came after the kept answer"


def _spot_history_xml(points: list[tuple[float, float]]) -> str:
    """A ``DescribeSpotPriceHistory`` answer as EC2 sends it (g5.xlarge, us-east-1a)."""
    items = "".join(
        f"<item><instanceType>g5.xlarge</instanceType><productDescription>Linux/UNIX</productDescription>"
        f"<spotPrice>{price:.6f}</spotPrice><timestamp>{time.strftime('%Y-%m-%dT%H:%M:%S.000Z', time.gmtime(ts))}</timestamp>"
        f"<availabilityZone>us-east-1a</availabilityZone></item>" for ts, price in sorted(points, reverse=True))
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<DescribeSpotPriceHistoryResponse '
            'xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>8d3c7a2e-1b7f-4f0e-9d55-6c1a2b3c4d5e</requestId>'
            f"<spotPriceHistorySet>{items}</spotPriceHistorySet><nextToken/></DescribeSpotPriceHistoryResponse>")


def test_spot_is_billed_at_each_interval_s_price(aws_peer: AwsPeer, billing_peer: BillingPeer) -> None:
    aws_peer.client("ec2").run_instances(
        ImageId=aws_peer.image_id(), InstanceType="g5.xlarge", MinCount=1, MaxCount=1,
        Placement={"AvailabilityZone": "us-east-1a"},
        InstanceMarketOptions={"MarketType": "spot", "SpotOptions": {"SpotInstanceType": "one-time"}})
    ops = CloudOps(AwsCloud(), lambda: None)
    [raw] = ops.backend.poll_instances().instances
    start = raw.launch_time
    aws_peer.proxy.answer("DescribeSpotPriceHistory", _spot_history_xml([(start - 1000, 0.30), (start + 100, 0.50)]))
    inst = priced(ops, start + 200)
    assert [(s.start - start, s.price_per_hour) for s in inst.billing] == [(0, 0.30), (100, 0.50)]
    window = (start, start + 200)
    compute = costs.instance_spend(inst, *window) - storage_cost(inst.volumes, *window)
    assert compute == pytest.approx((100 * 0.30 + 100 * 0.50) / 3600), "not 200 s at the latest price"
