"""The model: frozen msgspec Structs, untracked by the garbage collector, to JSON and back."""

from __future__ import annotations

import gc
import inspect
import json
import math

import msgspec
import pytest

import gpuconsole.model as model
from gpuconsole.model import (
    AuditRecord,
    Budget,
    BudgetPeriod,
    FleetSnapshot,
    Gpu,
    GpuProcess,
    GpuReading,
    Instance,
    InstanceState,
    Market,
    MigMode,
    MigSlice,
    Role,
    Threshold,
    ThresholdBasis,
    User,
    from_jsonable,
    to_jsonable,
)

VALUES = [cls for _, cls in inspect.getmembers(model, inspect.isclass)
          if issubclass(cls, model.Value) and cls is not model.Value]


def test_every_model_class_is_a_frozen_struct_the_collector_does_not_track() -> None:
    assert len(VALUES) >= 35
    for cls in VALUES:
        assert issubclass(cls, msgspec.Struct), cls
        assert cls.__struct_config__.frozen, cls
        assert not cls.__struct_config__.gc, cls


def test_a_gpu_is_built_by_position_or_name_and_cannot_change() -> None:
    args = ("GPU-x", "node", 0, "A100", 50.5, 1000, 81920, 50, 300.1, 400.0, MigMode.DISABLED, (), ())
    gpu = Gpu(*args)
    assert gpu == Gpu(*args[:10]) and gpu.not_reported == () and gpu.pod is None and gpu.pci_bus_id == ""
    assert Gpu(*args[:10], pod="train-0").pod == "train-0"
    assert not gc.is_tracked(gpu)
    with pytest.raises(TypeError):
        Gpu("GPU-x")  # the required fields are required
    with pytest.raises(AttributeError):
        gpu.utilization = 1.0  # type: ignore[misc]
    assert hash(gpu) == hash(Gpu(*args))
    assert msgspec.structs.replace(gpu, utilization=1.0).utilization == 1.0 and gpu.utilization == 50.5
    process = GpuProcess(7, "GPU-x", "python", 100, None, "ana", "uid-1", "compute", "python train.py", 12.5, 80.0)
    part = MigSlice("MIG-GPU-x/1/0", "GPU-x", 1, 0, "3g.40gb", 40192, 100, 12.5, "uid-1")
    assert process.sm_utilization == 80.0 and part.pod_uid == "uid-1"


def test_values_go_to_plain_json_types_and_back() -> None:
    gpu = Gpu("GPU-x", "node", 0, "A100", 50.5, 1000, 81920, 50, 300.1, 400.0, MigMode.ENABLED,
              (MigSlice("MIG-1", "GPU-x", 1, 0, "1g.10gb", 9984),),
              (GpuProcess(7, "GPU-x", "python", 100, "MIG-1"),), throttle_reasons=("sw_power_cap",))
    reading = GpuReading((gpu,), 12.0, (("driver", "550"),))
    plain = to_jsonable(reading)
    assert plain["gpus"][0]["mig_mode"] == "enabled" and plain["gpus"][0]["throttle_reasons"] == ["sw_power_cap"]
    assert plain["versions"] == [["driver", "550"]] and json.loads(json.dumps(plain)) == plain
    assert from_jsonable(GpuReading, plain) == reading
    budget = Budget("team", 100, BudgetPeriod.DAILY, thresholds=(Threshold(80.0, ThresholdBasis.FORECAST),))
    back = from_jsonable(Budget, to_jsonable(budget))
    assert back == budget and isinstance(back.amount, float)
    assert to_jsonable({1: Role.ADMIN}) == {"1": "admin"}
    assert to_jsonable(math.nan) is None  # JSON has no NaN
    assert from_jsonable(User, {"name": "ana", "role": "developer"}) == User("ana", Role.DEVELOPER)


@pytest.mark.parametrize("bad", [
    {"name": "x"},  # a required field missing
    {"name": "x", "amount": "lots"},  # the wrong type
    {"name": "x", "amount": 5, "period": "weekly"},  # not a period
    {"name": "x", "amount": True},  # a bool is not a number
])
def test_data_that_does_not_fit_is_a_value_error(bad: dict) -> None:
    with pytest.raises(ValueError, match="cannot decode Budget"):
        from_jsonable(Budget, bad)


def test_snapshot_helpers_read_as_before() -> None:
    inst = Instance("i-1", "p4d.24xlarge", "us-east-1", "us-east-1a", Market.SPOT, InstanceState.RUNNING, 0.0, 32.8,
                    tags=(("Owner", "ana"),))
    assert inst.tag("Owner") == "ana" and inst.tag("Project") is None
    snap = FleetSnapshot(1.0, instances=(inst,))
    assert snap.source(model.SourceKind.GPUS) is None and not snap.demo
    record = AuditRecord(1, "2026-12-01T00:00:00+00:00", "ana", "admin", "stop", "i-1", '{"a": "b"}', "ok", "", "h")
    assert record.as_dict()["params"] == {"a": "b"} and math.isclose(record.at, 1796083200.0)
