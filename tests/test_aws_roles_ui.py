"""The console as an admin under ``[aws.roles]``: the AWS session waits for a code, the palette
opens it through the MFA dialog, and AWS gets the device and the code (moto enforcing IAM)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input

from gpuconsole.core.fleet.console import Console, ConsoleOptions
from gpuconsole.core.fleet.sources import SourceOptions
from gpuconsole.model import SourceKind
from gpuconsole.ui.app import GpuConsoleApp
from gpuconsole.ui.screens.mfa_prompt import MfaPrompt
from tests.aws_peer import TEST_REGION
from tests.aws_peer_iam import IamWorld, iam_moto, iam_world  # noqa: F401 - fixtures
from tests.helpers import wait_until
from tests.test_access_ui import select_row
from tests.driving import SIZE
from tests.test_aws_roles import MFA_SERIAL, home  # noqa: F401 - fixture

pytestmark = pytest.mark.slow


def _cloud_error(console: Console) -> str:
    status = console.snapshot.source(SourceKind.CLOUD)
    return (status.error or "") if status is not None else ""


async def test_the_admin_opens_the_aws_session_in_the_mfa_dialog_then_stops(
        iam_world: IamWorld, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    iam_world.use_profile(monkeypatch, "admin-user")
    config = iam_world.config(tmp_path / "config.toml", mfa_serial=MFA_SERIAL)
    options = ConsoleOptions(sources=SourceOptions(cloud="aws", regions=(TEST_REGION,), gpus="off", jobs="off"),
                             interval=0.2, timeout=20, config_path=config)
    console = Console(options)
    app = GpuConsoleApp(console)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(lambda: "needs a current MFA code" in _cloud_error(console), timeout=20)
            assert not [r for r in iam_world.moto.proxy.requests if r.action == "AssumeRole"]
            await pilot.press("ctrl+p")
            await pilot.pause()
            await pilot.press(*"admin session")
            await pilot.pause(0.3)
            await pilot.press("enter")
            await wait_until(lambda: isinstance(app.screen, MfaPrompt))
            app.screen.query_one(Input).value = "246810"
            await pilot.press("enter")
            await wait_until(lambda: any(i.instance_id == iam_world.instance_id for i in console.snapshot.instances),
                             timeout=20)
            await select_row(app, pilot, "4", "instance-table", iam_world.instance_id)
            await pilot.press("s", "y")
            await wait_until(lambda: any(r.action == "stop" and r.result != "started" for r in console.services.guard.audit.records()), timeout=20)
            assert not isinstance(app.screen, MfaPrompt)  # the open session serves the stop
    finally:
        console.close()
    [stop] = [r for r in console.services.guard.audit.records() if r.action == "stop" and r.result != "started"]
    assert stop.result == "ok"
    [assume] = [r for r in iam_world.moto.proxy.requests if r.action == "AssumeRole"]
    assert (assume.params["SerialNumber"], assume.params["TokenCode"]) == (MFA_SERIAL, "246810")
    assert iam_world.instance_state() in ("stopping", "stopped")
