"""A launch request (:class:`~gpuconsole.model.LaunchSpec`) checked field by field before the
cloud sees it: counts, volume sizes and tags here, and names and ids in the forms of the provider
that offers the type (its own checks, declared with it in :mod:`gpuconsole.backends.clouds`), and
the provider's own options (:class:`OptionField` derives the wizard's fields from its Struct)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import msgspec

from gpuconsole.backends.clouds import launch_fields, provider_for_type
from gpuconsole.model import LaunchOptions, LaunchSpec, Market

__all__ = ["OptionField", "build_options", "launch_fields", "option_fields", "validate"]

_INSTANCE_TYPE = re.compile(r"^(?:[a-z][a-z0-9-]*\.[a-z0-9.-]+|(?:Standard|Basic)_[A-Za-z0-9_]+)$")  # EC2, ECS; Azure sizes
MAX_COUNT = 100
MIN_ROOT_GIB = 8
MAX_ROOT_GIB = 16384
MAX_TAG_KEY = 128
MAX_TAG_VALUE = 256
MAX_TAGS = 50


@dataclass(frozen=True, slots=True)
class OptionField:
    """One field of a provider's launch options, as the wizard shows it.

    Attributes:
        name: ``options.<Struct field>``, what problems are reported against.
        label: the ``Meta`` title.
        kind: ``choice`` (a Literal: ``choices``, the default first), ``flag`` or ``number``.
    """

    name: str
    label: str
    kind: str
    default: Any
    choices: tuple[Any, ...] = ()


def option_fields(instance_type: str) -> tuple[OptionField, ...]:
    """The options the provider of ``instance_type`` declares (none when it declares none)."""
    kind = provider_for_type(instance_type).options
    if kind is None:
        return ()
    out = []
    for f in msgspec.inspect.type_info(kind).fields:
        t, label = f.type, f.name
        if isinstance(t, msgspec.inspect.Metadata):
            label = str((t.extra_json_schema or {}).get("title") or f.name)
            t = t.type
        if isinstance(t, msgspec.inspect.LiteralType):
            out.append(OptionField(f"options.{f.name}", label, "choice", f.default,
                                   (f.default, *(v for v in t.values if v != f.default))))
        else:
            out.append(OptionField(f"options.{f.name}", label, "flag" if isinstance(t, msgspec.inspect.BoolType)
                                   else "number", f.default))
    return tuple(out)


def build_options(instance_type: str, values: dict[str, Any]) -> tuple[LaunchOptions | None, dict[str, str]]:
    """The provider's option Struct from ``values`` (field → value as typed), and what is wrong
    (``options.<field>`` → message); None when the provider declares no options."""
    kind = provider_for_type(instance_type).options
    if kind is None:
        return None, {}
    try:
        return msgspec.convert(values, kind, strict=False), {}
    except msgspec.ValidationError as exc:
        return None, {_option_path(str(exc)): str(exc).split(" - at ")[0]}


def _option_path(message: str) -> str:
    found = re.search(r"at `\$\.(\w+)", message)
    return f"options.{found.group(1)}" if found else "options"


def _check_options(spec: LaunchSpec, problems: dict[str, str]) -> None:
    provider = provider_for_type(spec.instance_type)
    if spec.options is None:
        return
    if provider.options is None or not isinstance(spec.options, provider.options):
        problems["options"] = f"{type(spec.options).__name__} does not apply to {provider.title}"
        return
    _, found = build_options(spec.instance_type, msgspec.to_builtins(spec.options))  # its Meta bounds
    problems.update(found)


def validate(spec: LaunchSpec) -> dict[str, str]:
    """Field name (a :class:`LaunchSpec` attribute, ``options.<field>`` or ``tag:Owner``) → one-line message."""
    problems: dict[str, str] = {}
    checks = provider_for_type(spec.instance_type).checks
    _check_options(spec, problems)
    if not spec.region:
        problems["region"] = "choose a region"
    elif not checks.region[0].match(spec.region):
        problems["region"] = f"{spec.region!r} {checks.region[1]}"
    if not spec.instance_type:
        problems["instance_type"] = "choose an instance type"
    elif not _INSTANCE_TYPE.match(spec.instance_type):
        problems["instance_type"] = f"{spec.instance_type!r} is not an instance type like g5.xlarge"
    if not spec.image_id:
        problems["image_id"] = f"choose {checks.image_word}"
    elif not checks.image_id[0].match(spec.image_id):
        problems["image_id"] = checks.image_id[1]
    if not 1 <= spec.count <= MAX_COUNT:
        problems["count"] = f"launch between 1 and {MAX_COUNT} instances"
    if not MIN_ROOT_GIB <= spec.root_volume_gib <= MAX_ROOT_GIB:
        problems["root_volume_gib"] = f"the root volume must be {MIN_ROOT_GIB} to {MAX_ROOT_GIB} GiB"
    if spec.kms_key_id:
        if not spec.encrypted:
            problems["kms_key_id"] = "a KMS key applies only to an encrypted volume"
        elif not checks.kms_key_id[0].match(spec.kms_key_id):
            problems["kms_key_id"] = checks.kms_key_id[1]
    if spec.max_spot_price is not None:
        if spec.market is not Market.SPOT:
            problems["max_spot_price"] = "a maximum price applies only to spot"
        elif not spec.max_spot_price > 0:
            problems["max_spot_price"] = "the maximum spot price must be more than 0"
    if spec.subnet_id and not checks.subnet_id[0].match(spec.subnet_id):
        problems["subnet_id"] = checks.subnet_id[1]
    bad_groups = [g for g in spec.security_group_ids if not checks.security_group[0].match(g)]
    if bad_groups:
        problems["security_group_ids"] = f"{bad_groups[0]!r} {checks.security_group[1]}"
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
        elif reserved := next((p for p in checks.reserved_tag_prefixes if key.lower().startswith(p)), None):
            problems[field_name] = f"tag keys starting with {reserved} are reserved"
        elif key in seen:
            problems[field_name] = "the same tag key is given twice"
        elif len(value) > MAX_TAG_VALUE:
            problems[field_name] = f"a tag value is at most {MAX_TAG_VALUE} characters"
        seen.add(key)
    return problems

