"""Key hygiene alerts: an old AWS access key (against moto's IAM), kubeconfig credentials near
their end, and instances the console launched unencrypted or with IMDSv1 allowed."""

from __future__ import annotations

import base64
import json
import time

from gpuconsole.backends.kube.credentials import credential_expiries, jwt_expiry
from gpuconsole.core.access.audit import AuditLog
from gpuconsole.core.access.key_hygiene import (
    DAY,
    KeyHygiene,
    aws_key_alerts,
    expiry_alerts,
    launch_alerts,
)
from gpuconsole.model import Instance, InstanceState, Market, Severity

NOW = 1_800_000_000.0


def test_keys_older_than_90_days_are_named_without_their_full_id() -> None:
    keys = [("AKIAOLDKEY0000001234", NOW - 120 * DAY, True, True), ("AKIANEWKEY0000005678", NOW - 10 * DAY, True, False),
            ("AKIAINACTIVE00009999", NOW - 400 * DAY, False, False)]
    [alert] = aws_key_alerts(keys, NOW)
    assert alert.severity is Severity.WARNING and alert.source == "security"
    assert alert.message == "AWS access key AKIA…1234 in use is 120 days old (rotate keys every 90 days: gpuconsole keys rotate)"


def test_the_aws_key_in_use_is_aged_through_iam(aws_peer, monkeypatch) -> None:
    """The adapter asks IAM ListAccessKeys for the keys of the identity in use (moto)."""
    from gpuconsole.backends.aws.source import AwsCloud

    iam = aws_peer.client("iam")
    iam.create_user(UserName="ops")
    key = iam.create_access_key(UserName="ops")["AccessKey"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
    cloud = AwsCloud(regions=("us-east-1",))
    try:
        keys = cloud.access_keys()
    finally:
        cloud.close()
    assert [(k[0], k[2], k[3]) for k in keys] == [(key["AccessKeyId"], True, True)]
    created = keys[0][1]
    assert abs(created - time.time()) < 86400
    assert aws_key_alerts(keys, created + 30 * DAY) == []
    [alert] = aws_key_alerts(keys, created + 91 * DAY)
    assert "in use is 91 days old" in alert.message


def _jwt(exp: float) -> str:
    def part(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part({'exp': int(exp), 'sub': 'system:serviceaccount:ml:ci'})}.c2ln"


def _certificate(not_after_days: float) -> bytes:
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dev")])
    start = datetime.datetime.fromtimestamp(NOW - DAY, datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(start)
            .not_valid_after(datetime.datetime.fromtimestamp(NOW + not_after_days * DAY, datetime.UTC))
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM)


def test_kubeconfig_certificate_and_token_expiry(tmp_path) -> None:
    config = {
        "current-context": "prod",
        "contexts": [{"name": "prod", "context": {"cluster": "c", "user": "dev"}},
                     {"name": "ci", "context": {"cluster": "c", "user": "ci"}}],
        "users": [{"name": "dev", "user": {"client-certificate-data": base64.b64encode(_certificate(3)).decode()}},
                  {"name": "ci", "user": {"token": _jwt(NOW + 30 * DAY)}}],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(config))
    [(what, expires)] = credential_expiries(str(path), None)
    assert what == "client certificate of kubeconfig user dev" and expires == NOW + 3 * DAY
    [alert] = expiry_alerts(credential_expiries(str(path), None), NOW)
    assert alert.message == "the client certificate of kubeconfig user dev expires in 3 day(s)"
    assert expiry_alerts(credential_expiries(str(path), "ci"), NOW) == []
    [late] = expiry_alerts(credential_expiries(str(path), "ci"), NOW + 40 * DAY)
    assert late.severity is Severity.CRITICAL and "expired 10 day(s) ago" in late.message
    assert jwt_expiry("not-a-jwt") is None


def test_a_certificate_file_of_the_kubeconfig_gives_its_expiry_and_junk_gives_none(tmp_path) -> None:
    import datetime

    import trustme

    from gpuconsole.backends.kube.credentials import certificate_not_after

    leaf = trustme.CA().issue_cert("dev.example", not_after=datetime.datetime.fromtimestamp(NOW + 5 * DAY, datetime.UTC))
    pem = tmp_path / "dev.pem"
    leaf.cert_chain_pems[0].write_to_path(str(pem))
    config = {"current-context": "dev", "contexts": [{"name": "dev", "context": {"cluster": "c", "user": "dev"}}],
              "users": [{"name": "dev", "user": {"client-certificate": str(pem)}}]}
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(config))
    assert credential_expiries(str(path), None) == [("client certificate of kubeconfig user dev", NOW + 5 * DAY)]
    assert certificate_not_after(b"-----BEGIN CERTIFICATE-----\nnot one\n-----END CERTIFICATE-----\n") is None


def _instance(instance_id: str, state: InstanceState = InstanceState.RUNNING) -> Instance:
    return Instance(instance_id, "g5.xlarge", "us-east-1", "us-east-1a", Market.ON_DEMAND, state, NOW - 3600, 1.0)


def test_instances_launched_unencrypted_or_with_imdsv1_while_they_are_there(tmp_path) -> None:
    audit = AuditLog(tmp_path / "audit.db", lambda: NOW)
    audit.append("ada", "admin", "launch", "g5.xlarge", (("encrypted", "no"), ("imds", "v1-allowed"),
                                                        ("outcome", "launched i-0123456789abcdef0 (g5.xlarge, on-demand) in us-east-1a")), "ok")
    audit.append("ada", "admin", "launch", "g5.xlarge", (("encrypted", "yes"), ("imds", "v2-required"),
                                                        ("outcome", "launched i-0fedcba9876543210 (g5.xlarge)")), "ok")
    audit.append("ada", "admin", "launch", "g5.xlarge", (("encrypted", "no"), ("imds", "v2-required")), "failed: no capacity")
    live = [_instance("i-0123456789abcdef0"), _instance("i-0fedcba9876543210")]
    [alert] = launch_alerts(audit.records(), live, NOW)
    assert alert.message == "instance i-0123456789abcdef0 (launched by ada) has an unencrypted root volume and IMDSv1 allowed"
    assert launch_alerts(audit.records(), [_instance("i-0123456789abcdef0", InstanceState.TERMINATED)], NOW) == []
    assert [a.message for a in KeyHygiene(None, None, audit).check(live, NOW)] == [alert.message]


def test_a_console_launch_records_what_hygiene_needs(tmp_path) -> None:
    """Launched through the core, unencrypted with IMDSv1: the overview says so."""
    from msgspec.structs import replace

    from gpuconsole.core.access.guard import default_guard
    from gpuconsole.model import LaunchSpec
    from tests.helpers import demo_console

    console = demo_console()
    try:
        guard = default_guard(user="ada")
        console.services.actions.guard = guard
        spec = replace(LaunchSpec("us-east-1", "g5.xlarge", "ami-0123456789abcdef0"), encrypted=False, imdsv2_required=False)
        result = console.services.cloud.launch(spec, try_alternatives=False)
        [launched] = result.instances
        alerts = KeyHygiene(None, None, guard.audit).check(result.instances, console.clock())
        assert [a.message for a in alerts] == [
            f"instance {launched.instance_id} (launched by ada) has an unencrypted root volume and IMDSv1 allowed"]
    finally:
        console.close()


def test_the_overview_alert_follows_a_launch(tmp_path) -> None:
    from msgspec.structs import replace

    from gpuconsole.model import LaunchSpec
    from tests.helpers import demo_console, wait_for

    console = demo_console()
    try:
        console.start(open_store=False)
        spec = replace(LaunchSpec("us-east-1", "g5.xlarge", "ami-0123456789abcdef0"), encrypted=False)
        [launched] = console.services.cloud.launch(spec, try_alternatives=False).instances
        console.refresh()
        wait_for(lambda: any(i.instance_id == launched.instance_id for i in console.snapshot.instances))
        console.refresh()
        wait_for(lambda: any(a.source == "security" and launched.instance_id in a.message for a in console.snapshot.alerts))
        [alert] = [a for a in console.snapshot.alerts if a.source == "security"]
        assert alert.message.endswith("has an unencrypted root volume")
    finally:
        console.close()
