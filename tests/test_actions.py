"""The one path for changes: confirmations are checked in the core, results recorded."""

from __future__ import annotations

import pytest

from gpuconsole.backends.base import BackendError
from gpuconsole.core.ops.actions import (
    ActionError,
    ActionKind,
    ActionLog,
    ActionRequest,
    confirmation_prompt,
    run_action,
)


def test_terminate_needs_the_typed_id() -> None:
    log = ActionLog()
    calls: list[str] = []
    for typed in ("", "yes", "i-0abc"):
        with pytest.raises(ActionError, match="type i-0abc123 exactly"):
            run_action(ActionRequest(ActionKind.TERMINATE, "i-0abc123", "us-east-1", typed), lambda: calls.append("x") or "", log)
    assert calls == []
    assert [r.ok for r in log.recent()] == [False] * 3
    result = run_action(ActionRequest(ActionKind.TERMINATE, "i-0abc123", "us-east-1", " i-0abc123 "), lambda: "gone", log)
    assert result.ok and result.message == "gone"
    assert "Type i-0abc123" in confirmation_prompt(ActionKind.TERMINATE, "i-0abc123")


def test_stop_needs_yes_start_needs_nothing() -> None:
    log = ActionLog()
    with pytest.raises(ActionError, match="needs a yes"):
        run_action(ActionRequest(ActionKind.STOP, "i-1"), lambda: "stopped", log)
    assert run_action(ActionRequest(ActionKind.STOP, "i-1", confirmation="yes"), lambda: "stopped", log).ok
    assert run_action(ActionRequest(ActionKind.START, "i-1"), lambda: "started", log).ok


def test_backend_failure_is_one_line_and_recorded() -> None:
    log = ActionLog(limit=2)

    def fail() -> str:
        raise BackendError("IncorrectInstanceState: not stoppable\nmore detail")

    for _ in range(3):
        with pytest.raises(ActionError) as info:
            run_action(ActionRequest(ActionKind.REBOOT, "i-2", confirmation="yes"), fail, log)
        assert str(info.value) == "IncorrectInstanceState: not stoppable"
    assert len(log.recent()) == 2 and log.recent()[-1].message.startswith("failed: ")
