"""Who may write a login's audit copy when no relay does: that login's own IAM user, in the
site's account.

Without a relay, the copy is sent from the login's own process with keys from the login's own
files: whatever the sink can use, the login can use directly too. So what keeps a login from
cutting or rewriting its copy is the identity those keys belong to, not where they are kept:
an IAM user with ``gpuconsole-audit-writer`` alone (``access iam-policy``) may create and append
to the streams ending in its own name and read the group, and nothing that deletes or edits. With
``[audit] account`` set, the sink asks STS (at the pinned endpoint) who its keys are before it
sends, and sends, and lets actions run, only as ``arn:aws:iam::<account>:user/[<path>/]<login>``:
keys of another account (where the login could delete what it sent), of a role (whose session
name anyone who assumes it picks) or of another user are refused in one line. A site config
that names a CloudWatch copy and neither a relay nor an account is refused at start-up
(:mod:`.site`): on a shared machine each login would choose who it writes as.
"""

from __future__ import annotations

import threading
from typing import Any

from gpuconsole.backends.base import BackendError

ACCOUNT_KEY = "account"


def writer_problem(arn: str, account: str, login: str) -> str | None:
    """Why keys that STS names ``arn`` may not write ``login``'s copy in ``account``; None when they may."""
    parts = arn.split(":", 5)
    if len(parts) == 6 and parts[2] == "iam" and parts[4] == account and parts[5].startswith("user/"):
        if parts[5].rpartition("/")[2] == login:
            return None
    return (f"the audit copy would be written as {arn}, not as {login}'s own IAM user in account {account} "
            f"([audit] {ACCOUNT_KEY}): only that user, with gpuconsole-audit-writer alone, writes {login}'s stream "
            "and may delete nothing")


class WriterCheck:
    """The answer for one store and login, asked once: who its keys are, and whether they may write.

    An unreachable STS gives no answer (records queue as when the copy is away, and ``verify``
    fails once they wait longer than ``max_lag``); a wrong identity is the same answer every time.
    """

    def __init__(self, store: Any, account: str, login: str) -> None:
        self._store, self.account, self._login = store, account, login
        self._lock = threading.Lock()
        self._problem: str | None = None
        self._known = False

    def problem(self) -> str | None:
        """Why the store's keys may not write this login's copy (None: they may, or STS is away).

        Raises:
            BackendError: STS could not be asked (nothing is known yet).
        """
        with self._lock:
            if not self._known:
                arn = self._store.caller()
                self._problem, self._known = writer_problem(arn, self.account, self._login), True
            return self._problem

    def refusal(self) -> str | None:
        """Why an action may not run now: only a known wrong identity (an unreachable STS is
        the copy being away, and the record queues)."""
        try:
            return self.problem()
        except BackendError:
            return None

    def require(self) -> None:
        """Before sending: raise :class:`BackendError` unless the keys are known to be the
        login's own user (so nothing is sent as anyone else, even while STS alone is away)."""
        if (why := self.problem()) is not None:
            raise BackendError(why)
