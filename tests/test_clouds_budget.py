"""One ``budget check --enforce`` stops in-scope instances on AWS (moto) and Alibaba Cloud (the ECS
peer) alike, each through its own API, each action audited."""

from __future__ import annotations

import pytest

from gpuconsole.cli.main import main
from gpuconsole.core import paths
from gpuconsole.core.access.audit import AuditLog
from gpuconsole.core.paths import config_dir
from tests.test_budget_spot import ENFORCE, RESEARCH, add_research, on_demand, sent_ids, states



@pytest.mark.slow
def test_stop_all_by_tag_on_aws_and_alibaba(capsys, aws_peer, ecs):
    config = config_dir() / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'[alibaba]\nregions = ["cn-hangzhou"]\nendpoint = "{ecs.url}"\n')
    aws_in, aws_out = on_demand(aws_peer, RESEARCH), on_demand(aws_peer)
    ali_in = ecs.world.add("ecs.gn7i-c8g1.2xlarge", tags=RESEARCH)
    ali_spot = ecs.world.add("ecs.gn6i-c4g1.xlarge", tags=RESEARCH, spot="SpotAsPriceGo")
    ali_out = ecs.world.add("ecs.gn7i-c8g1.2xlarge", tags={"Budget": "inference"})
    add_research(capsys, "100:notify+stop-all")

    code = main(list(ENFORCE))
    out, err = capsys.readouterr()

    assert code == 1, err
    assert sent_ids(aws_peer, "StopInstances") == [aws_in]
    assert states(aws_peer)[aws_in] in ("stopping", "stopped") and states(aws_peer)[aws_out] == "running"
    stopped = sorted(p["InstanceId"] for a, p in ecs.world.calls if a == "StopInstance")
    assert stopped == sorted([ali_in, ali_spot])
    assert all(p["StoppedMode"] == "StopCharging" for a, p in ecs.world.calls if a == "StopInstance")
    assert ecs.world.instances[ali_out]["Status"] == "Running"
    targets = {r.target for r in AuditLog(paths.audit_db_path()).records() if r.action == "stop" and r.result != "started"}
    assert targets == {aws_in, ali_in, ali_spot}
