#!/usr/bin/env bash
# Builds the AscendC custom op package (build_out/custom_opp_*.run) with CANN's msopgen.
# Exit codes: 0 built; 3 CANN toolkit not found; 4 msopgen not on PATH; 5 the build failed.
# Nothing is created before the prerequisites are confirmed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
soc="${ASCEND_COMPUTE_UNIT:-ascend910b}"

cann="${ASCEND_CANN_PACKAGE_PATH:-${ASCEND_HOME_PATH:-}}"
if [[ -z "$cann" || ! -d "$cann" ]]; then
  echo "build_npu.sh: CANN toolkit not found: set ASCEND_HOME_PATH (source <CANN>/set_env.sh) on an Ascend machine" >&2
  exit 3
fi
if ! command -v msopgen >/dev/null 2>&1; then
  echo "build_npu.sh: msopgen not on PATH: source $cann/set_env.sh (it ships with the CANN toolkit)" >&2
  exit 4
fi

work="$root/build_out/msopgen"
rm -rf "$work"
mkdir -p "$work"
msopgen gen -i "$root/op_host/json/acts_elementwise.json" -f pytorch -c "ai_core-$soc" -lan cpp -out "$work" \
  || { echo "build_npu.sh: msopgen gen failed" >&2; exit 5; }
cp "$root"/op_host/*.cpp "$root"/op_host/*.h "$work/op_host/"
cp "$root"/op_kernel/*.cpp "$root"/op_kernel/*.h "$work/op_kernel/"
(cd "$work" && bash build.sh) || { echo "build_npu.sh: the package build failed (see the output above)" >&2; exit 5; }
cp "$work"/build_out/custom_opp_*.run "$root/build_out/"
echo "build_npu.sh: built $(ls "$root"/build_out/custom_opp_*.run); install with scripts/install_npu.sh"
