#!/usr/bin/env bash
# gpuconsole on a GPU host, checked against nvidia-smi and nvitop in one unattended run.
#
#   benchmarks/device_check.sh            on the GPU host (wheels in .whl/: benchmarks/device_wheels.sh)
#   benchmarks/device_check.sh --dry-run  here: every step against the fake NVML layer of the tests
#
# Sections, in order: setup · nvidia-smi -q -x (trimmed) · gpuconsole gpus --once --json --gpus nvml ·
# field by field · a CUDA load under its GPU, then process kill · pytest tests/device ·
# NVML poll, gpuconsole and nvitop · the console at 80x24 and 160x48 · MIG mode (read only) · summary.
#
# On the host: the machine's python3 (PyTorch and nvidia-ml-py already there) gets the wheels of
# .whl/ with --no-index into a folder of its own; nothing is fetched. Every step has a time limit
# and the whole run stops starting steps after DEVICE_CHECK_BUDGET_S (default 480 s); the load
# and any process the run started are ended before it exits. MIG mode is read, never changed.
# Output: stdout, and under $OUT (a new temporary folder when unset): device_check.log,
# nvidia-smi.xml, gpus.json, nvml_poll.txt, screen-80x24.txt, screen-160x48.txt.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DRY=0
for arg in "$@"; do
  case $arg in
    --dry-run) DRY=1 ;;
    -h|--help) sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "device_check.sh: unknown argument: $arg (try --help)" >&2; exit 2 ;;
  esac
done
OUT=${OUT:-$(mktemp -d /tmp/gpuconsole-device-out.XXXXXX)}
mkdir -p "$OUT"
BUDGET_S=${DEVICE_CHECK_BUDGET_S:-480}
START=$(date +%s)
WORK=$(mktemp -d /tmp/gpuconsole-device.XXXXXX)
MARKER="gpuconsole-device-check-load-$$"
STARTED=()          # pids of what this run started, ended on exit
SECTIONS=()         # "name|status|seconds"
SECTION="" SECTION_T0=0 SECTION_STATUS=""
PY=python3 GC=(python3 -m gpuconsole)
# Not "-m benchmarks.device_fake": in the dry run sitecustomize has imported it already.
fake() { "$PY" -c 'import sys; from benchmarks.device_fake import main; sys.exit(main(sys.argv[1:]))' "$@"; }

cleanup() {
  local pid
  for pid in "${STARTED[@]}"; do
    if running "$pid"; then
      kill -TERM "$pid" 2>/dev/null; sleep 1; kill -KILL "$pid" 2>/dev/null
    fi
    wait "$pid" 2>/dev/null
  done
  [ "${DEVICE_CHECK_KEEP:-0}" = 1 ] || rm -rf "$WORK"
}

# running PID: it exists and has not exited (a child that exited stays a zombie until waited for).
running() { [ -r "/proc/$1/stat" ] && [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" != Z ]; }
left() { echo $(( BUDGET_S - ($(date +%s) - START) )); }
# limit N: N seconds, or what the budget has left (minus a margin for the summary), at least 1.
limit() { local l; l=$(( $(left) - 15 )); (( l < $1 )) && echo $(( l > 1 ? l : 1 )) || echo "$1"; }
run() { local n=$1; shift; timeout -k 5 "$(limit "$n")" "$@"; }

begin() {
  SECTION=$1 SECTION_T0=$(date +%s) SECTION_STATUS=ok
  printf '\n==== %s ====\n' "$1"
}
status() { SECTION_STATUS=$1; }
end() {
  SECTIONS+=("$SECTION|$SECTION_STATUS|$(( $(date +%s) - SECTION_T0 ))")
  printf -- '---- %s: %s (%d s)\n' "$SECTION" "$SECTION_STATUS" "$(( $(date +%s) - SECTION_T0 ))"
}
# A step that would start with under 20 s of the budget left is skipped, and says so.
room() { (( $(left) >= 20 )) || { echo "skipped: the ${BUDGET_S} s budget is spent"; status skipped; return 1; }; }
rc_word() { case $1 in 0) echo ok ;; 124|137) echo "timed out" ;; *) echo "FAIL (exit $1)" ;; esac; }

setup() {
  begin "setup"
  export GPUCONSOLE_DB=$WORK/cache/gpuconsole.db XDG_CACHE_HOME=$WORK/xdg-cache XDG_CONFIG_HOME=$WORK/xdg-config
  export XDG_STATE_HOME=$WORK/xdg-state XDG_DATA_HOME=$WORK/xdg-data KUBECONFIG=$WORK/no-kubeconfig
  export AWS_CONFIG_FILE=$WORK/no-aws-config AWS_SHARED_CREDENTIALS_FILE=$WORK/no-aws-credentials
  export AWS_EC2_METADATA_DISABLED=true PYTHONUNBUFFERED=1
  export GPUCONSOLE_DEVICE_CHECK_RUN=$MARKER  # what every process of the run inherits: see summary
  unset GPUCONSOLE_USERS GPUCONSOLE_MFA GPUCONSOLE_AUDIT_DB GPUCONSOLE_MFA_CODE GPUCONSOLE_DEMO_DIR \
    GPUCONSOLE_FULL_REPAINT AWS_PROFILE AWS_DEFAULT_PROFILE AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY \
    KUBERNETES_SERVICE_HOST NO_COLOR
  echo "run $$ on $(uname -n) at $(date -u '+%Y-%m-%d %H:%M:%S UTC'), kernel $(uname -r), budget ${BUDGET_S} s"
  echo "results under $OUT"
  if (( DRY )); then
    PY=${DEVICE_PYTHON:-$ROOT/.venv/bin/python}
    [ -x "$PY" ] || PY=python3
    "$PY" -m benchmarks.device_fake shim "$WORK/shim" || { status "FAIL (shim)"; end; return 1; }
    export GPUCONSOLE_FAKE_NVML_HOST=$WORK/host.json PYTHONPATH="$WORK/shim:$ROOT" PATH="$WORK/shim/bin:$PATH"
    fake host "$GPUCONSOLE_FAKE_NVML_HOST"
    echo "dry run: $("$PY" --version) at $PY; every Python started here installs the fake NVML layer"
    echo "(tests/fake_nvml.py: an H200, an A100 in MIG mode, a T4), and nvidia-smi answers from the same GPUs"
    "$PY" -m benchmarks.device_probe requirements --pyproject "$ROOT/pyproject.toml" || status "requirements not met"
  else
    PY=${DEVICE_PYTHON:-python3}
    SITE=$WORK/site
    local wheels=("$ROOT"/.whl/*.whl)
    if [ ! -e "${wheels[0]}" ]; then
      echo "no wheels in $ROOT/.whl: run benchmarks/device_wheels.sh where pip reaches the package index, and copy .whl along"
      status "FAIL (no wheels)"; end; return 1
    fi
    echo "$("$PY" --version) at $(command -v "$PY"); installing ${#wheels[@]} wheels with --no-index into $SITE"
    if ! run 180 "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$SITE" "${wheels[@]}"; then
      status "FAIL (pip install)"; end; return 1
    fi
    export PYTHONPATH="$SITE:$ROOT"
    run 60 "$PY" -m benchmarks.device_probe requirements --site "$SITE" --pyproject "$ROOT/pyproject.toml" \
      || status "requirements not met"
    command -v nvidia-smi >/dev/null || echo "no nvidia-smi on PATH"
  fi
  GC=("$PY" -m gpuconsole)
  end
}

readings() {
  begin "nvidia-smi -q -x (trimmed)"
  if room; then
    run 60 nvidia-smi -q -x >"$OUT/nvidia-smi.xml" 2>"$WORK/smi.err"; local rc=$?
    cat "$WORK/smi.err"
    if (( rc == 0 )); then
      "$PY" -m benchmarks.device_compare trim "$OUT/nvidia-smi.xml" || status "FAIL (trim)"
    else
      status "$(rc_word $rc)"
    fi
  fi
  end
  begin "gpuconsole gpus --once --json --gpus nvml"
  if room; then
    run 90 "${GC[@]}" gpus --once --json --gpus nvml --wait 30 >"$OUT/gpus.json"; local rc=$?
    cat "$OUT/gpus.json"
    status "$(rc_word $rc)"
    run 60 nvidia-smi -q -x >"$WORK/smi-after.xml" 2>/dev/null  # the second reading brackets gpuconsole's
  fi
  end
}

table() {
  begin "field by field: gpuconsole and nvidia-smi"
  if room && [ -s "$OUT/gpus.json" ] && [ -s "$OUT/nvidia-smi.xml" ]; then
    echo "nvidia-smi read just before and just after gpuconsole; moving figures match within a tolerance"
    echo "(memory used 16 MiB, utilization 10 points, temperature 2 C, power 10 W or 10 %, SM clock 50 MHz or 10 %)"
    run 30 "$PY" -m benchmarks.device_compare compare --json "$OUT/gpus.json" --smi "$OUT/nvidia-smi.xml" \
      --smi "$WORK/smi-after.xml"
    case $? in 0) ;; 1) status "differs" ;; *) status "FAIL" ;; esac
  elif [ "$SECTION_STATUS" = ok ]; then
    echo "no reading to compare"; status "FAIL (no reading)"
  fi
  end
}

# The load: the machine's own PyTorch, without our PYTHONPATH, holding 3 GiB and multiplying
# matrices; it ends by itself after 150 s if nothing else ends it.
LOAD_PY='import sys, time, torch
x = torch.empty(3 << 30, dtype=torch.uint8, device="cuda")
a = torch.randn(4096, 4096, device="cuda")
print("ready on", torch.cuda.get_device_name(0), flush=True)
end = time.time() + 150
while time.time() < end:
    for _ in range(10):
        a = torch.tanh(a @ a)
    torch.cuda.synchronize()
    time.sleep(0.02)'

load() {
  begin "a CUDA load under its GPU, then gpuconsole process kill"
  room || { end; return; }
  local pid
  if (( DRY )); then
    "$PY" -c 'import time; time.sleep(150)' "$MARKER" & pid=$!
    STARTED+=("$pid")
    fake host "$GPUCONSOLE_FAKE_NVML_HOST" --standin "$pid:3074"
    echo "stand-in pid $pid (dry run: no PyTorch; registered with the fake NVML as a 3074 MiB process of GPU 0)"
  else
    env -u PYTHONPATH python3 -c "$LOAD_PY" "$MARKER" >"$WORK/load.log" 2>&1 & pid=$!
    STARTED+=("$pid")
    local waited=0
    until grep -q '^ready' "$WORK/load.log" 2>/dev/null || ! kill -0 "$pid" 2>/dev/null || (( waited >= 120 )); do
      sleep 1; waited=$(( waited + 1 ))
    done
    cat "$WORK/load.log"
    if ! grep -q '^ready' "$WORK/load.log"; then
      echo "the load did not start within ${waited} s"; status "FAIL (no load)"; end; return
    fi
    echo "load pid $pid, ready after ${waited} s"
  fi
  local how=absent try
  for try in 1 2 3; do  # NVML may list a new context a moment late
    run 60 "${GC[@]}" gpus --once --json --gpus nvml --wait 30 >"$WORK/load.json"
    "$PY" -m benchmarks.device_compare find-load --json "$WORK/load.json" --pid "$pid" --marker "$MARKER" \
      --pid-file "$WORK/kill.pid" >"$WORK/found.txt"
    case $? in 0) how=visible ;; 3) how=hidden ;; *) how=absent ;; esac
    [ "$how" = absent ] && (( try < 3 )) && { sleep 2; continue; }
    break
  done
  cat "$WORK/found.txt"
  local target; target=$(cat "$WORK/kill.pid" 2>/dev/null)
  if [ -n "$target" ]; then
    echo "\$ gpuconsole process kill $target --signal TERM --yes --gpus nvml"
    run 60 "${GC[@]}" process kill "$target" --signal TERM --yes --gpus nvml --wait 30; local rc=$?
    echo "(exit $rc)"
  else
    echo "NVML lists no process for the load: nothing to ask gpuconsole to signal"
  fi
  local waited=0
  while running "$pid" && (( waited < 15 )); do
    sleep 1; waited=$(( waited + 1 ))
  done
  if running "$pid"; then
    echo "the load (pid $pid) still runs ${waited} s later: ended by this script (SIGTERM, then SIGKILL)"
    kill -TERM "$pid" 2>/dev/null; sleep 2; kill -KILL "$pid" 2>/dev/null
    status "$how; ended by the script, not gpuconsole"
  else
    status "$how; ended by gpuconsole"
  fi
  wait "$pid" 2>/dev/null; echo "the load (pid $pid) has ended: exit status $?"
  (( DRY )) && fake host "$GPUCONSOLE_FAKE_NVML_HOST"  # its memory freed, as the driver frees a dead context's
  [ "$how" = visible ] || echo "under this sandbox NVML reports the load as shown above"
  run 60 "${GC[@]}" gpus --once --json --gpus nvml --wait 30 >"$WORK/after.json"
  "$PY" -m benchmarks.device_compare gpu-lines --json "$WORK/after.json" | sed 's/^/after: /'
  end
}

device_tests() {
  begin "pytest tests/device"
  if room; then
    run 180 "$PY" -m pytest -q -rs -p no:cacheprovider tests/device | tee "$WORK/pytest.txt"; local rc=${PIPESTATUS[0]}
    case $rc in
      0) grep -q ' passed' "$WORK/pytest.txt" || status "skipped" ;;
      5) status "no tests ran" ;;
      *) status "$(rc_word $rc)" ;;
    esac
  fi
  end
}

poll() {
  begin "NVML poll: gpuconsole and nvitop"
  if room; then
    local runs=300 real=200
    (( DRY )) && runs=30 real=20
    (( DRY )) && echo "(dry run: the 'real NVML' rows below are the fake layer too)"
    run 150 "$PY" benchmarks/nvml_poll.py --runs "$runs" --real-runs "$real" | tee "$OUT/nvml_poll.txt"
    local rc=${PIPESTATUS[0]}
    (( rc == 0 )) || status "$(rc_word $rc)"
    echo
    run 120 "$PY" -m benchmarks.device_probe poll --runs "$real" | tee -a "$OUT/nvml_poll.txt"
    rc=${PIPESTATUS[0]}
    (( rc == 0 )) || status "$(rc_word $rc)"
  fi
  end
}

screens() {
  begin "the console at 80x24 and 160x48 (--gpus nvml)"
  local size rows cols
  for size in 80x24 160x48; do
    room || break
    cols=${size%x*} rows=${size#*x}
    run 60 "$PY" -m benchmarks.device_screen --rows "$rows" --cols "$cols" --out "$OUT/screen-$size.txt" \
      --key 2 --settle 4 -- "${GC[@]}" --gpus nvml --no-db || status "FAIL ($size)"
  done
  end
}

mig() {
  begin "MIG mode (read only)"
  if room; then
    echo "\$ nvidia-smi mig -lgip"
    run 30 nvidia-smi mig -lgip 2>&1 | head -40
    run 60 "$PY" -m benchmarks.device_probe mig --json "$OUT/gpus.json" --smi "$OUT/nvidia-smi.xml" \
      || status "FAIL"
  fi
  end
}

summary() {
  begin "summary"
  local pid row name st secs alive=0 failed=0
  for pid in "${STARTED[@]}"; do
    if running "$pid"; then
      echo "pid $pid still runs"; alive=1
    fi
  done
  "$PY" -m benchmarks.device_probe leftovers --marker "$MARKER" || alive=1
  for row in "${SECTIONS[@]}"; do
    IFS='|' read -r name st secs <<<"$row"
    printf '  %-56s %-40s %4s s\n' "$name" "$st" "$secs"
    case $st in FAIL*|"timed out"*) failed=1 ;; esac
  done
  echo "total $(( $(date +%s) - START )) s of the ${BUDGET_S} s budget; files in $OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
  (( alive )) && status "FAIL (left running)"
  end
  (( failed || alive )) && return 1
  return 0
}

main() {
  trap cleanup EXIT
  trap 'exit 130' INT TERM
  cd "$ROOT" || exit 1
  setup || { summary; return 1; }
  readings
  table
  load
  device_tests
  poll
  screens
  mig
  summary
}

main 2>&1 | tee "$OUT/device_check.log"
exit "${PIPESTATUS[0]}"
