"""The TLS version ``access whoami`` reports for AWS: what botocore's own SSL context negotiates
with the endpoint, verified against the CA bundle botocore would use (``AWS_CA_BUNDLE``)."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gpuconsole.backends.aws import StsCalls
from gpuconsole.backends.base import BackendError


def _certificate(folder: Path) -> tuple[Path, Path]:
    """A throwaway self-signed certificate for 127.0.0.1 (its own CA), made by the test."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpuconsole test endpoint")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@pytest.fixture
def tls_endpoint(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[str, Path]]:
    """A TLS server on 127.0.0.1 offering at most ``request.param`` (a TLSVersion)."""
    cert, key = _certificate(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.maximum_version = request.param
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)
    stop = threading.Event()
    accepted: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                raw, _ = listener.accept()
            except OSError:
                return
            accepted.append(raw)
            try:
                with context.wrap_socket(raw, server_side=True) as tls:
                    tls.recv(1)
            except OSError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{listener.getsockname()[1]}", cert
    finally:
        stop.set()
        listener.close()
        for raw in accepted:  # a client that keeps its connection open: let the server go now
            try:
                raw.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        thread.join(timeout=10)


@pytest.mark.parametrize(("tls_endpoint", "expected"), [(ssl.TLSVersion.TLSv1_3, "TLSv1.3"),
                                                         (ssl.TLSVersion.TLSv1_2, "TLSv1.2")], indirect=["tls_endpoint"])
def test_the_version_negotiated_with_the_endpoint_is_reported(
        tls_endpoint: tuple[str, Path], expected: str, monkeypatch: pytest.MonkeyPatch) -> None:
    url, ca = tls_endpoint
    monkeypatch.setenv("AWS_ENDPOINT_URL", url)
    monkeypatch.setenv("AWS_CA_BUNDLE", str(ca))
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    assert StsCalls().tls_version() == expected


@pytest.mark.parametrize("tls_endpoint", [ssl.TLSVersion.TLSv1_3], indirect=True)
def test_an_endpoint_botocore_would_not_trust_is_an_error_not_a_version(
        tls_endpoint: tuple[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    url, _ca = tls_endpoint
    monkeypatch.setenv("AWS_ENDPOINT_URL", url)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with pytest.raises(BackendError, match="TLS to 127.0.0.1: .*certificate verify failed"):
        StsCalls().tls_version()
