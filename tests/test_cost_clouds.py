"""``gpuconsole cost clouds``: the same GPU on AWS and Alibaba Cloud, each in its own currency and
converted through [money] rates; Alibaba Cloud's prices from the local ECS peer through the
official SDK (DescribePrice), AWS's from its catalog."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuconsole.cli.main import main



def _config(tmp_path: Path, url: str, money: str = "[money]\nrates = { CNY = 0.138 }\n") -> Path:
    path = tmp_path / "config.toml"
    path.write_text(f'[alibaba]\nregions = ["cn-hangzhou"]\nendpoint = "{url}"\n\n{money}')
    return path


def _run(config: Path, *extra: str) -> list[str]:
    return ["cost", "clouds", "T4", "--cloud", "alibaba", "--no-db", "--gpus", "off", "--jobs", "off",
            "--config", str(config), *extra]


def test_a_t4_on_aws_and_on_alibaba_cloud_each_in_its_currency_and_in_dollars(ecs, tmp_path, capsys):
    assert main(_run(_config(tmp_path, ecs.url), "--json")) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {(r["cloud"], r["instance_type"], r["region"]): r for r in doc["rows"]}
    ali = rows[("alibaba", "ecs.gn6i-c4g1.xlarge", "cn-hangzhou")]
    assert (ali["currency"], ali["per_gpu_hour"], ali["usd_per_gpu_hour"]) == ("CNY", 8.2, 1.1316)
    aws = rows[("aws", "g4dn.xlarge", "us-east-1")]
    assert (aws["currency"], aws["per_gpu_hour"], aws["usd_per_gpu_hour"]) == ("USD", 0.526, 0.526)
    assert all("T4" in r["gpu_model"] for r in doc["rows"]) and doc["missing_rates"] == []
    dollars = [r["usd_per_gpu_hour"] for r in doc["rows"]]
    assert dollars == sorted(dollars)  # cheapest in dollars first
    assert "DescribePrice" in ecs.actions()


def test_without_a_rate_the_dollar_price_is_unknown_never_a_guess(ecs, tmp_path, capsys):
    assert main(_run(_config(tmp_path, ecs.url, money=""))) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "ecs.gn6i-c4g1.xlarge" in x)
    assert "CNY 8.2000" in line and line.rstrip().endswith("unknown")
    assert "no [money] rates for CNY" in out
    assert "$0.5260" in next(x for x in out.splitlines() if x.startswith("aws") and "g4dn.xlarge" in x)


def test_in_keeps_the_regions_asked_for(ecs, tmp_path, capsys):
    assert main(_run(_config(tmp_path, ecs.url), "--json", "--in", "cn-hangzhou", "--in", "us-east-1")) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {r["region"] for r in doc["rows"]} == {"cn-hangzhou", "us-east-1"}


def test_the_calculator_takes_a_type_billed_in_another_currency_only_through_a_rate():
    from gpuconsole.core.money.calculator import PRESETS, CalculatorError, from_catalog
    from gpuconsole.core.money.catalog import Catalog
    from gpuconsole.model import InstanceType, RegionPrice

    gn7e = InstanceType("ecs.gn7e-c16g1.32xlarge", "NVIDIA A100", 8, 80, 128, 1000, 0.0, cloud="alibaba", currency="CNY")
    catalog = Catalog((gn7e,), (RegionPrice(gn7e.name, "cn-hangzhou", 200.0),), "live", 0.0)
    base = PRESETS["resnet50"].inputs
    with pytest.raises(CalculatorError, match="priced in CNY: set \\[money\\] rates"):
        from_catalog(catalog, gn7e.name, "cn-hangzhou", base)
    inputs = from_catalog(catalog, gn7e.name, "cn-hangzhou", base, rates={"CNY": 0.14})
    assert inputs.gpu_hour_price == pytest.approx(200.0 * 0.14 / 8) and inputs.cloud_gpus == 8
    assert "CNY 200.00/h" in inputs.cloud_label
