"""Who the Azure calls run as, and what Azure RBAC lets that principal do: for ``access whoami``.

The principal is read from the access token the credential hands out (its ``oid``, ``upn`` or
``appid``, ``tid`` claims; the token is only decoded, never trusted for anything). Its role
assignments come from Microsoft.Authorization (``roleAssignments`` at the subscription filtered
by ``assignedTo('{objectId}')``, each role's name from its ``roleDefinitions`` entry).
"""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import urlsplit

from gpuconsole.backends.azure.mapping import backend_error


def claims(token: str) -> dict[str, Any]:
    """The claims of a JWT (unverified); ``{}`` for anything else."""
    parts = token.split(".")
    if len(parts) < 2:
        return {}
    try:
        found = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, UnicodeDecodeError):
        return {}
    return found if isinstance(found, dict) else {}


def principal(credential: Any, arm_endpoint: str) -> dict[str, str]:
    """``caller`` (user name or application id), ``object_id``, ``tenant`` and ``identity_type``."""
    parts = urlsplit(arm_endpoint)
    try:
        token = credential.get_token(f"{parts.scheme}://{parts.netloc}/.default").token
    except Exception as exc:  # the credential chain's own errors: one line
        raise backend_error(exc, "Azure sign-in") from None
    found = claims(token)
    user = found.get("upn") or found.get("unique_name") or found.get("preferred_username")
    return {"caller": str(user or found.get("appid") or found.get("azp") or ""),
            "object_id": str(found.get("oid") or ""), "tenant": str(found.get("tid") or ""),
            "identity_type": "user" if user else ("service principal" if found.get("appid") else "")}


def assignments(client: Any, subscription: str, object_id: str) -> tuple[dict[str, str], ...]:
    """``role``, ``scope`` and ``principal_type`` of each role assignment of ``object_id``."""
    scope = f"/subscriptions/{subscription}"
    found = client.role_assignments.list_for_scope(scope, filter=f"assignedTo('{object_id}')" if object_id else None)
    names: dict[str, str] = {}
    out = []
    for item in found:
        raw = item.as_dict() if hasattr(item, "as_dict") else dict(item)
        definition = str(raw.get("role_definition_id") or raw.get("roleDefinitionId") or "")
        if definition and definition not in names:
            role = client.role_definitions.get_by_id(definition)
            names[definition] = str(getattr(role, "role_name", "") or definition.rsplit("/", 1)[-1])
        out.append({"role": names.get(definition, ""), "scope": str(raw.get("scope") or ""),
                    "principal_type": str(raw.get("principal_type") or raw.get("principalType") or "")})
    return tuple(out)
