"""A launch request (:class:`~gpuconsole.model.LaunchSpec`) checked field by field before the
cloud sees it: names and ids in EC2's shapes, counts, volume sizes, KMS keys and tags."""

from __future__ import annotations

import re

from gpuconsole.model import LaunchSpec, Market

_REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d+$")
_INSTANCE_TYPE = re.compile(r"^[a-z][a-z0-9-]*\.[a-z0-9-]+$")
_HEX_ID = r"(?:[0-9a-f]{8}|[0-9a-f]{17})"
_AMI = re.compile(rf"^ami-{_HEX_ID}$")
_SUBNET = re.compile(rf"^subnet-{_HEX_ID}$")
_SECURITY_GROUP = re.compile(rf"^sg-{_HEX_ID}$")
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_KEY_ID = rf"(?:{_UUID}|mrk-[0-9a-f]{{32}})"
_ALIAS = r"alias/[A-Za-z0-9/_-]{1,250}"
_KMS_KEY = re.compile(
    rf"^(?:{_KEY_ID}|{_ALIAS}|arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{{12}}:(?:key/{_KEY_ID}|{_ALIAS}))$"
)
MAX_COUNT = 100
MIN_ROOT_GIB = 8
MAX_ROOT_GIB = 16384
MAX_TAG_KEY = 128
MAX_TAG_VALUE = 256
MAX_TAGS = 50


def validate(spec: LaunchSpec) -> dict[str, str]:
    """Field name (a :class:`LaunchSpec` attribute, or ``tag:Owner``) → one-line message."""
    problems: dict[str, str] = {}
    if not spec.region:
        problems["region"] = "choose a region"
    elif not _REGION.match(spec.region):
        problems["region"] = f"{spec.region!r} is not a region name like us-east-1"
    if not spec.instance_type:
        problems["instance_type"] = "choose an instance type"
    elif not _INSTANCE_TYPE.match(spec.instance_type):
        problems["instance_type"] = f"{spec.instance_type!r} is not an instance type like g5.xlarge"
    if not spec.image_id:
        problems["image_id"] = "choose an image (AMI)"
    elif not _AMI.match(spec.image_id):
        problems["image_id"] = "an AMI id is ami- followed by 8 or 17 hex digits"
    if not 1 <= spec.count <= MAX_COUNT:
        problems["count"] = f"launch between 1 and {MAX_COUNT} instances"
    if not MIN_ROOT_GIB <= spec.root_volume_gib <= MAX_ROOT_GIB:
        problems["root_volume_gib"] = f"the root volume must be {MIN_ROOT_GIB} to {MAX_ROOT_GIB} GiB"
    if spec.kms_key_id:
        if not spec.encrypted:
            problems["kms_key_id"] = "a KMS key applies only to an encrypted volume"
        elif not _KMS_KEY.match(spec.kms_key_id):
            problems["kms_key_id"] = "use a key id, a key ARN or alias/NAME"
    if spec.max_spot_price is not None:
        if spec.market is not Market.SPOT:
            problems["max_spot_price"] = "a maximum price applies only to spot"
        elif not spec.max_spot_price > 0:
            problems["max_spot_price"] = "the maximum spot price must be more than 0"
    if spec.subnet_id and not _SUBNET.match(spec.subnet_id):
        problems["subnet_id"] = "a subnet id is subnet- followed by 8 or 17 hex digits"
    bad_groups = [g for g in spec.security_group_ids if not _SECURITY_GROUP.match(g)]
    if bad_groups:
        problems["security_group_ids"] = f"{bad_groups[0]!r} is not a security group id (sg-…)"
    if len(spec.key_name) > 255:
        problems["key_name"] = "a key pair name is at most 255 characters"
    if len(spec.tags) > MAX_TAGS:
        problems["tags"] = f"at most {MAX_TAGS} tags"
    seen: set[str] = set()
    for key, value in spec.tags:
        field_name = f"tag:{key}"
        if field_name in problems:
            continue
        if not key.strip():
            problems[field_name] = "a tag key cannot be empty"
        elif len(key) > MAX_TAG_KEY:
            problems[field_name] = f"a tag key is at most {MAX_TAG_KEY} characters"
        elif key.lower().startswith("aws:"):
            problems[field_name] = "tag keys starting with aws: are reserved"
        elif key in seen:
            problems[field_name] = "the same tag key is given twice"
        elif len(value) > MAX_TAG_VALUE:
            problems[field_name] = f"a tag value is at most {MAX_TAG_VALUE} characters"
        seen.add(key)
    return problems

