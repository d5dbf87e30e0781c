"""When the kubeconfig's credentials of a context expire: a client certificate's notAfter, a
token's ``exp`` claim (a JWT). Read from the file, no cluster call; for the key-hygiene alert."""

from __future__ import annotations

import base64
import binascii
import json
import os
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509

from gpuconsole.backends.base import BackendError


def _files(kubeconfig: str | None) -> list[Path]:
    spec = kubeconfig or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
    return [Path(p).expanduser() for p in spec.split(os.pathsep) if p]


def _load(kubeconfig: str | None) -> dict[str, Any]:
    """The kubeconfig files merged as kubectl does (the first file to name a thing wins)."""
    merged: dict[str, Any] = {"contexts": [], "users": [], "current-context": None}
    for path in _files(kubeconfig):
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except FileNotFoundError:
            continue
        except (OSError, yaml.YAMLError) as exc:
            raise BackendError(f"cannot read kubeconfig {path}: {exc}") from exc
        merged["current-context"] = merged["current-context"] or data.get("current-context")
        for key in ("contexts", "users"):
            merged[key].extend(data.get(key) or [])
    return merged


def credential_expiries(kubeconfig: str | None, context: str | None) -> list[tuple[str, float]]:
    """``(what, expires at)`` for the context's client certificate and token, where they say."""
    config = _load(kubeconfig)
    name = context or config["current-context"]
    ctx = next((c.get("context") or {} for c in config["contexts"] if c.get("name") == name), None)
    if ctx is None:
        return []
    user_name = ctx.get("user")
    user = next((u.get("user") or {} for u in config["users"] if u.get("name") == user_name), {})
    out: list[tuple[str, float]] = []
    pem = _certificate(user)
    if pem:
        expires = certificate_not_after(pem)
        if expires is not None:
            out.append((f"client certificate of kubeconfig user {user_name}", expires))
    token = user.get("token")
    if isinstance(token, str):
        exp = jwt_expiry(token)
        if exp is not None:
            out.append((f"token of kubeconfig user {user_name}", exp))
    return out


def _certificate(user: dict[str, Any]) -> bytes | None:
    data = user.get("client-certificate-data")
    if data:
        try:
            return base64.b64decode(data)
        except (binascii.Error, ValueError):
            return None
    path = user.get("client-certificate")
    if path:
        try:
            return Path(path).expanduser().read_bytes()
        except OSError:
            return None
    return None


def certificate_not_after(pem: bytes) -> float | None:
    """The end of a PEM certificate's validity, in epoch seconds (None when unreadable)."""
    try:
        cert = x509.load_pem_x509_certificate(pem)
    except ValueError:
        return None
    return cert.not_valid_after_utc.timestamp()


def jwt_expiry(token: str) -> float | None:
    """The ``exp`` claim of a JWT (a service-account or OIDC token), or None for other tokens."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except (binascii.Error, ValueError):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, int | float) else None
