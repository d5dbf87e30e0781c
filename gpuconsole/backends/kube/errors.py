"""The API server's error answers as one-line backend errors."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gpuconsole.backends.base import (
    BackendError,
    BackendPermissionDenied,
    BackendThrottled,
    BackendTimeout,
)

def status_message(body: Any, limit: int = 200) -> str:
    """The ``message`` of a Kubernetes ``Status`` body, else the body's first line."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if not body:
        return ""
    try:
        doc = json.loads(body)
    except (TypeError, ValueError):
        return one_line(str(body), limit)
    if isinstance(doc, Mapping) and doc.get("message"):
        return one_line(str(doc["message"]), limit)
    return one_line(str(body), limit)


def one_line(text: str, limit: int = 200) -> str:
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    line = lines[0] if lines else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def status_error(status: int, body: Any, where: str) -> BackendError:
    """The error for an HTTP status the API server answered ``where`` (e.g. "listing Jobs")."""
    message = status_message(body)
    detail = f": {message}" if message else ""
    if status == 401:
        return BackendPermissionDenied(f"the API server refused the credentials (401 Unauthorized) {where}")
    if status == 403:
        return BackendPermissionDenied(f"forbidden {where}{detail}")
    if status == 429:
        return BackendThrottled(f"the API server asked to slow down {where}{detail}")
    if status == 404:
        return BackendError(f"not found {where}{detail}")
    if status in (408, 504):
        return BackendTimeout(f"the API server timed out {where}{detail}")
    if status == 0:
        return BackendError(f"cannot talk to the API server {where}{detail}")
    return BackendError(f"the API server answered {status} {where}{detail}")
