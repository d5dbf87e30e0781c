"""``gpuconsole cost compare`` as a user meets it: the preset, their own numbers, bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpuconsole.cli.main import main

# The pencil-and-paper case of tests/test_calculator.py, as flags.
OWN_FLAGS = [
    "--gpu-hours", "100", "--gpu-hour-price", "2", "--cloud-gpus", "4", "--cloud-extras-usd", "10",
    "--spot-discount", "50", "--interruptions-per-day", "6", "--lost-hours", "1", "--restart-minutes", "30",
    "--own-gpus", "2", "--own-hardware-usd", "43,800", "--own-amortize-years", "1", "--own-utilisation", "50%",
    "--own-power-kw", "1", "--kwh-usd", "0.2",
]


def cost(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["cost", "compare", *args])
    out, err = capsys.readouterr()
    return code, out, err


def cost_json(capsys, *args: str) -> dict:
    code, out, err = cost(capsys, *args, "--json")
    assert (code, err) == (0, "")
    return json.loads(out)


def options(document: dict) -> dict[str, tuple[float, float, float]]:
    return {o["key"]: (o["cost"], o["hours"], o["index"]) for o in document["options"]}


def test_preset_text_shows_the_guide_table_and_the_formula(capsys):
    code, out, err = cost(capsys, "--preset", "resnet50")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith("preset: ResNet-50 (deployment guide)")
    assert "576 GPU-hours" in out
    assert "8 GPUs × speed 1.5 at $0.78125/GPU-hour" in out
    assert "80% off = $0.15625/GPU-hour" in out
    assert "$160,600.00 over 60 months at 25% utilisation" in out and "8 kW at $0.25/kWh" in out
    rows = {line.split("  ")[0]: line.split() for line in lines if line.startswith(("Own server", "Cloud "))}
    assert rows["Own server"][2:6] == ["$1,200.00", "72.0", "h", "1.00"]
    assert rows["Cloud on-demand"][2:6] == ["$350.00", "48.0", "h", "5.14"]
    assert rows["Cloud spot"][2:6] == ["$120.00", "60.0", "h", "12.00"]
    assert "index = (own cost × own time) / (cost × time)" in out
    assert "work per dollar × speed" in out
    assert "4.0 interruptions expected" in out
    assert lines[-2] == "the guide's table: own $1,200 / 72 h, on-demand $350 / 48 h, spot $120 / 60 h"
    assert lines[-1] == "  reproduced exactly by these inputs"
    assert max(len(line) for line in lines) <= 80


def test_preset_json(capsys):
    doc = cost_json(capsys, "--preset", "resnet50")
    assert doc["schema"] == "gpuconsole.cost-compare/1"
    assert doc["preset"] == "resnet50"
    assert options(doc) == {"own": (1200.0, 72.0, 1.0), "on-demand": (350.0, 48.0, 5.142857), "spot": (120.0, 60.0, 12.0)}
    assert doc["reproduces_published"] is True
    assert doc["published"][0] == {"key": "own", "cost": 1200.0, "hours": 72.0}
    assert doc["index_formula"] == "index = (own cost × own time) / (cost × time)"
    inputs = doc["inputs"]
    assert (inputs["gpu_hours"], inputs["cloud_speed"], inputs["gpu_hour_price"], inputs["spot_price"]) == (576.0, 1.5, 0.78125, 0.15625)
    assert (inputs["own_hardware_usd"], inputs["own_amortize_months"], inputs["own_utilisation_pct"]) == (160600.0, 60.0, 25.0)
    spot = next(o for o in doc["options"] if o["key"] == "spot")
    assert (spot["interruptions"], spot["billed_hours"], spot["extras"]) == (4.0, 56.0, 50.0)


def test_a_flag_overrides_the_preset(capsys):
    doc = cost_json(capsys, "--preset", "resnet50", "--spot-discount", "60")
    # spot: 56 h billed × 8 GPUs × $0.78125 × 40% = $140, + $50.
    assert options(doc)["spot"][:2] == (190.0, 60.0)
    assert options(doc)["on-demand"][:2] == (350.0, 48.0)
    assert doc["reproduces_published"] is False
    code, out, _ = cost(capsys, "--preset", "resnet50", "--spot-discount", "60")
    assert code == 0 and out.splitlines()[-1] == "  not reproduced with these inputs"


def test_own_numbers(capsys):
    code, out, _ = cost(capsys, *OWN_FLAGS)
    assert code == 0 and "Cloud spot" in out and "the guide's table" not in out
    assert max(len(line) for line in out.splitlines()) <= 80
    doc = cost_json(capsys, *OWN_FLAGS)
    assert doc["preset"] is None and doc["published"] is None
    got = options(doc)
    assert got["own"] == (510.0, 50.0, 1.0)
    assert got["on-demand"] == (210.0, 25.0, round(510 * 50 / (210 * 25), 6))
    assert got["spot"] == (135.0, 34.375, round(510 * 50 / (135 * 34.375), 6))
    # The same work as GPUs × hours, and the same period in months.
    flags = list(OWN_FLAGS)
    i = flags.index("--gpu-hours")
    flags[i:i + 2] = ["--gpus", "4", "--hours", "25"]
    j = flags.index("--own-amortize-years")
    flags[j:j + 2] = ["--own-amortize-months", "12m"]
    assert options(cost_json(capsys, *flags)) == got


def test_catalog_price_for_an_instance_type_and_region(capsys):
    doc = cost_json(capsys, "--gpus", "8", "--hours", "100", "--instance-type", "p4d.24xlarge",
                    "--region", "eu-west-1", "--instances", "2", "--own-hardware-usd", "150000", "--own-power-kw", "6.5")
    inputs = doc["inputs"]
    assert inputs["gpu_hour_price"] == 35.9186 / 8
    assert inputs["cloud_gpus"] == 16
    assert inputs["own_gpus"] == 16  # defaults to the cloud's GPUs
    assert inputs["cloud_label"] == "p4d.24xlarge in eu-west-1"
    on_demand = next(o for o in doc["options"] if o["key"] == "on-demand")
    assert on_demand["hours"] == 50.0
    assert on_demand["cost"] == round(35.9186 * 2 * 50, 6)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--preset", "nope"], "argument --preset: invalid choice"),
        (["--preset", "resnet50", "--own-utilisation", "0"], "argument --own-utilisation: must be more than 0 and at most 100, got 0"),
        (["--preset", "resnet50", "--own-utilisation", "lots"], "argument --own-utilisation: expected a number, got 'lots'"),
        (["--preset", "resnet50", "--spot-discount", "100"], "argument --spot-discount: must be from 0 to less than 100"),
        (["--preset", "resnet50", "--cloud-gpus", "0"], "argument --cloud-gpus: must be 1 or more, got 0"),
        (["--preset", "resnet50", "--gpu-hours", "-3"], "argument --gpu-hours: must be more than 0, got -3"),
        (["--preset", "resnet50", "--gpu-hours", "inf"], "argument --gpu-hours: must be a finite number"),
        (["--preset", "resnet50", "--lost-hours", "-1"], "argument --lost-hours: must be 0 or more, got -1"),
        (["--preset", "resnet50", "--own-amortize-months", "3q"], "argument --own-amortize-months: expected months"),
        (["--preset", "resnet50", "--instance-type", "p9.huge"], "argument --instance-type: unknown instance type 'p9.huge'"),
        (["--preset", "resnet50", "--instance-type", "p5e.48xlarge"], "no price for p5e.48xlarge in us-east-1"),
        (["--preset", "resnet50", "--gpus", "8"], "--gpus and --hours go together"),
        (["--preset", "resnet50", "--gpus", "2", "--hours", "-1"], "argument --hours: must be more than 0, got -1"),
        (["--preset", "resnet50", "--gpus", "0", "--hours", "5"], "argument --gpus: must be 1 or more, got 0"),
        (["--preset", "resnet50", "--gpu-hours", "5", "--gpus", "1", "--hours", "5"], "not both"),
        (["--preset", "resnet50", "--spot-discount", "50", "--spot-price", "0.1"], "--spot-discount or --spot-price, not both"),
        (["--preset", "resnet50", "--region", "us-east-1"], "--region and --instances need --instance-type"),
        (["--preset", "resnet50", "--gpu-hour-price", "1", "--instance-type", "p4d.24xlarge"], "not both"),
        (["--gpu-hours", "10"], "without --preset, give --instance-type (or --gpu-hour-price), --own-hardware-usd, --own-power-kw"),
        ([], "without --preset, give --gpu-hours (or --gpus and --hours)"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, args, needle):
    code, out, err = cost(capsys, *args)
    assert code == 2
    assert out == ""
    assert err.startswith("gpuconsole: error: ")
    assert err.count("\n") == 1, err
    assert needle in err


def test_cost_needs_a_subcommand(capsys):
    code = main(["cost"])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "COMMAND" in err


@pytest.mark.slow
def test_from_a_shell():
    """``python -m gpuconsole cost compare`` in a child process: exit status and streams."""
    ok = subprocess.run([sys.executable, "-m", "gpuconsole", "cost", "compare", "--preset", "resnet50", "--json"],
                        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert (ok.returncode, ok.stderr) == (0, "")
    assert options(json.loads(ok.stdout))["spot"][:2] == (120.0, 60.0)
    bad = subprocess.run([sys.executable, "-m", "gpuconsole", "cost", "compare", "--preset", "resnet50", "--kwh-usd", "-1"],
                         capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert (bad.returncode, bad.stdout) == (2, "")
    assert bad.stderr.splitlines() == ["gpuconsole: error: argument --kwh-usd: must be 0 or more, got -1 (see gpuconsole cost compare --help)"]
