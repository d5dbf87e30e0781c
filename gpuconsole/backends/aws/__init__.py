"""The AWS adapter: EC2 instances, prices, capacity and launches through boto3, and Cost Explorer.

Modules (private to this folder unless named below):
    source: :class:`AwsCloud`, the cloud backend (boto3 is imported on first use), over
        session (credentials, clients, errors) and catalog (types, prices, networks, images).
    mapping: EC2 and pricing answers translated into the model.
    ec2_request: the RunInstances request a launch sends, and its Terraform twin.
    audit_logs: :class:`CloudWatchAuditStore`, the audit log's remote copy in CloudWatch Logs.
    sts: STS and IAM calls as the login (assume a role, caller identity, MFA devices, TLS).
    keys: the IAM access keys of a user, for key rotation.
    sns: :class:`SnsPublisher`, the ``sns`` channel of ``notify`` (one Publish per message).

Other layers use only the names below, imported from this package; each is loaded on first use, so
importing the package costs nothing until an AWS account is actually configured.
"""

from __future__ import annotations

from gpuconsole.backends import lazy_face

__all__, __getattr__ = lazy_face(__name__, {
    "AwsCloud": "source",
    "CloudWatchAuditStore": "audit_logs",
    "request_json": "ec2_request",
    "MANAGED_TAG": "ec2_request",
    "terraform_block": "ec2_request",
    "StsCalls": "sts",
    "RoleCredentials": "sts",
    "IamKeys": "keys",
    "NewKey": "keys",
    "SnsPublisher": "sns",
})
