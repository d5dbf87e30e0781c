"""``gpuconsole metrics``: the fleet's figures on ``/metrics`` for Prometheus, and rules for them.

``gpuconsole metrics [--listen ADDR] [--port 9108]`` polls the sources like the console (at
``--interval``) and serves the snapshot it composed last with ``prometheus_client``: the classic
text format, or OpenMetrics when the scraper asks for it. A scrape reads memory only, never a
backend. ``--tls-cert``/``--tls-key`` serve HTTPS; ``--token-file`` asks every request for
``Authorization: Bearer <token>``. The command never acts: no budget action, no autopilot.

``gpuconsole metrics rules [--for DURATION]`` prints Prometheus alerting rules for the same
alerts the console raises, for teams that let Prometheus decide.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from gpuconsole.cli.access import BadInput, finish

if TYPE_CHECKING:  # the server's modules are imported when it starts, not when a command line is parsed
    import ssl
    from wsgiref.simple_server import WSGIServer

log = logging.getLogger(__name__)

DEFAULT_PORT = 9108
AUTOPILOT_COUNT_S = 15.0  # how often the autopilot's actions are counted from the audit log again
REQUEST_TIMEOUT_S = 30.0  # a client that sends nothing (or stalls a TLS handshake) is dropped
TEXT = "text/plain; charset=utf-8"
Wsgi = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def add_metrics_parser(sub: Any, common: argparse.ArgumentParser, port_type: Callable[[str], int]) -> None:
    metrics = sub.add_parser(
        "metrics", parents=[common],
        help="serve the fleet's costs, budgets, queue and alerts on /metrics for Prometheus",
        description="Serve the figures of the fleet on /metrics for Prometheus (text format or OpenMetrics), "
                    "from the snapshot the console composes; 'metrics rules' prints alerting rules for them.",
    )
    metrics.add_argument("--listen", default="127.0.0.1", metavar="ADDR",
                         help="address to listen on (default 127.0.0.1; 0.0.0.0 or :: for every address)")
    metrics.add_argument("--port", type=port_type, default=DEFAULT_PORT, metavar="N",
                         help=f"port to listen on, 1 to 65535 (default {DEFAULT_PORT}; 0: any free port)")
    metrics.add_argument("--tls-cert", type=Path, default=None, metavar="FILE",
                         help="serve HTTPS with this certificate chain (PEM; it may hold the key too)")
    metrics.add_argument("--tls-key", type=Path, default=None, metavar="FILE", help="the certificate's private key (PEM)")
    metrics.add_argument("--token-file", type=Path, default=None, metavar="FILE",
                         help="answer only requests with 'Authorization: Bearer <token>', the token in FILE")
    verbs = metrics.add_subparsers(dest="metrics_command", metavar="ACTION", parser_class=type(metrics))
    rules = verbs.add_parser("rules", help="print Prometheus alerting rules for these metrics (YAML)",
                             description="Print a Prometheus rules file with the console's alerts as alerting "
                                         "rules on the metrics 'gpuconsole metrics' serves.")
    rules.add_argument("--for", dest="hold", type=_duration, default=None, metavar="DURATION",
                       help="hold every rule this long before it fires instead of its own (e.g. 0s to try them)")


def _duration(text: str) -> str:
    from gpuconsole.core.fleet.metric_rules import check_duration

    try:
        return check_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def run_metrics(args: argparse.Namespace, make_console: Callable[..., Any], out: TextIO | None = None) -> int:
    """``metrics rules`` prints; ``metrics`` serves until Ctrl-C or SIGTERM. A bad flag is one
    line and exit status 2."""
    return finish(lambda o: _run(args, make_console, o), out)


def _run(args: argparse.Namespace, make_console: Callable[..., Any], out: TextIO) -> int:
    if args.metrics_command == "rules":
        from gpuconsole.core.fleet.metric_rules import rules_document

        out.write(rules_document(args.hold))
        return 0
    token = _token(args.token_file)
    tls = _tls(args.tls_cert, args.tls_key)
    server = _listen(args.listen, args.port, tls)
    try:
        console = make_console(args, act_on_budgets=False)
    except BaseException:
        server.server_close()
        raise
    try:
        server.set_app(_console_app(console, token))
        scheme = "https" if tls else "http"
        host = f"[{args.listen}]" if ":" in args.listen else args.listen
        print(f"serving the fleet's metrics on {scheme}://{host}:{server.server_address[1]}/metrics "
              "(Ctrl-C stops)", file=out, flush=True)
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():  # signals reach the main thread only
            signal.signal(signal.SIGTERM, _interrupt)
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        console.close()
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM (a Deployment's pod stopping) ends the command like Ctrl-C


def _console_app(console: Any, token: str | None) -> Wsgi:
    """Start the console's polling and the autopilot count, and the app serving their figures."""
    from prometheus_client import CollectorRegistry, ProcessCollector, make_wsgi_app

    from gpuconsole.core.fleet.metrics import AutopilotTally, FleetCollector
    from gpuconsole.core.fleet.periodic import PeriodicJob

    console.start()
    tally = AutopilotTally(console.services.guard.audit)
    console.periodic.start(PeriodicJob("metrics-autopilot", AUTOPILOT_COUNT_S, tally.refresh))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FleetCollector(lambda: console.snapshot, tally.counts))
    ProcessCollector(registry=registry)
    return guarded_app(make_wsgi_app(registry), token)


def guarded_app(metrics: Wsgi, token: str | None) -> Wsgi:
    """``metrics`` on ``/metrics``, behind the bearer ``token`` when there is one; 404 elsewhere."""
    from hmac import compare_digest

    expected = f"Bearer {token}".encode() if token is not None else None

    def app(environ: dict[str, Any], respond: Callable[..., Any]) -> Iterable[bytes]:
        if expected is not None:
            scheme, _, given = environ.get("HTTP_AUTHORIZATION", "").strip().partition(" ")
            if not compare_digest(f"{scheme.capitalize()} {given.strip()}".encode(), expected):
                respond("401 Unauthorized", [("Content-Type", TEXT), ("WWW-Authenticate", 'Bearer realm="gpuconsole"')])
                return [b"401: a bearer token is required (Authorization: Bearer <token>)\n"]
        path = environ.get("PATH_INFO", "")
        if path in ("/metrics", "/metrics/"):
            return metrics(environ, respond)
        if path == "/":
            respond("200 OK", [("Content-Type", TEXT)])
            return [b"gpuconsole: see /metrics\n"]
        respond("404 Not Found", [("Content-Type", TEXT)])
        return [b"404: not found; the metrics are on /metrics\n"]

    return app


def _token(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        token = path.expanduser().read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"argument --token-file: cannot read {path}: {exc}") from None
    if not token or any(c.isspace() or not c.isprintable() for c in token):
        raise BadInput(f"argument --token-file: {path} must hold one token: printable, no spaces")
    return token


def _tls(cert: Path | None, key: Path | None) -> ssl.SSLContext | None:
    import ssl

    if cert is None:
        if key is not None:
            raise BadInput("argument --tls-key: needs --tls-cert")
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert.expanduser(), key.expanduser() if key is not None else None)
    except (OSError, ssl.SSLError) as exc:
        raise BadInput(f"argument --tls-cert: cannot serve TLS with {cert}: {exc}") from None
    return context


def metrics_server(address: tuple[str, int], tls: ssl.SSLContext | None) -> WSGIServer:
    """A WSGI server (its app set with ``set_app``) that answers each request on a thread of its
    own, the TLS handshake there too, so a slow scraper holds no other. Raises OSError when it
    cannot listen."""
    import socket
    from socketserver import ThreadingMixIn
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

    class Quiet(WSGIRequestHandler):
        timeout = REQUEST_TIMEOUT_S

        def log_message(self, format: str, *args: Any) -> None:
            return None

    class Server(ThreadingMixIn, WSGIServer):
        daemon_threads = True
        address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET

        def handle_error(self, request: Any, client_address: Any) -> None:
            log.debug("metrics request from %s failed", client_address, exc_info=True)  # the client's doing

    server = Server(address, Quiet)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    return server


def _listen(host: str, port: int, tls: ssl.SSLContext | None) -> WSGIServer:
    """Bind first: a port in use or a bad address is one line before the sources are built."""
    import socket

    try:
        return metrics_server((host, port), tls)
    except (OSError, OverflowError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        option = "--listen" if isinstance(exc, socket.gaierror) or "assign" in why else "--port"
        raise BadInput(f"argument {option}: cannot listen on {host}:{port}: {why}") from None

