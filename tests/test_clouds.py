"""Several clouds at once: ``--cloud`` lists, the ``[alibaba]`` table, ``cloud`` and ``bills_now``
in JSON, and a third provider added in a few lines without touching the layer."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from gpuconsole.backends import registry
from gpuconsole.backends.base import Capability
from gpuconsole.backends.clouds import PROVIDERS, CloudSet, Provider, provider_of_type, register_provider
from gpuconsole.cli.main import main
from gpuconsole.core.fleet.source_names import check_cloud
from gpuconsole.model import CloudReading, Instance, InstanceState, Market, SourceKind

FIELDS = {"instance_id", "instance_type", "gpus", "market", "state", "price_per_hour", "availability_zone", "region",
          "cloud", "currency", "bills_now"}



def _config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(f'[alibaba]\nregions = ["cn-hangzhou"]\nendpoint = "{url}"\n')
    return path


def _snapshot(capsys, *argv: str) -> dict:
    # The wait ends at every source's first answer: room for AWS and Alibaba polled in turn on a loaded machine.
    assert main(["snapshot", "--json", "--no-db", "--wait", "60", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_snapshot_json_lists_the_peers_gpu_instances(ecs, tmp_path, capsys):
    running = ecs.world.add("ecs.gn7i-c8g1.2xlarge")
    kept = ecs.world.add("ecs.gn6i-c4g1.xlarge", status="Stopped", stopped_mode="KeepCharging")
    saved = ecs.world.add("ecs.gn7e-c16g1.4xlarge", status="Stopped", stopped_mode="StopCharging")
    ecs.world.add("ecs.g7.large")
    doc = _snapshot(capsys, "--cloud", "alibaba", "--config", str(_config(tmp_path, ecs.url)))
    rows = {i["instance_id"]: i for i in doc["instances"]}
    assert set(rows) == {running, kept, saved}
    assert all(FIELDS <= set(r) for r in rows.values())
    assert rows[running]["cloud"] == "alibaba" and rows[running]["currency"] == "CNY"
    assert rows[running]["gpus"] == 1 and rows[running]["region"] == "cn-hangzhou"
    assert [rows[i]["bills_now"] for i in (running, kept, saved)] == [True, True, False]
    assert doc["spend"]["burn_per_hour"] == 0  # yuan are not added to a dollar total…
    assert doc["spend"]["left_out"] == "leaves out 3 instances billed in CNY (no [money] rates for CNY)"


def test_money_rates_convert_the_fleet_totals(ecs, tmp_path, capsys):
    ecs.world.add("ecs.gn7i-c8g1.2xlarge")
    path = _config(tmp_path, ecs.url)
    path.write_text(path.read_text() + "[money]\nrates = { CNY = 0.5 }\n")
    doc = _snapshot(capsys, "--cloud", "alibaba", "--config", str(path))
    assert doc["spend"]["burn_per_hour"] == pytest.approx(14.9 * 0.5) and doc["spend"]["left_out"] is None


def test_aws_and_alibaba_together(aws_peer, ecs, tmp_path, capsys):
    ec2 = aws_peer.client("ec2")
    made = ec2.run_instances(ImageId=aws_peer.image_id(), InstanceType="g4dn.xlarge", MinCount=1, MaxCount=1)
    aws_id = made["Instances"][0]["InstanceId"]
    ali_id = ecs.world.add("ecs.gn7i-c8g1.2xlarge")
    doc = _snapshot(capsys, "--cloud", "aws,alibaba", "--config", str(_config(tmp_path, ecs.url)))
    clouds = {i["instance_id"]: (i["cloud"], i["currency"]) for i in doc["instances"]}
    assert clouds[aws_id] == ("aws", "USD") and clouds[ali_id] == ("alibaba", "CNY")


def test_auto_watches_every_cloud_set_up(aws_peer, ecs, tmp_path, capsys):
    ali_id = ecs.world.add("ecs.gn7i-c8g1.2xlarge")
    doc = _snapshot(capsys, "--config", str(_config(tmp_path, ecs.url)))
    assert ali_id in {i["instance_id"] for i in doc["instances"]}
    names = {s["name"] for s in doc["sources"]}
    assert any("alibaba" in n for n in names), names


def test_cloud_values():
    assert check_cloud("aws, alibaba,aws") == "aws,alibaba"
    assert check_cloud("off") == "off"
    with pytest.raises(ValueError, match="unknown cloud 'gcp'"):
        check_cloud("aws,gcp")


def test_a_bad_alibaba_table_is_one_line(tmp_path, capsys):
    path = tmp_path / "config.toml"
    path.write_text('[alibaba]\nregions = ["Hangzhou!"]\n')
    assert main(["snapshot", "--json", "--no-db", "--cloud", "alibaba", "--config", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "[alibaba] key regions" in err[0]


# ----------------------------------------------------------------------- a third provider


class FakeCloud:
    """A provider written the way a new adapter would be: the neutral model, nothing else."""

    name = "fakecloud"
    regions = ("fk-north-1",)
    capabilities = frozenset({Capability.STOP})

    def __init__(self) -> None:
        self.stopped: list[str] = []

    def poll_instances(self) -> CloudReading:
        one = Instance("fk-0001", "fk.gpu.a10", "fk-north-1", "fk-north-1a", Market.SPOT, InstanceState.RUNNING,
                       time.time(), 1.5, gpus=1, gpu_model="A10", cloud="fakecloud", currency="EUR")
        return CloudReading((one,), taken_at=time.time())

    def stop(self, region: str, instance_id: str) -> None:
        self.stopped.append(instance_id)

    def close(self) -> None:
        pass


def test_a_third_provider_registers_in_a_few_lines(ecs, tmp_path, capsys, monkeypatch):
    fake = FakeCloud()
    monkeypatch.setitem(PROVIDERS, "fakecloud", PROVIDERS["aws"])  # undone after the test
    register_provider(Provider("fakecloud", "Fake Cloud", re.compile(r"fk-\d{4}"), "fk."))
    monkeypatch.setitem(registry.SOURCES[SourceKind.CLOUD], "fakecloud",
                        registry.SourceEntry(SourceKind.CLOUD, "fakecloud", lambda _o, _c, _w: fake,
                                             set_up=lambda _o, _e: False))
    ali_id = ecs.world.add("ecs.gn7i-c8g1.2xlarge")
    doc = _snapshot(capsys, "--cloud", "alibaba,fakecloud", "--config", str(_config(tmp_path, ecs.url)))
    rows = {i["instance_id"]: i for i in doc["instances"]}
    assert rows["fk-0001"]["cloud"] == "fakecloud" and rows["fk-0001"]["currency"] == "EUR"
    assert rows[ali_id]["cloud"] == "alibaba"
    both = CloudSet([fake, registry.build(SourceKind.CLOUD, "alibaba", _Settings(ecs.url), clock=time.time)])
    both.poll_instances()
    both.stop("fk-north-1", "fk-0001")
    assert fake.stopped == ["fk-0001"] and provider_of_type("fk.gpu.a10", tuple(both.members)) == "fakecloud"


class _Settings:
    def __init__(self, url: str) -> None:
        self.alibaba = registry.alibaba_settings(regions=("cn-hangzhou",), endpoint=url)


def test_access_whoami_reports_the_alibaba_caller(ecs, tmp_path, capsys):
    path = _config(tmp_path, ecs.url)
    path.write_text(path.read_text() + f'sts_endpoint = "{ecs.url}"\n')
    assert main(["access", "whoami", "--json", "--cloud", "aws,alibaba", "--config", str(path), "--no-db",
                 "--gpus", "off", "--jobs", "off"]) == 0
    answer = json.loads(capsys.readouterr().out)
    section = answer["alibaba"]
    assert section["caller"] == "acs:ram::1234567890123456:user/gpu-operator"
    assert section["account"] == "1234567890123456" and section["identity_type"] == "RAMUser"
    assert "GetCallerIdentity" in ecs.actions()


def test_whoami_leaves_out_a_cloud_not_watched(capsys):
    assert main(["access", "whoami", "--json", "--cloud", "off", "--no-db", "--gpus", "off", "--jobs", "off"]) == 0
    assert "alibaba" not in json.loads(capsys.readouterr().out)


class _Billing:
    name = "billing"
    regions = ("us-east-1",)
    capabilities = frozenset()

    def volumes(self, region):
        return (region,)

    def cost_and_usage(self, start, end, group_by_tag=None):
        return ("billed",)

    def poll_instances(self):
        return CloudReading((), taken_at=0.0)

    def close(self):
        pass


def test_a_cloud_set_keeps_the_capabilities_of_its_members():
    from gpuconsole.backends.base import BillingReports, CredentialSwitching, VolumeListing

    both = CloudSet([_Billing(), FakeCloud()])
    assert isinstance(both, BillingReports) and isinstance(both, VolumeListing)
    assert not isinstance(both, CredentialSwitching)  # no member switches credentials
    assert both.cost_and_usage(0, 1) == ("billed",)
    assert both.volumes("us-east-1") == ("us-east-1",)
    assert both.volumes("fk-north-1") == ()  # a region the other cloud watches


def test_the_text_report_names_each_instances_cloud_and_currency(ecs, tmp_path, capsys):
    ecs.world.add("ecs.gn6i-c4g1.xlarge", status="Stopped", stopped_mode="KeepCharging")
    assert main(["snapshot", "--wide", "--no-db", "--cloud", "alibaba", "--config", str(_config(tmp_path, ecs.url))]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "ecs.gn6i-c4g1.xlarge" in line)
    assert "alibaba" in row and "stopped $" in row and "8.200 CNY" in row
