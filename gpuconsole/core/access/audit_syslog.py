"""The system log as an audit copy: each message to ``/dev/log`` (journald's too), authpriv,
tagged ``gpuconsole-audit``, through the queue of :class:`~gpuconsole.core.access.audit_sink.QueuedSink`."""

from __future__ import annotations

import logging
import logging.handlers
from collections.abc import Callable, Sequence


class _StrictSyslog(logging.handlers.SysLogHandler):
    """The standard syslog handler, but a failed send raises instead of printing a traceback."""

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's name
        raise  # noqa: PLE0704 - re-raise the send's own error, which logging is handling


def syslog_sender(socket_path: str) -> Callable[[Sequence[str]], None]:
    """Send messages to the system log at ``socket_path`` (authpriv, tagged ``gpuconsole-audit``)."""
    handler: list[_StrictSyslog] = []

    def send(lines: Sequence[str]) -> None:
        if not handler:
            made = _StrictSyslog(address=socket_path, facility=logging.handlers.SysLogHandler.LOG_AUTHPRIV)
            made.ident = "gpuconsole-audit: "
            handler.append(made)
        for line in lines:
            handler[0].emit(logging.LogRecord("gpuconsole.audit", logging.INFO, "", 0, line, None, None))

    return send
