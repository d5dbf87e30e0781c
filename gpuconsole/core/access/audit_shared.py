"""The shared copy as an auditor reads it: each (host, login) chain checked before its records
are shown, so a record that was forged, forked, cut out or written under another name is shown
as such, never as a genuine record.

Every login writes the shared copy with its own credentials, so the copy holds whatever a login
chose to send. IAM lets each identity write only its own streams (``<host>/<login>``), so first:

- a message in another identity's stream: a record naming ``alice`` that ``bob`` put in his own
  stream is not alice's; it is flagged and kept out of alice's chain, which it cannot disturb.

Then per chain (the records one login sent from one host) the view finds:

- a fork: one record number sent twice with different contents (a forged duplicate);
- a break: a record whose hash or link to the one before it does not hold;
- a gap: numbers missing between the first and the last;
- an identity mismatch: a record whose actor is not the login that sent it (root alone acts
  under another name).

Flagged records keep their place, their result reading ``untrusted (why): …``; each finding is
also one line for the reader (the CLI prints them as warnings). Identical copies of a record
(a send retried) are one record.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from gpuconsole.core.access.audit import GENESIS, record_hash
from gpuconsole.core.access.audit_sink import RemoteRecord
from gpuconsole.model import AuditRecord

ACTS_AS_OTHERS = frozenset({"root"})


def shared_view(items: Sequence[RemoteRecord]) -> tuple[list[AuditRecord], list[str]]:
    """The records of the copy in time order, flagged where their chain does not hold, and one
    line per finding."""
    chains: dict[tuple[str, str], dict[int, list[AuditRecord]]] = {}
    shown: list[AuditRecord] = []
    findings: list[str] = []
    for item in items:
        owner = item.stream_owner
        if item.stream and owner != item.login and owner not in ACTS_AS_OTHERS:
            why = (f"identity mismatch: record {item.record.seq} of {item.login}@{item.host} is in the stream "
                   f"{item.stream}, which only {owner} writes")
            findings.append(why)
            shown.append(_untrusted(item.record, why))
            continue
        copies = chains.setdefault((item.host, item.login), {}).setdefault(item.record.seq, [])
        if item.record not in copies:
            copies.append(item.record)
    for (host, login), by_seq in chains.items():
        who = f"{login}@{host}"
        flags: dict[int, str] = {}
        for seq, copies in by_seq.items():
            if len(copies) > 1:
                flags[seq] = f"fork: record {seq} of {who} was sent {len(copies)} times with different contents"
        previous = None
        for seq in sorted(by_seq):
            record = by_seq[seq][0]
            expected_prev = GENESIS if seq == 1 else (previous.hash if previous is not None and previous.seq == seq - 1 else None)
            if seq not in flags and not _intact(record, expected_prev):
                flags[seq] = f"break: record {seq} of {who} does not hold its chain (hash or link)"
            if previous is not None and seq > previous.seq + 1:
                findings.append(f"gap: records {previous.seq + 1}–{seq - 1} of {who} are missing from the copy")
            if seq not in flags and record.actor != login and login not in ACTS_AS_OTHERS:
                flags[seq] = f"identity mismatch: {who} sent a record in the name of {record.actor}"
            previous = record
        findings.extend(flags[seq] for seq in sorted(flags))
        for seq, copies in by_seq.items():
            why = flags.get(seq)
            shown.extend(copies if why is None else [_untrusted(r, why) for r in copies])
    shown.sort(key=lambda r: (r.ts, r.seq))
    return shown, findings


def _untrusted(record: AuditRecord, why: str) -> AuditRecord:
    """``record`` with its result saying it is not to be trusted, and which finding says so."""
    return msgspec.structs.replace(record, result=f"untrusted ({why.split(':')[0]}): {record.result}")


def _intact(record: AuditRecord, expected_prev: str | None) -> bool:
    """Whether ``record``'s hash is its own, and it links to ``expected_prev`` (None: the record
    before it is not in the copy, so only the hash is checked)."""
    own = record_hash(record.seq, record.ts, record.actor, record.role, record.action, record.target,
                      record.params, record.result, record.prev_hash)
    return own == record.hash and (expected_prev is None or record.prev_hash == expected_prev)
