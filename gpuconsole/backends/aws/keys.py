"""IAM access keys of one IAM user, for ``gpuconsole keys rotate``: list, create, deactivate, delete.

Thin calls, signed with the key pair the caller names (the profile's own, then the new one to
check it works). The order of the steps, the credentials file and the audit records are the
core's (:mod:`gpuconsole.core.access.key_rotation`). No secret ever appears in a message: the
values in use are cut out of every error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from gpuconsole.backends.aws import mapping as aws_mapping
from gpuconsole.backends.aws.sts import client_as
from gpuconsole.backends.base import BackendError


@dataclass(frozen=True, slots=True)
class AccessKey:
    key_id: str
    active: bool
    created: float


@dataclass(frozen=True, slots=True)
class NewKey:
    key_id: str
    secret: str

    def __repr__(self) -> str:  # never the secret, even in a traceback's locals
        return f"NewKey(key_id={self.key_id!r})"


class IamKeys:
    """The IAM user behind one key pair, in the region and endpoint of ``profile``."""

    def __init__(self, profile: str | None, access_key: str, secret_key: str) -> None:
        self._profile = profile
        self._secrets = (access_key, secret_key)
        # One try per call: a step that failed is reported and audited, not repeated blindly.
        self._config = Config(retries={"mode": "standard", "total_max_attempts": 2}, connect_timeout=5,
                              read_timeout=15, user_agent_extra="gpuconsole")
        self._iam = client_as(profile, "iam", self._config, access_key, secret_key)

    def _call(self, where: str, call: Any, **params: Any) -> Any:
        try:
            return call(**params)
        except (ClientError, BotoCoreError) as exc:
            raise aws_mapping.backend_error(exc, where, secrets=self._secrets) from exc

    def user_name(self) -> str:
        """The IAM user that owns the key pair (its ``GetUser``); a role or root has none."""
        user = self._call("IAM GetUser", self._iam.get_user).get("User", {})
        name = str(user.get("UserName", ""))
        if not name or ":root" in str(user.get("Arn", "")):
            raise BackendError("these credentials are not an IAM user's: only an IAM user's keys can be rotated")
        return name

    def keys(self, user: str) -> tuple[AccessKey, ...]:
        answer = self._call("IAM ListAccessKeys", self._iam.list_access_keys, UserName=user)
        return tuple(AccessKey(k["AccessKeyId"], k.get("Status") == "Active", k["CreateDate"].timestamp())
                     for k in answer.get("AccessKeyMetadata", ()))

    def create(self, user: str) -> NewKey:
        key = self._call("IAM CreateAccessKey", self._iam.create_access_key, UserName=user)["AccessKey"]
        self._secrets = (*self._secrets, key["SecretAccessKey"])
        return NewKey(key["AccessKeyId"], key["SecretAccessKey"])

    def deactivate(self, user: str, key_id: str) -> None:
        self._call("IAM UpdateAccessKey", self._iam.update_access_key, UserName=user, AccessKeyId=key_id,
                   Status="Inactive")

    def delete(self, user: str, key_id: str) -> None:
        self._call("IAM DeleteAccessKey", self._iam.delete_access_key, UserName=user, AccessKeyId=key_id)

    def identity_of(self, key: NewKey) -> str:
        """The ARN ``sts:GetCallerIdentity`` names for ``key``: proof that AWS accepts it."""
        sts = client_as(self._profile, "sts", self._config, key.key_id, key.secret)
        return str(self._call("STS GetCallerIdentity", sts.get_caller_identity)["Arn"])
