"""The RunInstances request and its Terraform twin are built from one LaunchSpec."""

from __future__ import annotations

import json

from gpuconsole.backends.aws.ec2_request import (
    request_json,
    run_instances_params,
    terraform_block,
)
from gpuconsole.model import LaunchSpec, Market

TAGS = (("Name", "bert-train"), ("Owner", "ana"), ("Project", "nlp"), ("Budget", "research"))


def spec(**changes) -> LaunchSpec:
    base = dict(region="us-east-1", instance_type="p4de.24xlarge", image_id="ami-0123456789abcdef0",
                availability_zone="us-east-1b", tags=TAGS)
    base.update(changes)
    return LaunchSpec(**base)


def test_safe_defaults_encryption_and_imdsv2() -> None:
    params = run_instances_params(spec())
    ebs = params["BlockDeviceMappings"][0]["Ebs"]
    assert ebs["Encrypted"] is True and "KmsKeyId" not in ebs and ebs["VolumeSize"] == 200
    assert params["MetadataOptions"]["HttpTokens"] == "required"
    assert params["Placement"] == {"AvailabilityZone": "us-east-1b"}
    assert "InstanceMarketOptions" not in params and "DryRun" not in params
    assert params["MinCount"] == params["MaxCount"] == 1


def test_spot_with_max_price_kms_key_subnet_and_dry_run() -> None:
    params = run_instances_params(
        spec(market=Market.SPOT, max_spot_price=12.5, kms_key_id="alias/gpu", subnet_id="subnet-0abc",
             security_group_ids=("sg-1", "sg-2"), key_name="ops", count=2),
        dry_run=True,
    )
    assert params["InstanceMarketOptions"] == {
        "MarketType": "spot",
        "SpotOptions": {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate", "MaxPrice": "12.5000"},
    }
    assert params["BlockDeviceMappings"][0]["Ebs"]["KmsKeyId"] == "alias/gpu"
    assert params["SubnetId"] == "subnet-0abc" and "Placement" not in params
    assert params["SecurityGroupIds"] == ["sg-1", "sg-2"] and params["KeyName"] == "ops"
    assert params["DryRun"] is True and params["MaxCount"] == 2


def test_tags_on_instance_and_volume() -> None:
    specs = run_instances_params(spec())["TagSpecifications"]
    assert [s["ResourceType"] for s in specs] == ["instance", "volume"]
    assert {t["Key"]: t["Value"] for t in specs[0]["Tags"]}["Budget"] == "research"


def test_every_launch_is_tagged_for_the_admin_role_that_may_change_it() -> None:
    """The admin IAM role of ``access iam-policy`` changes only instances tagged ManagedBy =
    gpuconsole, and launches only with that request tag: every launch carries it."""
    from gpuconsole.core.access.iam_policy import TAG_KEY, TAG_VALUE, roles

    for tags in ((), TAGS):
        specs = run_instances_params(spec(tags=tags))["TagSpecifications"]
        for one in specs:
            assert {"Key": TAG_KEY, "Value": TAG_VALUE} in one["Tags"]
        assert f'{TAG_KEY} = "{TAG_VALUE}"' in terraform_block(spec(tags=tags)).replace("  ", " ")
    admin = json.dumps(roles()[0].policy)
    assert f"aws:RequestTag/{TAG_KEY}" in admin and f"aws:ResourceTag/{TAG_KEY}" in admin
    own = run_instances_params(spec(tags=((TAG_KEY, "team-a"),)))["TagSpecifications"][0]["Tags"]
    assert own == [{"Key": TAG_KEY, "Value": "team-a"}]  # a spec that sets the key itself keeps its value


def test_json_and_terraform_say_the_same() -> None:
    s = spec(market=Market.SPOT, imdsv2_required=False, encrypted=True, tags=TAGS + (("team:cost", 'a "b"'),))
    assert json.loads(request_json(s)) == run_instances_params(s)
    tf = terraform_block(s)
    assert tf.startswith('resource "aws_instance" "gpu" {') and tf.endswith("}")
    assert 'instance_type          = "p4de.24xlarge"' in tf
    assert 'http_tokens                 = "optional"' in tf
    assert "encrypted   = true" in tf and 'market_type = "spot"' in tf
    assert '"team:cost" = "a \\"b\\""' in tf  # keys that are not identifiers are quoted
    assert tf.count("{") == tf.count("}")
