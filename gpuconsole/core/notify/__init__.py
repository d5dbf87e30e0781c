"""Notifications: one alert model, channels, an on-disk queue per channel, and one sender.

* :mod:`.alerts`: the alerts of a snapshot, each with a stable identity (``kind:subject``).
* :mod:`.config`: the ``[[notify]]`` channels of the configuration file, and their secrets.
* :mod:`.outbox`: episodes and queues, in one 0600 SQLite file under the state directory.
* :mod:`.channels`: each channel's wire shape (Alertmanager, webhook, Slack, PagerDuty, SNS, e-mail, command).
* :mod:`.sender`: episodes fire, repeat and resolve; queues drain with backoff.
* :mod:`.deploy`: ``notify manifest`` (Kubernetes or systemd).
"""

from __future__ import annotations

import os
from pathlib import Path

from gpuconsole.core.paths import state_dir

DB_ENV = "GPUCONSOLE_NOTIFY_DB"


def outbox_path() -> Path:
    """``$GPUCONSOLE_NOTIFY_DB``, else ``notify.db`` in the state directory (never the cache)."""
    override = os.environ.get(DB_ENV)
    return Path(override).expanduser() if override else state_dir() / "notify.db"


def sender_lock_path() -> Path:
    """The host lock the sender holds: the autopilot's, so ``notify run`` and ``autopilot run``
    are never both sending."""
    from gpuconsole.core.ops.autopilot.loading import state_path

    return state_path().with_suffix(".lock")
