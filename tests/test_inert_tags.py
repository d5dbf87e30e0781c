"""Instance tags are text from data too: escapes and markup planted in an instance's Name and
another tag in moto's EC2 reach the terminal spelled out (EC2 answers in XML, which holds no
C0 control character, so a tag's escapes are the 8-bit ones: C1 OSC 52 and CSI, and DEL), in the console's Instances pane (its
Name column: the very string a full repaint writes) and in ``snapshot``'s text and JSON (the
bytes the real command writes to its pipe; the JSON holds the exact text, markup and all)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuconsole.core.fleet.console import Console, ConsoleOptions
from gpuconsole.core.fleet.sources import SourceOptions
from tests.aws_peer import TEST_REGION, AwsPeer
from tests.driving import running
from tests.test_inert_console import terminal_bytes

pytestmark = pytest.mark.slow

OSC52 = "\x9d52;c;cHduZWQ=\x9c"  # the 8-bit OSC: sets the operator's clipboard to "pwned"
NAME = f"train {OSC52}\x9b31mred\x7f [bold red]markup[/]"
TEAM = f"[link=https://evil.example]nlp[/link]{OSC52}"
RAW = ("\x9d", "\x9c", "\x9b", "\x7f")


def planted_instance(peer: AwsPeer) -> str:
    tags = [{"Key": "Name", "Value": NAME}, {"Key": "team", "Value": TEAM}]
    answer = peer.client("ec2").run_instances(ImageId=peer.image_id(), InstanceType="g5.xlarge", MinCount=1, MaxCount=1,
                                              TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])
    return answer["Instances"][0]["InstanceId"]


async def test_an_instance_tag_reaches_the_console_as_text(aws_peer: AwsPeer, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("GPUCONSOLE_AUDIT_DB", str(tmp_path / "audit.db"))
    planted_instance(aws_peer)
    options = ConsoleOptions(sources=SourceOptions(cloud="aws", regions=(TEST_REGION,), gpus="off", jobs="off"),
                             interval=0.3, timeout=20)
    async with running(Console(options), live=lambda app: len(app.snapshot.instances) == 1,
                       size=(200, 40)) as (app, pilot):
        await pilot.press("4")
        await pilot.pause()
        written = terminal_bytes(app)
        assert "train \\x9d52;c;cHduZWQ=" in written, "the Name tag is shown, spelled out"
        assert [raw for raw in RAW if raw in written] == []


def test_snapshot_writes_an_instance_tag_spelled_out(aws_peer: AwsPeer, tmp_path: Path) -> None:
    instance = planted_instance(aws_peer)
    argv = [sys.executable, "-m", "gpuconsole", "snapshot", "--region", TEST_REGION, "--gpus", "off", "--jobs", "off",
            "--no-db", "--wide"]
    text = subprocess.run(argv, capture_output=True, timeout=120, env=dict(os.environ), cwd=tmp_path, check=False)
    assert text.returncode == 0, text.stderr
    out = text.stdout.decode()
    assert instance in out
    assert not any(raw in out + text.stderr.decode() for raw in RAW)
    done = subprocess.run([*argv, "--json"], capture_output=True, timeout=120, env=dict(os.environ), cwd=tmp_path,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert not any(raw in done.stdout.decode() for raw in RAW)
    [shown] = [i for i in json.loads(done.stdout)["instances"] if i["instance_id"] == instance]
    assert shown["name"] == NAME and dict(shown["tags"])["team"] == TEAM  # the exact text, escaped as JSON
