"""Text from data never reaches the terminal as control characters: an escape sequence in an
instance id, an audit target or a parameter (an OSC 52 clipboard write, a clear-screen, a C1
CSI) is written spelled out by every command; JSON answers stay valid JSON and CSV keeps its
line ends. Checked on the bytes the real command writes to its pipes."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys

import pytest

from gpuconsole.cli.inert_output import spelled
from gpuconsole.core.access.audit import AuditLog

OSC52 = "\x1b]52;c;cHduZWQ=\x07"
TARGET = f"i-{OSC52}\x1b[2J\x9b31m"
RAW = (b"\x1b", b"\x07", "\x9b".encode(), "\x7f".encode())


def gpuconsole(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "gpuconsole", *argv], capture_output=True, timeout=120,
                          env={**os.environ, **(env or {})}, check=False)


@pytest.fixture
def forged(tmp_path) -> dict[str, str]:
    """An audit log holding a record whose target and parameter carry escape sequences."""
    path = tmp_path / "state" / "audit.db"
    AuditLog(path).append("bob", "developer", "stop", TARGET, (("note", "\x7f\r=x"),), "ok")
    return {"GPUCONSOLE_AUDIT_DB": str(path)}


def test_an_instance_id_with_an_escape_sequence_is_refused_in_one_inert_line() -> None:
    done = gpuconsole("instance", "stop", f"i-{OSC52}", "--demo")
    assert done.returncode == 2 and done.stdout == b""
    assert not any(raw in done.stderr for raw in RAW)
    line = done.stderr.decode()
    assert line.count("\n") == 1 and "not an instance id" in line and "\\x1b]52" in line


def test_audit_list_shows_a_forged_target_spelled_out(forged) -> None:
    done = gpuconsole("audit", "list", env=forged)
    assert done.returncode == 0
    assert not any(raw in done.stdout + done.stderr for raw in RAW)
    assert b"i-\\x1b]52;c" in done.stdout


def test_the_json_export_is_valid_json_holding_the_exact_text(forged) -> None:
    done = gpuconsole("audit", "export", "--json", env=forged)
    assert done.returncode == 0 and not any(raw in done.stdout for raw in RAW)
    record = json.loads(done.stdout)["records"][0]
    assert record["target"] == TARGET and record["params"] == {"note": "\x7f\r=x"}


def test_the_csv_export_keeps_its_line_ends_and_reads_back(forged) -> None:
    done = gpuconsole("audit", "export", "--csv", env=forged)
    assert done.returncode == 0 and not any(raw in done.stdout for raw in RAW)
    text = done.stdout.decode()
    assert text.count("\r\n") == 2  # the header's and the record's line ends, nothing else a CR
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert rows[1][5].startswith("i-\\x1b]52") and rows[1][6] == '{"note": "\\u007f\\r=x"}'


@pytest.mark.parametrize(("text", "shown"), [
    ("a\r\nb", "a\r\nb"), ("ok\rdenied", "ok\\x0ddenied"), ("\x1b[31m", "\\x1b[31m"),
    ("\x9b2J", "\\u009b2J"), ("tab\there\n", "tab\there\n"), ("\x00\x08\x0b\x0c\x0e\x1f", "\\x00\\x08\\x0b\\x0c\\x0e\\x1f"),
])
def test_what_each_control_character_becomes(text: str, shown: str) -> None:
    assert spelled(text) == shown


def test_the_full_screen_console_draws_through_the_real_streams() -> None:
    from gpuconsole.cli.inert_output import InertStream, inert_streams, plain_streams

    real = sys.stdout
    with inert_streams():
        assert isinstance(sys.stdout, InertStream) and isinstance(sys.stderr, InertStream)
        with plain_streams():
            assert sys.stdout is real
        assert isinstance(sys.stdout, InertStream)
    assert sys.stdout is real


@pytest.mark.parametrize(("text", "ok"), [
    ("i-0123456789abcdef0", True), ("i-12345678", True), ("i-bp1g6zv0ce8oghu7k2pm", True),
    ("i-0123456789ABCDEF0", False), ("i-123", False), (f"i-{OSC52}", False), ("i-0123456789abcdef0 ", False),
])
def test_an_instance_id_has_its_clouds_own_form(text: str, ok: bool) -> None:
    from gpuconsole.model.cloud import is_instance_id

    assert is_instance_id(text) is ok
