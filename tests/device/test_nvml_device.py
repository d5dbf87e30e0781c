"""On a host with an NVIDIA GPU: ``gpuconsole gpus --once --json`` agrees with ``nvidia-smi``.

Skipped where there is no ``nvidia-smi`` or it finds no GPU. Runs the installed console in a
subprocess, so it reads the real driver (the other tests never do).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

QUERY = "name,uuid,memory.total,mig.mode.current"
MIG_WORDS = {"Enabled": "enabled", "Disabled": "disabled"}


def nvidia_smi() -> list[list[str]]:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        pytest.skip("no nvidia-smi on this host")
    done = subprocess.run([exe, f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"], capture_output=True,
                          text=True, timeout=60, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        pytest.skip(f"nvidia-smi finds no GPU: {(done.stderr or done.stdout).strip()[:200]}")
    return [[field.strip() for field in line.split(",")] for line in done.stdout.strip().splitlines()]


def test_gpus_once_json_matches_nvidia_smi(tmp_path):
    expected = nvidia_smi()
    env = {**os.environ, "GPUCONSOLE_DB": str(tmp_path / "db.sqlite")}
    done = subprocess.run([sys.executable, "-m", "gpuconsole", "gpus", "--once", "--json", "--gpus", "nvml", "--wait", "30"],
                          capture_output=True, text=True, timeout=120, env=env, check=False)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["source"]["state"] == "live" and doc["versions"].get("driver")
    got = {g["uuid"]: g for g in doc["gpus"]}
    assert len(got) == len(expected)
    for name, uuid, memory_total, mig in expected:
        gpu = got[uuid]
        assert gpu["name"] == name
        assert abs(gpu["memory_total_mib"] - int(memory_total)) <= 1
        assert gpu["mig_mode"] == MIG_WORDS.get(mig, "n/a")
        print(f"{uuid}: {name}, {memory_total} MiB, MIG {mig}: matches "
              f"(util {gpu['utilization']}%, {gpu['memory_used_mib']} MiB used, {len(gpu['processes'])} processes)")
