"""STS and IAM calls made with the login's own credentials: assume a role, who am I, MFA devices.

These are the only calls gpuconsole makes as the login itself once ``[aws.roles]`` is set: every
other AWS call runs with the role credentials that :meth:`StsCalls.assume_role` returns (the
session logic, its cache and the MFA code live in :mod:`gpuconsole.core.access.aws_roles`).
"""

from __future__ import annotations

import logging
import re
import socket
import ssl
import threading
import urllib.parse
from dataclasses import dataclass
from typing import Any

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from gpuconsole.backends.aws import mapping as aws_mapping
from gpuconsole.backends.aws.session import new_session
from gpuconsole.backends.base import BackendError

STS_REGION = "us-east-1"  # any region answers; the regional endpoint is used when one is set

# botocore logs whole answers at DEBUG (GPUCONSOLE_LOG=DEBUG): CreateAccessKey's and AssumeRole's
# carry a secret key and a session token. They are cut out before any handler sees the record.
_SECRET_FIELDS = re.compile(r"(<(SecretAccessKey|SessionToken)>)[^<]*(</)|"
                            r"((['\"])(SecretAccessKey|SessionToken|X-Amz-Security-Token)\5\s*:\s*)(b?['\"])[^'\"]*(['\"])")


class _CutSecrets(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if "SecretAccessKey" in text or "SessionToken" in text or "Security-Token" in text:
            record.msg, record.args = _SECRET_FIELDS.sub(_cut, text), ()
        return True


def _cut(match: re.Match[str]) -> str:
    if match.group(1):
        return f"{match.group(1)}***{match.group(3)}"
    return f"{match.group(4)}{match.group(7)}***{match.group(8)}"


for _name in ("botocore.parsers", "botocore.endpoint", "botocore.hooks", "botocore.retryhandler", "urllib3.connectionpool"):
    logging.getLogger(_name).addFilter(_CutSecrets())


def client_as(profile: str | None, service: str, config: Config, access_key: str = "", secret_key: str = "",
              token: str = "") -> Any:
    """A client of ``service`` in the profile's region (and endpoint), signed with the given keys
    when there are some, else with the profile's own credential chain."""
    keys = {"aws_access_key_id": access_key, "aws_secret_access_key": secret_key,
            "aws_session_token": token or None} if access_key else {}
    try:
        session = new_session(profile)
        return session.client(service, region_name=session.region_name or STS_REGION, config=config, **keys)
    except (ClientError, BotoCoreError) as exc:
        raise aws_mapping.backend_error(exc, service.upper(), secrets=(access_key, secret_key, token)) from exc


def call_aws(where: str, call: Any, **params: Any) -> Any:
    """``call(**params)``, its botocore errors turned into the backend's one-line errors."""
    try:
        return call(**params)
    except (ClientError, BotoCoreError) as exc:
        raise aws_mapping.backend_error(exc, where) from exc


@dataclass(frozen=True, slots=True)
class RoleCredentials:
    """Temporary credentials of an assumed role; ``expires_at`` in POSIX seconds."""

    access_key: str
    secret_key: str
    token: str
    expires_at: float
    arn: str  # the assumed-role ARN (``arn:aws:sts::…:assumed-role/NAME/SESSION``)

    def __repr__(self) -> str:  # a repr in a log or a traceback never shows the secret
        return f"RoleCredentials(arn={self.arn!r}, expires_at={self.expires_at!r})"


@dataclass(frozen=True, slots=True)
class CallerIdentity:
    account: str
    arn: str
    user_id: str


class StsCalls:
    """STS and IAM for one profile (``None``: the default chain), with short timeouts.

    Every error comes out as a :class:`BackendError`; a refusal by AWS (``AccessDenied``, a trust
    policy that does not name the caller, a wrong MFA code) as ``BackendPermissionDenied``
    carrying AWS's own message on one line.
    """

    def __init__(self, profile: str | None = None, *, connect_timeout: float = 5, read_timeout: float = 15) -> None:
        self._profile = profile
        self._config = Config(retries={"mode": "standard", "total_max_attempts": 3}, connect_timeout=connect_timeout,
                              read_timeout=read_timeout, user_agent_extra="gpuconsole")
        self._lock = threading.Lock()
        self._clients: dict[str, Any] = {}

    def _client(self, service: str, credentials: RoleCredentials | None = None) -> Any:
        if credentials is not None:
            return client_as(self._profile, service, self._config, credentials.access_key, credentials.secret_key,
                             credentials.token)
        with self._lock:
            if service not in self._clients:
                self._clients[service] = client_as(self._profile, service, self._config)
            return self._clients[service]

    @staticmethod
    def _call(where: str, call: Any, **params: Any) -> Any:
        return call_aws(where, call, **params)

    def assume_role(self, role_arn: str, session_name: str, source_identity: str, *, serial: str = "",
                    code: str = "", duration_s: int = 3600) -> RoleCredentials:
        """``sts:AssumeRole`` as the login; ``serial`` and ``code`` for a role whose trust needs MFA."""
        params: dict[str, Any] = {"RoleArn": role_arn, "RoleSessionName": session_name,
                                  "SourceIdentity": source_identity, "DurationSeconds": duration_s}
        if serial:
            params["SerialNumber"] = serial
            params["TokenCode"] = code
        answer = self._call("STS AssumeRole", self._client("sts").assume_role, **params)
        creds = answer["Credentials"]
        return RoleCredentials(creds["AccessKeyId"], creds["SecretAccessKey"], creds["SessionToken"],
                               creds["Expiration"].timestamp(), answer.get("AssumedRoleUser", {}).get("Arn", role_arn))

    def caller_identity(self, credentials: RoleCredentials | None = None) -> CallerIdentity:
        """``sts:GetCallerIdentity``: as the login, or as ``credentials`` (a role session)."""
        answer = self._call("STS GetCallerIdentity", self._client("sts", credentials).get_caller_identity)
        return CallerIdentity(answer["Account"], answer["Arn"], answer["UserId"])

    def mfa_serial(self) -> str:
        """The ARN of the login's first MFA device (IAM ``ListMFADevices``), or "" when it has none."""
        arn = self.caller_identity().arn
        if ":user/" not in arn:
            return ""  # a role or a federated login has no IAM MFA device of its own
        answer = self._call("IAM ListMFADevices", self._client("iam").list_mfa_devices, UserName=arn.rsplit("/", 1)[-1])
        devices = answer.get("MFADevices", ())
        return str(devices[0]["SerialNumber"]) if devices else ""

    def tls_version(self, timeout: float = 5.0) -> str:
        """The TLS version botocore's own SSL context negotiates with the STS endpoint.

        botocore keeps its floor (TLS 1.2) and takes what the endpoint offers above it; this opens
        one connection with the same context to say which it was. ``"none (http endpoint)"`` for
        a plain-HTTP endpoint such as a local emulator.
        """
        from botocore.httpsession import create_urllib3_context, get_cert_path

        url = self._client("sts").meta.endpoint_url
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "https":
            return f"none ({parts.scheme} endpoint)"
        try:  # the CA bundle botocore verifies with: AWS_CA_BUNDLE or the profile's ca_bundle, else its own
            bundle = new_session(self._profile)._session.get_config_variable("ca_bundle") or get_cert_path(True)
        except BotoCoreError as exc:
            raise aws_mapping.backend_error(exc, "TLS") from exc
        context = create_urllib3_context()
        context.verify_mode = ssl.CERT_REQUIRED  # urllib3 checks the name itself; a bare socket needs this
        context.check_hostname = True
        context.load_verify_locations(bundle)
        host, port = parts.hostname or "", parts.port or 443
        try:
            with socket.create_connection((host, port), timeout=timeout) as raw, \
                    context.wrap_socket(raw, server_hostname=host) as tls:
                return tls.version() or "unknown"
        except (OSError, ssl.SSLError) as exc:
            raise BackendError(f"TLS to {host}: {aws_mapping.one_line(str(exc))}") from exc
