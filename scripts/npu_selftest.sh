#!/usr/bin/env bash
# What only an Ascend NPU can show, in order, each step run and reported pass/fail (docs/npu.md):
#   1 build        scripts/build_npu.sh: bisheng (through opc) accepts every kernel for the SoC
#   2 install      scripts/install_npu.sh --install-path <work>/opp (this run's package only)
#   3 extension    the torch_npu extension builds against it and ascend_acts uses it (not the fallback)
#   4 wraparound   RReLU noise bit-identical to the reference: int32 multiply/add wrap on overflow (D12)
#   5 index 2**24  RReLU noise bit-identical at flat indices past 2**24 (CreateVecIndex's float path, D4)
#   6 index 2**31  RReLU noise bit-identical at flat indices past 2**31 (16 GiB of device memory)
#   7 eval kernel  the cube-side eval kernel finishes within the timeout and matches the CPU (D3)
#   8 npu tests    pytest -m npu (every op vs the CPU reference)
#   9 timings      our kernels vs torch_npu's built-ins (reported, never failed)
#  10 report       python -m ascend_acts selftest --device npu: the first-run report (selftest.md + selftest.json)
# A step whose prerequisite failed is reported "skip". Steps run under `timeout` (a hang is a failure).
# Usage: scripts/npu_selftest.sh [--soc ascend910b|ascend910_93] [--python PY] [--timeout SECONDS] [--list]
# Exit codes: 0 all passed; 1 a step failed; 2 bad arguments; 3 not an Ascend machine (nothing was run).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
soc="${ASCEND_COMPUTE_UNIT:-ascend910b}"
py="$root/.venv/bin/python"
limit=900
steps=("1 build" "2 install" "3 extension" "4 wraparound" "5 index 2**24" "6 index 2**31" "7 eval kernel"
       "8 npu tests" "9 timings" "10 report")
usage="usage: npu_selftest.sh [--soc ascend910b|ascend910_93] [--python PY] [--timeout SECONDS] [--list]"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --soc|--python|--timeout)
      [[ -n "${2:-}" ]] || { echo "npu_selftest.sh: $1 needs a value ($usage)" >&2; exit 2; }
      case "$1" in --soc) soc="$2" ;; --python) py="$2" ;; --timeout) limit="$2" ;; esac
      shift 2 ;;
    --list) printf '%s\n' "${steps[@]}"; exit 0 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "npu_selftest.sh: unknown argument $1 ($usage)" >&2; exit 2 ;;
  esac
done
[[ "$soc" == ascend910b || "$soc" == ascend910_93 ]] \
  || { echo "npu_selftest.sh: --soc $soc is not supported: ascend910b or ascend910_93" >&2; exit 2; }
[[ "$limit" =~ ^[1-9][0-9]*$ ]] || { echo "npu_selftest.sh: --timeout takes seconds, got $limit" >&2; exit 2; }
[[ -x "$py" ]] || { echo "npu_selftest.sh: no python at $py (--python PY)" >&2; exit 2; }

# Refuse, before running anything, where there is no NPU.
command -v npu-smi >/dev/null 2>&1 \
  || { echo "npu_selftest.sh: needs an Ascend NPU: npu-smi not found (install the driver, docs/npu.md step 1)" >&2; exit 3; }
[[ -n "${ASCEND_HOME_PATH:-}" ]] \
  || { echo "npu_selftest.sh: needs an Ascend NPU: ASCEND_HOME_PATH unset (source <CANN>/set_env.sh)" >&2; exit 3; }
"$py" -c "import torch, torch_npu; assert torch.npu.is_available()" >/dev/null 2>&1 \
  || { echo "npu_selftest.sh: needs an Ascend NPU: torch_npu in $py sees no device" >&2; exit 3; }

work="$(mktemp -d)"
export ASCEND_ACTS_BUILD_OUT="$work/build_out" ASCEND_COMPUTE_UNIT="$soc" ASCEND_ACTS_NPU_STRICT=1
declare -A result
run() {  # step, prerequisite step (or ""), command...
  local step="$1" needs="$2"; shift 2
  if [[ -n "$needs" && "${result[$needs]}" != pass ]]; then result[$step]=skip; return; fi
  echo "=== $step" >&2
  if (cd "$root" && timeout "$limit" "$@") >"$work/log" 2>&1; then result[$step]=pass; else result[$step]=FAIL; fi
  tail -n 5 "$work/log" >&2
}
run "1 build" "" bash scripts/build_npu.sh
mkdir -p "$work/opp"
run "2 install" "1 build" bash scripts/install_npu.sh --install-path "$work/opp"
export ASCEND_CUSTOM_OPP_PATH="$work/opp/vendors/ascend_acts${ASCEND_CUSTOM_OPP_PATH:+:$ASCEND_CUSTOM_OPP_PATH}"
run "3 extension" "2 install" bash -c "ASCEND_ACTS_OP_PACKAGE=installed '$py' -m pip install --quiet --no-build-isolation --no-deps -e . &&
  '$py' -c 'import ascend_acts; from ascend_acts.backends import npu; s = npu.status(); assert s.source == \"extension\", s.detail'"
run "4 wraparound" "3 extension" "$py" scripts/npu_selftest.py wraparound
run "5 index 2**24" "3 extension" "$py" scripts/npu_selftest.py "noise-past-2**24"
run "6 index 2**31" "3 extension" "$py" scripts/npu_selftest.py "noise-past-2**31"
run "7 eval kernel" "3 extension" "$py" scripts/npu_selftest.py eval-kernel
run "8 npu tests" "3 extension" "$py" -m pytest -q -m npu
run "9 timings" "3 extension" "$py" scripts/npu_selftest.py timings
run "10 report" "3 extension" "$py" -m ascend_acts selftest --device npu --out "$root/outputs/selftest"

failed=0
echo "npu_selftest.sh on $soc ($work):"
for step in "${steps[@]}"; do
  echo "  ${result[$step]}  $step"
  [[ "${result[$step]}" == pass ]] || failed=1
done
[[ "${result[10 report]}" == skip ]] || echo "report: $root/outputs/selftest/selftest.md and selftest.json (attach both)"
exit $failed
