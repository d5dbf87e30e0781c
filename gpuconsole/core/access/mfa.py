"""MFA for destructive admin actions: TOTP codes (RFC 6238) from an authenticator app.

Each OS user's secret lives in a file only its owner can read (0600), with what the checks
need to survive a restart: the time step of the last code accepted (a code is accepted once,
so a code seen over a shoulder cannot be replayed), the recent wrong codes (five within five
minutes lock the user out for five minutes) and when the last code was accepted (a code keeps
destructive actions open for a short window, ``mfa_window_s`` in the users table).

The clock is injectable, so the tests pass exact times instead of waiting.
"""

from __future__ import annotations

import contextlib
import fcntl
import hmac
import io
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyotp

from gpuconsole.core.access.access import login_key
from gpuconsole.core.paths import private_file, write_private

ISSUER = "gpuconsole"
STEP_S = 30
MAX_FAILURES = 5
FAILURE_WINDOW_S = 300.0
LOCKOUT_S = 300.0


class MfaError(Exception):
    """A code was refused, or there is no secret; the message is one line for the user."""


class MfaStore:
    """The TOTP secrets and their state, one file for all the users of this home, each kept
    under its login's uid (``uid:N``), not under a name.

    Args:
        path: the secrets file (created 0600 on first enrolment).
        clock: seconds since the epoch; tests pass a fixed one.
    """

    def __init__(self, path: Path, clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path).expanduser()
        self.clock = clock

    @staticmethod
    def _adopt(state: dict[str, Any], user: str) -> str:
        """The key of ``user``'s entry (by uid, see :func:`login_key`), moving an entry a
        former version kept under the name, so an enrolment is never lost."""
        key = login_key(user)
        if key != user and key not in state and user in state:
            state[key] = state.pop(user)
        return key

    def _entry(self, user: str) -> dict[str, Any]:
        users = self._read()
        return dict(users.get(login_key(user)) or users.get(user) or {})

    # ------------------------------------------------------------------ enrolment
    def enroll(self, user: str) -> tuple[str, str]:
        """A new secret for ``user`` (replacing any old one); returns it and its otpauth URI."""
        secret = pyotp.random_base32()
        with self._state() as state:
            state[self._adopt(state, user)] = {"secret": secret, "last_step": -1, "failures": [], "locked_until": 0.0,
                           "verified_at": None}
        return secret, provisioning_uri(secret, user)

    def enrolled(self, user: str) -> bool:
        return bool(self._entry(user).get("secret"))

    def private_copy(self, path: Path) -> MfaStore:
        """A store at ``path`` with this one's secrets and none of its state (failures, lockout,
        last code, window), for a demo: codes typed there are checked against the user's own
        authenticator, but nothing typed there counts here. An unreadable file gives no secrets."""
        try:
            users = self._read()
        except MfaError:
            users = {}
        copy = MfaStore(path, self.clock)
        with copy._state() as state:
            for user, entry in users.items():
                if isinstance(entry, dict) and entry.get("secret"):
                    state[user] = {"secret": entry["secret"], "last_step": -1, "failures": [], "locked_until": 0.0,
                                   "verified_at": None}
        return copy

    def forget(self, user: str) -> bool:
        with self._state() as state:
            return state.pop(self._adopt(state, user), None) is not None

    # ------------------------------------------------------------------ checking
    def verify(self, user: str, code: str) -> None:
        """Accept ``code`` for ``user`` or raise :class:`MfaError` saying why.

        A right code opens the window for destructive actions. Wrong and replayed codes count
        toward the lockout.
        """
        code = code.strip().replace(" ", "")
        with self._state() as state:
            entry = state.get(self._adopt(state, user))
            if not entry or not entry.get("secret"):
                raise MfaError(f"{user} has no MFA enrolled: run gpuconsole users mfa enroll")
            now = self.clock()
            locked = float(entry.get("locked_until") or 0.0)
            if now < locked:
                raise MfaError(f"locked out after {MAX_FAILURES} wrong codes: try again in {locked - now:.0f} s")
            step = matching_step(entry["secret"], code, now)
            if step is not None and step > int(entry.get("last_step", -1)):
                entry.update(last_step=step, failures=[], locked_until=0.0, verified_at=now)
                return
            failures = [t for t in entry.get("failures", []) if now - float(t) < FAILURE_WINDOW_S] + [now]
            entry["failures"] = failures
            why = "code already used: wait for the next one" if step is not None else "wrong code"
            if len(failures) >= MAX_FAILURES:
                entry["locked_until"] = now + LOCKOUT_S
                entry["failures"] = []
                raise MfaError(f"{why}; {MAX_FAILURES} failures in {FAILURE_WINDOW_S / 60:.0f} min: "
                               f"locked out for {LOCKOUT_S / 60:.0f} min")
            raise MfaError(f"{why} ({len(failures)} of {MAX_FAILURES} allowed failures)")

    def fresh(self, user: str, window_s: float) -> bool:
        """Whether ``user`` gave a right code within the last ``window_s`` seconds."""
        verified = self._entry(user).get("verified_at")
        return verified is not None and 0 <= self.clock() - float(verified) <= window_s

    def locked_for(self, user: str) -> float:
        """Seconds ``user`` is still locked out (0 when not)."""
        locked = float(self._entry(user).get("locked_until") or 0.0)
        return max(0.0, locked - self.clock())

    # ------------------------------------------------------------------ the file
    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8") or "{}")
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise MfaError(f"cannot read the MFA secrets {self.path}: {exc}") from exc
        return dict(data.get("users", {})) if isinstance(data, dict) else {}

    @contextlib.contextmanager
    def _state(self) -> Iterator[dict[str, Any]]:
        """The users' entries, read and written back under an exclusive lock (another console
        of the same user may verify at the same moment)."""
        lock = private_file(self.path.with_name(self.path.name + ".lock"))
        with open(lock, "r+", encoding="utf-8") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                state = self._read()
                try:
                    yield state
                finally:
                    write_private(self.path, json.dumps({"users": state}, indent=1) + "\n")
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def matching_step(secret: str, code: str, now: float) -> int | None:
    """The time step whose code ``code`` is, allowing one step of clock drift either way."""
    if not code.isdigit():
        return None
    totp = pyotp.TOTP(secret, interval=STEP_S)
    current = int(now // STEP_S)
    for step in (current, current - 1, current + 1):
        if hmac.compare_digest(totp.at(step * STEP_S), code):
            return step
    return None


def code_at(secret: str, when: float) -> str:
    """The code an authenticator shows at ``when`` (for tests and the enrolment check)."""
    return pyotp.TOTP(secret, interval=STEP_S).at(int(when))


def provisioning_uri(secret: str, user: str) -> str:
    return pyotp.TOTP(secret, interval=STEP_S).provisioning_uri(name=user, issuer_name=ISSUER)


def qr_text(uri: str) -> str:
    """The otpauth URI as a QR code drawn with block characters, for a terminal to scan from."""
    import segno

    out = io.StringIO()
    segno.make(uri, error="m").terminal(out=out, compact=True, border=2)
    return out.getvalue()


def env_code() -> str | None:
    """An MFA code given in ``$GPUCONSOLE_MFA_CODE`` (for scripts that read it from a vault)."""
    return os.environ.get("GPUCONSOLE_MFA_CODE") or None
