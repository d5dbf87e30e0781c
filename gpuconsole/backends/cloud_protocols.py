"""What a cloud may do about whom its calls run as, besides the Protocols of
:mod:`gpuconsole.backends.base` (which re-exports these)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class RoleCredentials(Protocol):
    """A cloud whose calls run as a role session the core opens (``[alibaba.roles]``): it
    assumes a role as the login (STS AssumeRole), then calls with what it got."""

    def assume_role(self, role_arn: str, session_name: str, duration_s: int) -> dict[str, Any]:
        ...

    def use_role_credentials(self, refresh: Callable[[], dict[str, str]] | None) -> None:
        ...
