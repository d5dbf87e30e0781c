"""The GPU host's check (benchmarks/device_check.sh) runs here first: ``--dry-run`` takes every
step against the fake NVML layer, and the comparison's verdicts are the ones a person would give.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from benchmarks.device_compare import (
    FIELDS,
    MATCH,
    NA_HERE,
    compare,
    find_load,
    parse_smi,
    same_word,
    trim,
    verdict,
)
from benchmarks.device_probe import interleaved, spread, unmet
from benchmarks.device_screen import screen_text

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = (
    "setup",
    "nvidia-smi -q -x (trimmed)",
    "gpuconsole gpus --once --json --gpus nvml",
    "field by field: gpuconsole and nvidia-smi",
    "a CUDA load under its GPU, then gpuconsole process kill",
    "pytest tests/device",
    "NVML poll: gpuconsole and nvitop",
    "the console at 80x24 and 160x48 (--gpus nvml)",
    "MIG mode (read only)",
    "summary",
)
FIELD = {f.label: f for f in FIELDS}


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path, float]:
    out = tmp_path_factory.mktemp("device-out")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCONSOLE_")}
    t0 = time.monotonic()
    done = subprocess.run(["bash", str(ROOT / "benchmarks" / "device_check.sh"), "--dry-run"], cwd=ROOT,
                          env={**env, "OUT": str(out)}, capture_output=True, text=True, timeout=300, check=False)
    return done, out, time.monotonic() - t0


def section(text: str, name: str) -> str:
    start = text.index(f"==== {name} ====")
    end = text.find("\n==== ", start + 1)
    return text[start:end if end >= 0 else None]


@pytest.mark.slow
def test_the_dry_run_prints_every_section_in_order_and_passes(dry_run) -> None:
    done, out, seconds = dry_run
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    places = [done.stdout.index(f"==== {name} ====") for name in SECTIONS]
    assert places == sorted(places)
    assert "FAIL" not in section(done.stdout, "summary")
    assert (out / "device_check.log").read_text() == done.stdout
    assert {"nvidia-smi.xml", "gpus.json", "nvml_poll.txt"} <= {p.name for p in out.iterdir()}
    assert len(list(out.iterdir())) <= 8  # what comes back from the device machine
    assert seconds < 180


@pytest.mark.slow
def test_the_table_says_match_for_every_field_of_the_fake_gpus(dry_run) -> None:
    table = section(dry_run[0].stdout, "field by field: gpuconsole and nvidia-smi")
    h200 = table[table.index("GPU 0  NVIDIA H200"):table.index("GPU 1 ")]
    for field in FIELDS:
        assert re.search(rf"^  {re.escape(field.label)} +match  \(", h200, re.M), (field.label, h200)
    assert re.search(r"^  processes +match  \(pid 90000007 512 MiB\)", h200, re.M)
    t4 = table[table.index("GPU 2  Tesla T4"):]
    for label in ("power draw", "MIG mode, current", "MIG mode, pending"):
        assert re.search(rf"^  {re.escape(label)} +N/A on this board$", t4, re.M)
    assert re.search(r"^  MIG 1/0 memory total +match  \(40192 MiB\)", table, re.M)
    assert " 0 differ " in table


@pytest.mark.slow
def test_the_stand_in_is_shown_under_its_gpu_then_ended_by_gpuconsole(dry_run) -> None:
    text = section(dry_run[0].stdout, "a CUDA load under its GPU, then gpuconsole process kill")
    pid = int(re.search(r"stand-in pid (\d+)", text).group(1))
    assert re.search(rf"^GPU 0 NVIDIA H200 .*\n  pid {pid}  3074 MiB  user \S+  .*time\.sleep\(150\) "
                     r"gpuconsole-device-check-load-\d+$", text, re.M)
    assert f"sent SIGTERM to pid {pid}" in text
    assert "has ended: exit status 143" in text
    assert re.search(r"^after: GPU 0 .*: 512 of 143771 MiB used, utilization 0%, 1 processes$", text, re.M)
    assert not psutil.pid_exists(pid)
    marker = re.search(r"gpuconsole-device-check-load-\d+", text).group(0)
    assert not [p for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or ())]
    assert "nothing of this run is left running" in section(dry_run[0].stdout, "summary")


@pytest.mark.slow
def test_the_other_sections_ran_against_the_fake_layer(dry_run) -> None:
    text = dry_run[0].stdout
    assert '"state": "live"' in section(text, "gpuconsole gpus --once --json --gpus nvml")
    assert "<uuid>GPU-dry0h200" in section(text, "nvidia-smi -q -x (trimmed)")
    assert "1 passed" in section(text, "pytest tests/device")
    poll = section(text, "NVML poll: gpuconsole and nvitop")
    assert "fake NVML: 8 whole GPUs" in poll and re.search(r"gpuconsole NvmlSource\.poll_gpus +median", poll)
    mig = section(text, "MIG mode (read only)")
    assert "current enabled, pending enabled" in mig and "NotSupported" in mig and "changed nothing" in mig


@pytest.mark.slow
def test_the_console_is_captured_at_80x24_and_160x48(dry_run) -> None:
    out = dry_run[1]
    for cols, rows in ((80, 24), (160, 48)):
        lines = (out / f"screen-{cols}x{rows}.txt").read_text().splitlines()
        assert len(lines) == rows and max(len(line) for line in lines) <= cols
        assert "GPU telemetry: nvml · live" in "\n".join(lines) and "H200" in "\n".join(lines)


# --------------------------------------------------------------------------- the comparison

XML_535 = """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log><driver_version>535.104.05</driver_version><cuda_version>12.2</cuda_version>
<gpu id="00000000:00:1E.0"><product_name>Tesla V100-SXM2-16GB</product_name><uuid>GPU-v100</uuid>
<persistence_mode>Disabled</persistence_mode><fan_speed>N/A</fan_speed>
<mig_mode><current_mig>N/A</current_mig><pending_mig>N/A</pending_mig></mig_mode>
<gpu_virtualization_mode><virtualization_mode>Pass-Through</virtualization_mode></gpu_virtualization_mode>
<pci><pci_bus_id>00000000:00:1E.0</pci_bus_id></pci>
<fb_memory_usage><total>16384 MiB</total><reserved>308 MiB</reserved><used>1200 MiB</used></fb_memory_usage>
<compute_mode>Exclusive_Process</compute_mode>
<utilization><gpu_util>40 %</gpu_util><memory_util>[N/A]</memory_util></utilization>
<temperature><gpu_temp>44 C</gpu_temp></temperature>
<power_readings><power_draw>120.50 W</power_draw><power_limit>300.00 W</power_limit>
<enforced_power_limit>250.00 W</enforced_power_limit></power_readings>
<clocks><sm_clock>1380 MHz</sm_clock><mem_clock>877 MHz</mem_clock></clocks>
<processes><process_info><pid>4242</pid><type>C</type><process_name>python</process_name>
<used_memory>1100 MiB</used_memory></process_info></processes></gpu></nvidia_smi_log>
"""


def gpuconsole_gpu(**changes: object) -> dict[str, object]:
    gpu = {"uuid": "GPU-v100", "index": 0, "name": "Tesla V100-SXM2-16GB", "pci_bus_id": "0000:00:1e.0",
           "memory_total_mib": 16384, "memory_used_mib": 1200, "utilization": 41.0, "memory_utilization": None,
           "temperature_c": 44, "power_w": 121.0, "power_limit_w": 250.0, "sm_clock_mhz": 1380,
           "memory_clock_mhz": 877, "persistence_mode": False, "compute_mode": "exclusive_process",
           "mig_mode": "n/a", "mig_pending": None, "virtualization": "passthrough", "not_reported": [],
           "processes": [{"pid": 4242, "memory_used_mib": 1100, "user": "ml", "command": "python train.py"}],
           "mig_slices": []}
    return {**gpu, **changes}


def test_an_older_drivers_xml_is_read_in_gpuconsoles_units() -> None:
    smi = parse_smi(XML_535)
    assert smi["driver"] == "535.104.05" and smi["cuda"] == "12.2"
    gpu = smi["gpus"][0]
    assert gpu["power_w"] == 120.5 and gpu["power_limit_w"] == 250.0  # the enforced limit, not the board's
    assert gpu["memory_utilization"] is None and gpu["mig_mode"] is None
    assert gpu["compute_mode"] == "exclusive_process" and gpu["virtualization"] == "passthrough"
    assert gpu["persistence_mode"] is False and gpu["processes"] == {4242: 1100.0}


def test_every_field_of_a_matching_reading_says_match() -> None:
    table, counts = compare({"versions": {"driver": "535.104.05", "cuda": "12.2"}, "gpus": [gpuconsole_gpu()]},
                            [parse_smi(XML_535)])
    assert counts == {"match": 2 + len(FIELDS) + 1 - 3, "differs": 0, "N/A": 3}, table
    assert re.search(r"^  memory utilization +N/A on this board$", table, re.M)
    assert re.search(r"^  PCI bus id +match  \(0000:00:1e\.0\)$", table, re.M)  # another domain width


def test_a_field_that_differs_names_both_values() -> None:
    assert verdict(FIELD["power draw"], 75.0, [120.0, 121.5]) == "differs (gpuconsole 75 W, nvidia-smi 120–121.5 W)"
    assert verdict(FIELD["power draw"], 115.0, [120.0, 121.5]) == MATCH  # within 10 W of the readings
    assert verdict(FIELD["memory total"], 81559, [81920]) == "differs (gpuconsole 81559 MiB, nvidia-smi 81920 MiB)"
    assert verdict(FIELD["MIG mode, current"], "disabled", ["enabled"]) == \
        "differs (gpuconsole disabled, nvidia-smi enabled)"
    table, counts = compare({"versions": {}, "gpus": [gpuconsole_gpu(
        memory_used_mib=1508, processes=[{"pid": 4243, "memory_used_mib": 1100}])]}, [parse_smi(XML_535)])
    assert "memory used            differs (gpuconsole 1508 MiB, nvidia-smi 1200 MiB)" in table
    assert "processes              differs (gpuconsole pid 4243 1100 MiB, nvidia-smi pid 4242 1100 MiB)" in table
    assert counts["differs"] == 4  # memory used, processes, and the versions gpuconsole did not give


def test_a_field_neither_side_can_read_is_na_on_this_board() -> None:
    assert verdict(FIELD["utilization"], None, [None, None]) == NA_HERE
    assert verdict(FIELD["utilization"], None, [35.0]) == "differs (gpuconsole N/A, nvidia-smi 35 %)"
    assert verdict(FIELD["utilization"], 35.0, [None]) == "differs (gpuconsole 35 %, nvidia-smi N/A)"
    table, _ = compare({"versions": {}, "gpus": [gpuconsole_gpu(power_w=0.0, not_reported=["power_w"])]},
                       [parse_smi(XML_535.replace("120.50 W", "[Not Supported]"))])
    assert re.search(r"^  power draw +N/A on this board$", table, re.M)


def test_same_word_ignores_case_spacing_and_the_pci_domains_width() -> None:
    assert same_word("00000000:1B:00.0", "0000:1b:00.0") and same_word("Default ", "default")
    assert not same_word("00000000:1B:00.0", "00000000:1C:00.0")


def test_trim_keeps_only_what_is_compared() -> None:
    trimmed = trim(XML_535)
    assert "<uuid>GPU-v100</uuid>" in trimmed and "<enforced_power_limit>" in trimmed
    assert "fan_speed" not in trimmed and "<process_name>python</process_name>" in trimmed
    assert parse_smi(trimmed) == parse_smi(XML_535)


def test_a_load_the_sandbox_hides_is_shown_as_nvml_reports_it() -> None:
    doc = {"gpus": [gpuconsole_gpu(processes=[{"pid": 777001, "memory_used_mib": 3598, "name": "python3",
                                               "user": None, "command": ""}])]}
    lines, pid, how = find_load(doc, 4321, "gpuconsole-device-check-load-1")
    assert (pid, how) == (777001, "hidden")
    assert "  pid 777001  3598 MiB  user unknown  (no command line here; NVML's name: python3)" in lines
    lines, pid, how = find_load({"gpus": [gpuconsole_gpu()]}, 4242, "")
    assert (pid, how) == (4242, "visible") and lines[1] == "  pid 4242  1100 MiB  user ml  python train.py"
    assert find_load({"gpus": [gpuconsole_gpu(processes=[])]}, 4242, "")[1:] == (None, "absent")


def test_the_pollers_take_turns_and_the_screen_is_what_a_terminal_shows() -> None:
    calls: list[str] = []
    times = interleaved({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, runs=3, warmup=1)
    assert calls == ["a", "b"] * 4 and [len(t) for t in times.values()] == [3, 3]
    lines = screen_text(b"\x1b[2J\x1b[1;1Hgpuconsole\x1b[3;5H\x1b[1mGPU 0\x1b[0m", rows=4, cols=20)
    assert lines == ["gpuconsole", "", "    GPU 0", ""]


def test_spread_and_unmet_requirements() -> None:
    s = spread([float(n) for n in range(1, 12)])
    assert (s["median"], s["p10"], s["p90"], s["min"], s["max"]) == (6.0, 2.0, 10.0, 1.0, 11.0)
    versions = {"rich": "13.7.1", "click": "8.3.1"}
    assert unmet(["rich>=14.2.0", "click>=8.3.1", "colorama; platform_system == 'Windows'", "absent-thing"],
                 "textual", versions.get) == ["textual needs rich>=14.2.0: rich 13.7.1 is installed",
                                             "textual needs absent-thing: not installed"]


def test_the_wheels_check_adds_up_what_goes_to_the_gpu_host() -> None:
    done = subprocess.run(["bash", str(ROOT / "benchmarks" / "device_wheels.sh"), "--check"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert re.search(r"^wheels [\d.]+ MiB \+ working tree [\d.]+ MiB = [\d.]+ MiB of the 64 MiB copied to the GPU host$",
                     done.stdout, re.M)
