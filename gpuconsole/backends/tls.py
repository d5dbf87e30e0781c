"""TLS for the connections gpuconsole opens itself: Prometheus, the Kubernetes API, webhooks.

:func:`client_context` always verifies certificates and host names, with a floor of TLS 1.3
unless ``[tls] min_version`` relaxes it to 1.2; a server below the floor fails with the version
it speaks named (:class:`TlsVersionRefused`), and every handshake's version is recorded for
``access whoami`` (:func:`negotiated_versions`). AWS keeps botocore's own floor.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
import threading
from typing import Any

VERSIONS: dict[str, ssl.TLSVersion] = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}
DEFAULT_MINIMUM = "1.3"
PROBE_TIMEOUT_S = 5.0
# OpenSSL's reasons for a handshake that found no protocol version both sides speak.
VERSION_REASONS = frozenset({"TLSV1_ALERT_PROTOCOL_VERSION", "UNSUPPORTED_PROTOCOL", "WRONG_SSL_VERSION",
                             "NO_PROTOCOLS_AVAILABLE", "UNKNOWN_PROTOCOL"})

_lock = threading.Lock()
_minimum = DEFAULT_MINIMUM
_negotiated: dict[str, str] = {}


class TlsVersionRefused(ssl.SSLError):
    """The server offered a TLS version below the floor; the message names both."""

    def __init__(self, message: str) -> None:
        # As OpenSSL's own errors are made: an SSLError shows its strerror, not its args.
        super().__init__(ssl.SSL_ERROR_SSL, message)


def set_minimum_version(text: str) -> None:
    """Set the floor of every context made from now on: ``"1.3"`` (the default) or ``"1.2"``.

    Raises:
        ValueError: another version (one line naming the ones allowed).
    """
    global _minimum
    if text not in VERSIONS:
        raise ValueError(f"TLS min_version {text!r} is not one of {', '.join(repr(v) for v in VERSIONS)}")
    with _lock:
        _minimum = text


def minimum_version() -> str:
    """The floor in force, as written in the configuration (``"1.3"``)."""
    with _lock:
        return _minimum


def negotiated_versions() -> dict[str, str]:
    """``{source: "TLSv1.3"}`` for each source that completed a handshake in this process."""
    with _lock:
        return dict(_negotiated)


def summary() -> dict[str, Any]:
    """JSON-able, for ``access whoami``: the floor in force and the version each source
    negotiated so far (AWS is not among them: botocore keeps its own floor, TLS 1.2)."""
    return {"min_version": f"TLSv{minimum_version()}", "negotiated": negotiated_versions()}


def client_context(source: str, ca_file: str | None = None) -> ssl.SSLContext:
    """A verifying client context with the floor in force, recording its handshakes as ``source``.

    ``ca_file``: trust only the CAs of this file (a cluster's own CA), else the system's.
    """
    context = SourceContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies certificates and host names
    if ca_file:
        context.load_verify_locations(cafile=ca_file)
    else:
        context.load_default_certs()
    context.minimum_version = VERSIONS[minimum_version()]
    context.source = source
    return context


class SourceContext(ssl.SSLContext):
    """An ``SSLContext`` that records the version each handshake negotiated, and names the
    version a refused server offered."""

    source = ""

    def wrap_socket(self, sock: socket.socket, *args: Any, **kwargs: Any) -> ssl.SSLSocket:  # type: ignore[override]
        try:
            peer = sock.getpeername()
        except OSError:
            peer = None
        try:
            wrapped = super().wrap_socket(sock, *args, **kwargs)
        except ssl.SSLError as exc:
            if peer is None or exc.reason not in VERSION_REASONS:
                raise
            hostname = kwargs.get("server_hostname") or (args[3] if len(args) > 3 else None)
            offered = self._offered(peer, hostname)
            if offered is None or offered == "TLSv1.3":
                raise
            floor = minimum_version()
            raise TlsVersionRefused(
                f"the server offered {offered}; gpuconsole requires TLSv{floor} or newer"
                + (' ([tls] min_version = "1.2" allows TLSv1.2)' if floor != "1.2" else "")) from exc
        version = wrapped.version()
        if version and self.source:
            with _lock:
                _negotiated[self.source] = version
        return wrapped

    def _offered(self, peer: tuple[Any, ...], hostname: str | None) -> str | None:
        """The version the server at ``peer`` speaks, asked with a floor of TLS 1.2 and the same
        trust (verification on); None when it does not complete that handshake either."""
        if hostname is None:
            return None  # without a name to verify, nothing is asked
        probe = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        probe.load_default_certs()
        trusted = b"".join(self.get_ca_certs(binary_form=True))
        if trusted:
            probe.load_verify_locations(cadata=trusted)
        probe.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            with socket.create_connection(peer[:2], timeout=PROBE_TIMEOUT_S) as raw, \
                    probe.wrap_socket(raw, server_hostname=hostname) as tls:
                return tls.version()
        except (OSError, ValueError):
            return None


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine (``localhost`` or a loopback address): the one place a
    plain http:// URL is allowed (nothing crosses a network unencrypted)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False

