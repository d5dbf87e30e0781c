"""Experiments across clouds: an arm may name its cloud (``alibaba:ecs.gn7i-c8g1.2xlarge``); its
Job asks for the type's own node label; a price nobody knows is NaN and never passes a cost cap."""

from __future__ import annotations

import math

import pytest

from gpuconsole.core.ops.experiments.pricing import ArmPrices
from gpuconsole.core.ops.experiments.spec import SpecError, parse_text
from tests.test_experiment_spec import EXAMPLE

ALIBABA_ARM = '\n[[arms]]\ninstance_type = "alibaba:ecs.gn7i-c8g1.2xlarge"\nmarket = "spot"\n'


def test_an_arm_on_alibaba_cloud():
    spec = parse_text(EXAMPLE + ALIBABA_ARM)
    arm = spec.arms[-1]
    assert (arm.cloud, arm.type_name, arm.key) == ("alibaba", "ecs.gn7i-c8g1.2xlarge", "ecs-gn7i-c8g1-2xl-spot")
    job = spec.job_request(arm, 1, 1)
    assert ("node.kubernetes.io/instance-type", "ecs.gn7i-c8g1.2xlarge") in job.node_selector
    assert spec.arms[0].cloud == "" and spec.arms[0].type_name == "p4d.24xlarge"


@pytest.mark.parametrize(("arm", "words"), [
    ("alibaba:p4d.24xlarge", "is not an instance type of alibaba"),
    ("gcp:a2-highgpu-1g", "unknown cloud 'gcp'"),
    ("alibaba:ecs.gn99-nothing.xlarge", "unknown instance type"),
])
def test_a_wrong_cloud_or_type_names_the_key(arm, words):
    with pytest.raises(SpecError, match=words) as caught:
        parse_text(EXAMPLE + f'\n[[arms]]\ninstance_type = "{arm}"\n')
    assert "arms[3].instance_type" in str(caught.value)


def test_a_price_nobody_knows_is_nan_never_zero():
    prices = ArmPrices()
    assert math.isnan(prices.on_demand("alibaba:ecs.gn7i-c8g1.2xlarge"))
    assert prices.on_demand("p4d.24xlarge") > 0
