"""The demo never leaks into real state: budgets made in a demo, actions done there and codes
typed there stay in the demo. Checked by reading the real files directly afterwards, as a real
session (or a cron ``budget check --enforce``) would."""

from __future__ import annotations

import json
import time

import pytest

from gpuconsole.cli.main import main
from gpuconsole.core import paths
from gpuconsole.core.access.access import UsersTable, current_user
from gpuconsole.core.access.audit import AuditLog
from gpuconsole.core.access.mfa import MfaError, MfaStore, code_at
from gpuconsole.core.fleet.store import Store
from gpuconsole.core.ops.actions import ActionKind, ActionRequest
from gpuconsole.model import Budget
from gpuconsole.ui.screens.budget_form import BudgetForm
from gpuconsole.ui.screens.mfa_prompt import MfaPrompt
from tests.helpers import demo_console, wait_until
from tests.driving import running


@pytest.fixture
def real_home(tmp_path):
    """A real home: this login is an admin with MFA enrolled, and a real cache database."""
    me = current_user()
    UsersTable(paths.users_path()).init(me)
    secret, _uri = MfaStore(paths.mfa_path()).enroll(me)
    return me, secret, tmp_path / "real.db"


def real_failures(me: str) -> list:
    from gpuconsole.core.access.access import login_key

    return json.loads(paths.mfa_path().read_text())["users"][login_key(me)]["failures"]


async def test_a_budget_an_action_and_a_wrong_code_in_the_demo_leave_the_real_home_untouched(real_home):
    me, secret, db = real_home
    console = demo_console(db=db)
    async with running(console) as (app, pilot):
        await pilot.press("5", "a")  # the steps: 5, a, f2, ctrl+s
        await wait_until(lambda: isinstance(app.screen, BudgetForm))
        with pytest.raises(MfaError, match="wrong code"):
            app.core.services.guard.verify_mfa("000000", "stop i-demo")
        await pilot.press("f2", "ctrl+s")
        # The preset is an automatic budget: an admin adds it with a code, in the demo too, and
        # the real authenticator's code works there.
        await wait_until(lambda: isinstance(app.screen, MfaPrompt))
        await pilot.press(*code_at(secret, time.time()), "enter")
        await wait_until(lambda: app.core.services.budget_ops.get("pause-at-1000") is not None)
        assert app.core.services.budget_ops.get("pause-at-1000").origin == "store"  # shown in the demo as added
        instance = next(i for i in app.snapshot.instances if i.state.value == "running")
        result = app.core.services.cloud.perform(ActionRequest(ActionKind.STOP, instance.instance_id, region=instance.region,
                                                      confirmation="yes"))
        assert result.ok
        demo_audit = [r.action for r in app.core.services.guard.audit.records()]
        assert "mfa-verify" in demo_audit and "stop" in demo_audit and "budget-add" in demo_audit
    real = Store(db)
    try:
        assert [b.name for b in real.budgets()] == []
        assert real.budget_fired() == set()
    finally:
        real.close()
    assert AuditLog(paths.audit_db_path()).records() == []
    assert real_failures(me) == []
    assert MfaStore(paths.mfa_path()).locked_for(me) == 0


async def test_switching_to_the_demo_leaves_the_real_budgets_and_log_behind(real_home, tmp_path):
    me, _secret, db = real_home
    real = Store(db)
    real.save_budget(Budget("real-team", 500.0))
    real.close()
    console = demo_console(db=db, demo=False)
    async with running(console, live=False) as (app, pilot):
        await wait_until(lambda: app.core.services.budget_ops.get("real-team") is not None)
        app.core.switch_to_demo()
        await wait_until(lambda: app.core.services.budget_ops.get("real-team") is None)
        app.core.services.budget_ops.add(Budget("demo-only", 100.0))
        with pytest.raises(MfaError):
            app.core.services.guard.verify_mfa("000000")
    real = Store(db)
    try:
        assert [b.name for b in real.budgets()] == ["real-team"]
    finally:
        real.close()
    assert AuditLog(paths.audit_db_path()).records() == []
    assert real_failures(me) == []


def test_demo_commands_keep_their_audit_and_budgets_apart(real_home, capsys):
    me, _secret, db = real_home
    assert main(["budget", "add", "demo-cli", "--amount", "100", "--demo", "--db", str(db)]) == 0
    assert "demo session only" in capsys.readouterr().out
    assert main(["budget", "list", "--db", str(db), "--json"]) == 0
    assert "demo-cli" not in capsys.readouterr().out
    assert AuditLog(paths.audit_db_path()).records() == []
