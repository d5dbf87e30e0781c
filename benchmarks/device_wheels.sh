#!/usr/bin/env bash
# The wheels gpuconsole needs on the GPU host and the host lacks, downloaded here into .whl/.
#
#   benchmarks/device_wheels.sh           resolve, download, keep what the host lacks, check sizes
#   benchmarks/device_wheels.sh --check   only add up .whl/ and the working tree
#
# The GPU host (an H200 machine) runs CPython 3.12 with PyTorch, nvidia-ml-py and the packages
# listed in ON_HOST below, and reaches no package index. This resolves the project's dependencies
# (pyproject.toml), pyte (the screen captures) and nvitop (the comparison) for cp312 on manylinux
# x86-64 through pip's configured index, keeps the wheels of the packages the host lacks, and of
# the few in ALSO where the project needs a release newer than the host's image may hold, and
# checks that they and the working tree fit in 64 MiB, the most that is copied to the host.
# benchmarks/device_check.sh installs them there with --no-index (and says which requirement the
# host's own packages do not meet).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEST=$ROOT/.whl
LIMIT_MIB=64
PY=${DEVICE_WHEELS_PYTHON:-$ROOT/.venv/bin/python}
[ -x "$PY" ] || PY=python3
CHECK_ONLY=0
for arg in "$@"; do
  case $arg in
    --check) CHECK_ONLY=1 ;;
    -h|--help) sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "device_wheels.sh: unknown argument: $arg (try --help)" >&2; exit 2 ;;
  esac
done

# The GPU host's Python packages, as listed for its image.
ON_HOST="absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build
certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core
cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock
flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx
huggingface-hub humanize hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin
jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities linear-operator lineax
llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack
multidict multipledispatch mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpy numpyro
nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft
nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py
nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript
opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec
patsy peft pillow pip pluggy portalocker prometheus-client propcache protobuf psutil pyarrow pybind11
py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock
pytest-timeout pytest-xdist python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu
safetensors scikit-build-core scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers
setuptools shellingham simplejson six sortedcontainers statsmodels sympy tabulate tensorboard
tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm tokenizers toolz torch torchaudio
torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers treescope triton typer
typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp"
# On the host, but the project needs a recent release (textual: rich>=14.2, markdown-it-py[linkify],
# pygments>=2.19.2; sqlite-utils: click>=8.3.1): small, and taken along so an older image cannot stop the run.
ALSO="rich markdown-it-py mdurl pygments click"
EXTRA=(pyte nvitop)  # the screen captures; the comparison

if (( ! CHECK_ONLY )); then
  mapfile -t REQS < <("$PY" -c 'import sys, tomllib; print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]))' \
    "$ROOT/pyproject.toml")
  STAGE=$(mktemp -d "${TMPDIR:-/tmp}/gpuconsole-wheels.XXXXXX")
  trap 'rm -rf "$STAGE"' EXIT
  echo "resolving ${#REQS[@]} dependencies of gpuconsole and ${EXTRA[*]} for CPython 3.12, manylinux x86-64"
  "$PY" -m pip download -q --disable-pip-version-check --only-binary=:all: --python-version 3.12 \
    --implementation cp --abi cp312 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
    -d "$STAGE" "${REQS[@]}" "${EXTRA[@]}" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
  mkdir -p "$DEST"
  rm -f "$DEST"/*.whl  # one version of each: two would stop the whole install there
  kept=0 left=0
  for wheel in "$STAGE"/*.whl; do
    name=$(basename "$wheel" | cut -d- -f1 | tr 'A-Z_.' 'a-z--')
    if [[ " ${ON_HOST//$'\n'/ } " == *" $name "* && " $ALSO " != *" $name "* ]]; then
      left=$(( left + 1 ))
    else
      mv "$wheel" "$DEST/"; kept=$(( kept + 1 ))
    fi
  done
  echo "kept $kept wheels in .whl/ (the host lacks them, or they are in ALSO); left out $left the host has"
fi

wheels=$( { find "$DEST" -maxdepth 1 -type f -name '*.whl' -printf '%s\n' 2>/dev/null || true; } \
  | awk '{s += $1} END {print s + 0}')  # no .whl/ yet: no wheels
tree=$(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard \
  | { xargs -0 -r stat -c '%s' -- 2>/dev/null || true; } | awk '{s += $1} END {print s + 0}')
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
if [ -d "$DEST" ]; then
  find "$DEST" -maxdepth 1 -type f -name '*.whl' -printf '%s %f\n' | sort -rn \
    | awk '{printf "  %8.1f KiB  %s\n", $1 / 1024, $2}'
fi
total=$(( wheels + tree ))
echo "wheels $(mib "$wheels") + working tree $(mib "$tree") = $(mib "$total") of the ${LIMIT_MIB} MiB copied to the GPU host"
if (( total > LIMIT_MIB * 1048576 )); then
  echo "over the limit: keep fewer wheels, or ignore large untracked files" >&2
  exit 1
fi
