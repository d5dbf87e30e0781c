"""The IAM roles gpuconsole acts through, and their policies, for ``access iam-policy``.

What IAM holds here is the real guard (the console's own checks only explain and dim keys):

- ``gpuconsole-admin``: launches, starts, stops, reboots and terminates instances tagged
  ``ManagedBy = gpuconsole``; its trust policy requires MFA (``aws:MultiFactorAuthPresent``).
- ``gpuconsole-developer``: reads and describes EC2, prices and the DLAMI parameter; launching,
  starting, stopping, rebooting and terminating are denied outright.
- ``gpuconsole-auditor``: read only, plus Cost Explorer and CloudTrail lookups.

And two for the services of a shared bastion, which no login's own credentials can assume:

- ``gpuconsole-service``: the role the bastion's root services run as (its instance profile):
  the audit relay writes and reads the audit copy (``logs:``), and the autopilot and budget
  actions assume the automation role. Logins need no ``logs:`` permission at all.
- ``gpuconsole-automation``: what automatic actions may do: start, stop, reboot, terminate and
  launch, only on resources tagged ``ManagedBy = gpuconsole``; trusted by the service role alone.

And one policy, for a machine without the relay (each login's own keys send its copy):

- ``gpuconsole-audit-writer``: attached to each IAM user, it lets that identity create and write
  only the audit streams that end in its own name (``<host>/${aws:username}``), and read the
  group back for ``audit verify``; so no identity can write a record into another's stream.

Every trust policy lets the session set its source identity (the OS login, for CloudTrail).
Conditions on the tag limit the changes where EC2 supports resource tags; reads cannot be
limited by tag in IAM, so they are not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gpuconsole.backends.registry import managed_tag

TAG_KEY, TAG_VALUE = managed_tag()  # what every launch tags its instances and volumes with
ACCOUNT_PLACEHOLDER = "ACCOUNT_ID"
TERRAFORM_ACCOUNT = "${data.aws_caller_identity.current.account_id}"
MFA_MAX_AGE_S = 3600

EC2_READ = ["ec2:Describe*", "ec2:GetConsoleOutput"]
CATALOG_READ = ["pricing:GetProducts", "ssm:GetParameter"]
INSTANCE_CHANGES = ["ec2:StartInstances", "ec2:StopInstances", "ec2:RebootInstances", "ec2:TerminateInstances"]
COST_READ = ["ce:GetCostAndUsage", "ce:GetCostForecast", "ce:GetDimensionValues", "ce:GetTags"]
TRAIL_READ = ["cloudtrail:LookupEvents", "cloudtrail:GetTrailStatus", "cloudtrail:DescribeTrails"]


@dataclass(frozen=True, slots=True)
class IamRole:
    """One IAM role: its name, the gpuconsole role it serves, its trust and permissions."""

    name: str
    gpuconsole_role: str
    description: str
    trust: dict[str, Any]
    policy: dict[str, Any]


def _tagged() -> dict[str, Any]:
    return {"StringEquals": {f"aws:ResourceTag/{TAG_KEY}": TAG_VALUE}}


def _trust(account: str, *, mfa: bool) -> dict[str, Any]:
    statement: dict[str, Any] = {
        "Sid": "AccountUsersWithAnAllowPolicy",
        "Effect": "Allow",
        "Principal": {"AWS": f"arn:aws:iam::{account}:root"},
        "Action": ["sts:AssumeRole", "sts:SetSourceIdentity"],
    }
    if mfa:
        statement["Condition"] = {"Bool": {"aws:MultiFactorAuthPresent": "true"},
                                  "NumericLessThan": {"aws:MultiFactorAuthAge": str(MFA_MAX_AGE_S)}}
    return {"Version": "2012-10-17", "Statement": [statement]}


def _policy(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": list(statements)}


def _read(sid: str, actions: list[str]) -> dict[str, Any]:
    return {"Sid": sid, "Effect": "Allow", "Action": actions, "Resource": "*"}


def roles(account: str = ACCOUNT_PLACEHOLDER) -> tuple[IamRole, ...]:
    """The three roles for ``account`` (a 12-digit id, a placeholder or a Terraform reference)."""
    admin = _policy(_read("ReadFleet", EC2_READ + CATALOG_READ + COST_READ), *_tagged_changes())
    developer = _policy(
        _read("ReadFleet", EC2_READ + CATALOG_READ),
        {"Sid": "NoInstanceChanges", "Effect": "Deny", "Action": ["ec2:RunInstances", *INSTANCE_CHANGES],
         "Resource": "*"},
    )
    auditor = _policy(
        _read("ReadFleet", EC2_READ),
        _read("ReadCostsAndTrail", COST_READ + TRAIL_READ),
        {"Sid": "ChangeNothing", "Effect": "Deny", "Action": ["ec2:RunInstances", "ec2:CreateTags", *INSTANCE_CHANGES],
         "Resource": "*"},
    )
    return (
        IamRole("gpuconsole-admin", "admin", "gpuconsole admins: instance changes, with MFA",
                _trust(account, mfa=True), admin),
        IamRole("gpuconsole-developer", "developer", "gpuconsole developers: read the fleet, change nothing in EC2",
                _trust(account, mfa=False), developer),
        IamRole("gpuconsole-auditor", "auditor", "gpuconsole auditors: read, costs and CloudTrail",
                _trust(account, mfa=False), auditor),
    )


AUDIT_GROUP = "/gpuconsole/audit"
AUDIT_WRITER = ("without a relay, attach to each IAM user (and nothing else with logs:): it writes only its own "
                "audit streams (<host>/<user name>; name each login as its IAM user, and set [audit] account so "
                "the console sends only as that user)")
AUDIT_COPY = ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:FilterLogEvents"]


def _tagged_changes() -> list[dict[str, Any]]:
    """Instance changes and launches, only on what gpuconsole tagged (the admin's and automation's)."""
    return [
        {"Sid": "ChangeTaggedInstances", "Effect": "Allow", "Action": INSTANCE_CHANGES, "Resource": "*",
         "Condition": _tagged()},
        {"Sid": "LaunchTagged", "Effect": "Allow", "Action": ["ec2:RunInstances"],
         "Resource": ["arn:aws:ec2:*:*:instance/*", "arn:aws:ec2:*:*:volume/*"],
         "Condition": {"StringEquals": {f"aws:RequestTag/{TAG_KEY}": TAG_VALUE}}},
        {"Sid": "LaunchFrom", "Effect": "Allow", "Action": ["ec2:RunInstances"],
         "Resource": ["arn:aws:ec2:*::image/*", "arn:aws:ec2:*:*:subnet/*", "arn:aws:ec2:*:*:security-group/*",
                      "arn:aws:ec2:*:*:network-interface/*", "arn:aws:ec2:*:*:key-pair/*"]},
        {"Sid": "TagAtLaunch", "Effect": "Allow", "Action": ["ec2:CreateTags"], "Resource": "*",
         "Condition": {"StringEquals": {"ec2:CreateAction": "RunInstances"}}},
    ]


def service_roles(account: str = ACCOUNT_PLACEHOLDER) -> tuple[IamRole, ...]:
    """The shared bastion's service roles: the one its root services run as, and automation."""
    service_trust = {"Version": "2012-10-17", "Statement": [
        {"Sid": "TheBastionInstance", "Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
         "Action": "sts:AssumeRole"}]}
    service = _policy(
        {"Sid": "TheAuditCopy", "Effect": "Allow", "Action": AUDIT_COPY,
         "Resource": [f"arn:aws:logs:*:{account}:log-group:{AUDIT_GROUP}",
                      f"arn:aws:logs:*:{account}:log-group:{AUDIT_GROUP}:log-stream:*"]},
        {"Sid": "AssumeAutomation", "Effect": "Allow", "Action": ["sts:AssumeRole", "sts:SetSourceIdentity"],
         "Resource": f"arn:aws:iam::{account}:role/gpuconsole-automation"},
    )
    automation_trust = {"Version": "2012-10-17", "Statement": [
        {"Sid": "TheServiceRoleOnly", "Effect": "Allow",
         "Principal": {"AWS": f"arn:aws:iam::{account}:role/gpuconsole-service"},
         "Action": ["sts:AssumeRole", "sts:SetSourceIdentity"]}]}
    automation = _policy(_read("ReadFleet", EC2_READ + CATALOG_READ), *_tagged_changes())
    return (
        IamRole("gpuconsole-service", "service", "the bastion's gpuconsole services: the audit copy, and automation",
                service_trust, service),
        IamRole("gpuconsole-automation", "automation", "gpuconsole automatic actions: tagged instances only",
                automation_trust, automation),
    )


def audit_writer_policy(account: str = ACCOUNT_PLACEHOLDER) -> dict[str, Any]:
    """Without a relay: an identity writes its own audit streams only (``<host>/<IAM user name>``,
    the stream a login of that name writes), and reads the group to verify against it."""
    group = f"arn:aws:logs:*:{account}:log-group:{AUDIT_GROUP}"
    return _policy(
        {"Sid": "ItsOwnStreamsOnly", "Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
         "Resource": f"{group}:log-stream:*/${{aws:username}}"},
        {"Sid": "TheGroupToVerify", "Effect": "Allow", "Action": ["logs:CreateLogGroup", "logs:FilterLogEvents"],
         "Resource": [group, f"{group}:*"]},
    )


def as_json(account: str = ACCOUNT_PLACEHOLDER) -> str:
    """The roles as one JSON document: ``{"roles": [{name, gpuconsole_role, trust_policy, policy}],
    "service_roles": [...]}``."""
    def listed(found: tuple[IamRole, ...]) -> list[dict[str, Any]]:
        return [{"name": r.name, "gpuconsole_role": r.gpuconsole_role, "description": r.description,
                 "trust_policy": r.trust, "policy": r.policy} for r in found]

    return json.dumps({"tag": {TAG_KEY: TAG_VALUE}, "roles": listed(roles(account)),
                       "service_roles": listed(service_roles(account)),
                       "audit_writer": {"name": "gpuconsole-audit-writer", "description": AUDIT_WRITER,
                                        "policy": audit_writer_policy(account)}}, indent=2) + "\n"


def _hcl(value: dict[str, Any], indent: str) -> str:
    """A JSON value as an HCL expression (HCL object syntax accepts JSON's ``"key": value``)."""
    return json.dumps(value, indent=2).replace("\n", "\n" + indent)


def as_terraform() -> str:
    """The roles as Terraform: one ``aws_iam_role`` and one inline ``aws_iam_role_policy`` each."""
    lines = ['data "aws_caller_identity" "current" {}', ""]
    for role in (*roles(TERRAFORM_ACCOUNT), *service_roles(TERRAFORM_ACCOUNT)):
        ident = role.name.replace("-", "_")
        lines += [
            f'resource "aws_iam_role" "{ident}" {{',
            f"  name        = {json.dumps(role.name)}",
            f"  description = {json.dumps(role.description)}",
            f"  assume_role_policy = jsonencode({_hcl(role.trust, '  ')})",
            "}",
            "",
            f'resource "aws_iam_role_policy" "{ident}" {{',
            f"  name   = {json.dumps(role.name)}",
            f"  role   = aws_iam_role.{ident}.id",
            f"  policy = jsonencode({_hcl(role.policy, '  ')})",
            "}",
            "",
        ]
    lines += ['resource "aws_iam_policy" "gpuconsole_audit_writer" {',
              '  name        = "gpuconsole-audit-writer"',
              f"  description = {json.dumps(AUDIT_WRITER)}",
              # ${aws:username} is IAM's variable, not Terraform's: $$ keeps it as written
              f"  policy = jsonencode({_hcl(audit_writer_policy(TERRAFORM_ACCOUNT), '  ').replace('${aws:', '$${aws:')})",
              "}", ""]
    return "\n".join(lines)
