"""The remote copy read back: a login's chain verified against it, and every login's records.

The copy in CloudWatch Logs (see :mod:`gpuconsole.core.access.audit_sink`) is out of the login's
reach, so it is what ``audit verify`` trusts: the local chain must hold exactly the records the
copy holds for this login and host, plus those still queued. It is also the shared log that
auditors read, whoever wrote each record.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from datetime import datetime

from gpuconsole.core.access.audit import FIELDS, AuditError, AuditLog, Verdict, chain_break
from gpuconsole.backends.base import BackendError
from gpuconsole.core.access.audit_shared import shared_view
from gpuconsole.core.access.audit_sink import CloudWatchSink, RemoteRecord, anchor, decode
from gpuconsole.model import AuditFilter, AuditRecord



def verify_anchored(audit: AuditLog) -> Verdict:
    """Verify ``audit``: against the remote copy when there is one, else its chain and head.

    With a copy, what was queued is sent first; then the first record missing, extra or
    different on either side is named. A recomputed chain, a deleted database (with or without
    its head) and a truncated tail are all found, since the login cannot touch the copy.
    """
    sink = anchor(audit)
    if sink is None:
        return audit.verify()
    sink.flush()
    if (why := _not_the_writer(sink)) is not None:  # another identity's copy proves nothing either way
        return Verdict(False, 0, why, unreadable=True, hint="verify with the login's own IAM user's keys")
    try:
        remote = by_seq(sink.remote())
        local = audit.records() if audit.path.exists() else []
    except AuditError as exc:  # a copy (or log) that cannot be read: its own answer, not tampering
        return Verdict(False, 0, str(exc), unreadable=True, hint="verify again once it can be read")
    if isinstance(remote, Verdict):
        return remote
    queued = {r.record.seq for r in map(decode, sink.queued()) if r is not None}
    verdict = compare(local, remote, queued, sink.name, max_lag_s=sink.max_lag_s, now=time.time())
    return dataclasses.replace(verdict, message=f"{verdict.message}; {_account(sink)}")


def _not_the_writer(sink: CloudWatchSink) -> str | None:
    """With ``[audit] account``: why the copy these keys read is not this login's (None: it is)."""
    if sink.writer is None:
        return None
    try:
        return sink.writer.problem()
    except BackendError as exc:
        return f"who the copy is read as is unknown, so it vouches for nothing: {exc}"


def _account(sink: CloudWatchSink) -> str:
    """Which AWS account the copy was read as: a copy in another account vouches for nothing."""
    try:
        return f"read as AWS account {sink.store.account()}"
    except BackendError as exc:
        return f"the AWS account it was read as is unknown ({exc})"


def by_seq(remote: Sequence[RemoteRecord]) -> dict[int, AuditRecord] | Verdict:
    """The copy's records by number. The copy must be a prefix of one chain: a number sent twice
    with different contents means another chain was sent under the same login and host (a log
    deleted and begun again, a second log, a forged record), and the copy vouches for neither."""
    out: dict[int, AuditRecord] = {}
    where: dict[int, str] = {}
    for item in remote:
        seen = out.setdefault(item.record.seq, item.record)
        first = where.setdefault(item.record.seq, item.stream)
        if seen != item.record:
            streams = f" (streams {first} and {item.stream})" if first != item.stream else ""
            return Verdict(False, len(out), f"record {item.record.seq} is in the remote copy twice, with different "
                                            f"contents{streams}: the copy holds another chain sent as "
                                            f"{item.login}@{item.host}", item.record.seq)
    return out


def compare(local: Sequence[AuditRecord], remote: Mapping[int, AuditRecord], queued: set[int], where: str, *,
            max_lag_s: float | None = None, now: float | None = None) -> Verdict:
    """The verdict of holding the local chain against the remote copy (``queued``: numbers not
    sent yet, which only the local log holds for now). A record queued for longer than
    ``max_lag_s`` fails: while the copy does not hold it, the copy vouches for nothing after it
    (its login could cut it from the log and the queue alike)."""
    mine = {r.seq: r for r in local}
    n = len(mine)
    waiting = 0
    for seq in sorted(set(mine) | set(remote)):
        here, there = mine.get(seq), remote.get(seq)
        if here is None:
            return Verdict(False, n, f"record {seq} is missing from the local log (the remote copy in {where} has it)", seq)
        if there is None:
            if seq in queued:
                waited = (now or 0.0) - parse_ts(here.ts)
                if max_lag_s is not None and now is not None and waited > max_lag_s:
                    return Verdict(False, n, f"record {seq} has waited {waited / 60:.0f} min for the remote copy in "
                                             f"{where} (longer than [audit] max_lag, {max_lag_s / 60:g} min): the "
                                             "copy cannot vouch for it or anything after it", seq)
                waiting += 1
                continue
            return Verdict(False, n, f"record {seq} is extra in the local log: the remote copy in {where} "
                                     "never received it", seq)
        if here != there:
            fields = ", ".join(f for f in FIELDS if getattr(here, f) != getattr(there, f))
            return Verdict(False, n, f"record {seq} differs from the remote copy in {where} ({fields})", seq)
    broken = chain_break([remote[s] for s in sorted(remote)] + [mine[s] for s in sorted(mine) if s not in remote])
    if broken is not None:
        return Verdict(False, n, f"{broken[1]} (in the remote copy too)", broken[0])
    note = f"; {waiting} not yet sent (queued)" if waiting else ""
    return Verdict(True, n, f"audit log intact: {n} record(s), chain verified against the remote copy in {where}{note}")


def parse_ts(ts: str) -> float:
    """Seconds since the epoch of a record's ``ts`` (ISO 8601, UTC)."""
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def shared_records(audit: AuditLog, flt: AuditFilter | None = None,
                   findings: list[str] | None = None) -> list[AuditRecord] | None:
    """Every login's records, from the shared remote copy, in time order, each chain checked
    (:mod:`.audit_shared`: forks, breaks, gaps and identity mismatches flagged, their lines
    added to ``findings``); None without a copy.

    Raises:
        AuditError: the copy cannot be read.
    """
    sink = anchor(audit)
    if sink is None:
        return None
    sink.flush()
    records, found = shared_view(sink.remote(everyone=True))
    if findings is not None:
        findings.extend(found)
    return [r for r in records if flt is None or flt.matches(r)]
