"""One :class:`LaunchSpec` → the EC2 ``RunInstances`` request, and the same as Terraform.

Pure data, no boto3: the AWS adapter sends :func:`run_instances_params` as it is, and the
launch wizard shows the very same dictionary (and the equivalent ``aws_instance`` block) before
anything is sent, so what the user reviews is what EC2 receives.
"""

from __future__ import annotations

import json
from typing import Any

from gpuconsole.model import LaunchSpec, Market

ROOT_DEVICE = "/dev/sda1"  # the Deep Learning AMIs (Ubuntu and Amazon Linux) boot from it
# Every instance and volume a launch creates carries this tag: the IAM roles that
# ``gpuconsole access iam-policy`` prints let an admin change only what carries it.
MANAGED_TAG = ("ManagedBy", "gpuconsole")


def launch_tags(spec: LaunchSpec) -> tuple[tuple[str, str], ...]:
    """``spec``'s tags, and :data:`MANAGED_TAG` unless the spec sets that key itself."""
    if any(key == MANAGED_TAG[0] for key, _ in spec.tags):
        return tuple(spec.tags)
    return (*spec.tags, MANAGED_TAG)


def run_instances_params(spec: LaunchSpec, *, dry_run: bool = False) -> dict[str, Any]:
    """The keyword arguments of ``ec2.run_instances`` for ``spec``."""
    ebs: dict[str, Any] = {
        "VolumeSize": spec.root_volume_gib,
        "VolumeType": "gp3",
        "DeleteOnTermination": True,
        "Encrypted": spec.encrypted,
    }
    if spec.encrypted and spec.kms_key_id:
        ebs["KmsKeyId"] = spec.kms_key_id
    params: dict[str, Any] = {
        "ImageId": spec.image_id,
        "InstanceType": spec.instance_type,
        "MinCount": spec.count,
        "MaxCount": spec.count,
        "BlockDeviceMappings": [{"DeviceName": ROOT_DEVICE, "Ebs": ebs}],
        "MetadataOptions": {
            "HttpTokens": "required" if spec.imdsv2_required else "optional",
            "HttpEndpoint": "enabled",
            "HttpPutResponseHopLimit": 2,  # containers on the instance reach IMDS through one hop
        },
    }
    if spec.subnet_id:
        params["SubnetId"] = spec.subnet_id
    elif spec.availability_zone:
        params["Placement"] = {"AvailabilityZone": spec.availability_zone}
    if spec.security_group_ids:
        params["SecurityGroupIds"] = list(spec.security_group_ids)
    if spec.key_name:
        params["KeyName"] = spec.key_name
    if spec.market is Market.SPOT:
        spot: dict[str, Any] = {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"}
        if spec.max_spot_price is not None:
            spot["MaxPrice"] = f"{spec.max_spot_price:.4f}"
        params["InstanceMarketOptions"] = {"MarketType": "spot", "SpotOptions": spot}
    tags = [{"Key": k, "Value": v} for k, v in launch_tags(spec)]
    params["TagSpecifications"] = [
        {"ResourceType": "instance", "Tags": tags},
        {"ResourceType": "volume", "Tags": tags},
    ]
    if dry_run:
        params["DryRun"] = True
    return params


def request_json(spec: LaunchSpec) -> str:
    """The request as indented JSON, to read or copy."""
    return json.dumps(run_instances_params(spec), indent=2)


def terraform_block(spec: LaunchSpec, resource_name: str = "gpu") -> str:
    """An ``aws_instance`` resource that launches the same thing."""
    name = resource_name
    lines = [f'resource "aws_instance" "{name}" {{']
    if spec.count != 1:
        lines.append(f"  count                  = {spec.count}")
    lines.append(f'  ami                    = "{spec.image_id}"')
    lines.append(f'  instance_type          = "{spec.instance_type}"')
    if spec.subnet_id:
        lines.append(f'  subnet_id              = "{spec.subnet_id}"')
    elif spec.availability_zone:
        lines.append(f'  availability_zone      = "{spec.availability_zone}"')
    if spec.security_group_ids:
        groups = ", ".join(f'"{g}"' for g in spec.security_group_ids)
        lines.append(f"  vpc_security_group_ids = [{groups}]")
    if spec.key_name:
        lines.append(f'  key_name               = "{spec.key_name}"')
    lines += [
        "",
        "  root_block_device {",
        f"    volume_size = {spec.root_volume_gib}",
        '    volume_type = "gp3"',
        f"    encrypted   = {str(spec.encrypted).lower()}",
    ]
    if spec.encrypted and spec.kms_key_id:
        lines.append(f'    kms_key_id  = "{spec.kms_key_id}"')
    lines += [
        "  }",
        "",
        "  metadata_options {",
        '    http_endpoint               = "enabled"',
        f'    http_tokens                 = "{"required" if spec.imdsv2_required else "optional"}"',
        "    http_put_response_hop_limit = 2",
        "  }",
    ]
    if spec.market is Market.SPOT:
        lines += ["", "  instance_market_options {", '    market_type = "spot"', "    spot_options {",
                  '      spot_instance_type             = "one-time"',
                  '      instance_interruption_behavior = "terminate"']
        if spec.max_spot_price is not None:
            lines.append(f'      max_price                      = "{spec.max_spot_price:.4f}"')
        lines += ["    }", "  }"]
    tags = launch_tags(spec)
    lines += ["", "  tags = {"]
    width = max(len(_hcl_key(k)) for k, _ in tags)
    lines += [f"    {_hcl_key(k).ljust(width)} = {json.dumps(v)}" for k, v in tags]
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines)


def _hcl_key(key: str) -> str:
    """A tag key as an HCL map key: bare when it is an identifier, quoted otherwise."""
    return key if key.isidentifier() else json.dumps(key)
