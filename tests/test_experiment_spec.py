"""Experiment files: the issue's example reads as written; every bad field names its key."""

from __future__ import annotations

import pytest

from gpuconsole.core.ops.experiments.spec import SpecError, parse_file, parse_text
from gpuconsole.core.ops.manifests import manifests

EXAMPLE = """\
name = "resnet50-epoch"
namespace = "ml-vision"
image = "nvcr.io/nvidia/pytorch:24.05-py3"
command = ["python", "bench.py", "--epochs", "1"]
gpus = 1
metric = { regex = "samples/s: ([0-9.]+)", unit = "samples/s", better = "higher" }
work = { amount = 1281167, unit = "samples" }     # one ImageNet epoch
repeats = 3
max_cost = 200

[[arms]]
instance_type = "p4d.24xlarge"
market = "on-demand"

[[arms]]
instance_type = "g5.xlarge"

[[arms]]
instance_type = "g6.xlarge"
market = "spot"
"""


def test_the_example_file_reads_as_written() -> None:
    spec = parse_text(EXAMPLE)
    assert spec.name == "resnet50-epoch" and spec.namespace == "ml-vision" and spec.repeats == 3
    assert spec.max_cost == 200 and spec.work.amount == 1281167 and spec.metric.is_rate
    assert [(a.instance_type, a.market) for a in spec.arms] == [
        ("p4d.24xlarge", "on-demand"), ("g5.xlarge", "on-demand"), ("g6.xlarge", "spot")]
    assert spec.metric.read(["step 1", "samples/s: 812.5", "samples/s: 820.25"]) == 820.25


def test_a_run_is_a_job_pinned_to_its_instance_type_and_labelled() -> None:
    spec = parse_text(EXAMPLE)
    job = manifests(spec.job_request(spec.arms[2], 2, 1, "ana"))[0]
    pod = job["spec"]["template"]
    assert pod["spec"]["nodeSelector"]["node.kubernetes.io/instance-type"] == "g6.xlarge"
    labels = pod["metadata"]["labels"]
    assert labels["gpuconsole.io/experiment"] == "resnet50-epoch"
    assert labels["gpuconsole.io/arm"] == spec.arms[2].key and labels["gpuconsole.io/repeat"] == "2"
    assert job["metadata"]["labels"]["owner"] == "ana" and job["spec"]["backoffLimit"] == 0


def test_a_mig_slice_arm_asks_for_the_mig_resource() -> None:
    text = EXAMPLE.replace('instance_type = "p4d.24xlarge"\nmarket = "on-demand"',
                           'instance_type = "p4d.24xlarge"\nmig_profile = "1g.10gb"')
    spec = parse_text(text)
    container = manifests(spec.job_request(spec.arms[0], 1, 1))[0]["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/mig-1g.10gb": 1}


@pytest.mark.parametrize(("change", "key"), [
    (('instance_type = "g5.xlarge"', 'instance_type = "g9.huge"'), "arms[1].instance_type"),
    (('regex = "samples/s: ([0-9.]+)"', 'regex = "samples/s: [0-9.]+"'), "metric.regex"),
    (('regex = "samples/s: ([0-9.]+)"', 'regex = "(a)(b)"'), "metric.regex"),
    (("repeats = 3", "repeats = 0"), "repeats"),
    (("max_cost = 200", "max_cost = -5"), "max_cost"),
    (("max_cost = 200", "max_cost = nan"), "max_cost"),
    (("max_cost = 200", "max_cost = inf"), "max_cost"),
    (("max_cost = 200", "max_cost = 1e308"), "max_cost"),
    (("repeats = 3", "repeats = 3\ntimeout_minutes = 1e300"), "timeout_minutes"),
    (('market = "spot"', 'market = "cheap"'), "arms[2].market"),
    (("amount = 1281167", "amount = 0"), "work.amount"),
    (('name = "resnet50-epoch"', 'name = "ResNet 50"'), "name"),
    (('namespace = "ml-vision"', 'namespace = "ML_Vision"'), "namespace"),
    (('better = "higher"', 'better = "more"'), "metric.better"),
    (("gpus = 1", "gpus = -1"), "gpus"),
    (("repeats = 3", "repeats = 3\ncolour = 1"), "colour"),
])
def test_every_bad_field_gets_one_line_naming_its_key(change: tuple[str, str], key: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_text(EXAMPLE.replace(*change, 1))
    assert caught.value.key == key
    message = str(caught.value)
    assert message.startswith(f"{key}: ") and "\n" not in message


def test_a_file_that_is_not_toml_or_not_there(tmp_path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("name = \n", encoding="utf-8")
    with pytest.raises(SpecError, match="^file: not TOML"):
        parse_file(bad)
    with pytest.raises(SpecError, match="^file: cannot read"):
        parse_file(tmp_path / "missing.toml")


def test_no_arms_and_the_same_arm_twice() -> None:
    with pytest.raises(SpecError, match=r"^arms: "):
        parse_text(EXAMPLE.split("[[arms]]")[0])
    twice = EXAMPLE.replace('instance_type = "g6.xlarge"\nmarket = "spot"', 'instance_type = "g5.xlarge"')
    with pytest.raises(SpecError, match=r"^arms\[2\]: the same arm"):
        parse_text(twice)


def test_the_smallest_file_needs_a_name_an_image_and_an_arm() -> None:
    spec = parse_text('name = "tiny"\nimage = "busybox"\n[[arms]]\ninstance_type = "g5.xlarge"\n')
    assert spec.command == () and spec.namespace == "default" and spec.repeats == 3
    assert spec.metric.wall_time and spec.metric.better == "lower" and spec.max_cost is None
