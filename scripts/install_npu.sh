#!/usr/bin/env bash
# Installs the custom op package built by build_npu.sh (vendor name ascend_acts).
# Usage: scripts/install_npu.sh [--install-path DIR]   (default: $ASCEND_OPP_PATH, i.e. <CANN>/opp)
# The package lands in <that>/vendors/ascend_acts; its generated aclnn library is op_api/lib/libcust_opapi.so.
# Environment: ASCEND_HOME_PATH (source <CANN>/set_env.sh); ASCEND_ACTS_BUILD_OUT as for build_npu.sh.
# Exit codes: 0 installed; 2 bad arguments; 3 CANN toolkit not found; 4 no package built; 5 install failed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${ASCEND_ACTS_BUILD_OUT:-$root/build_out}"
vendor=ascend_acts
install_path=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --install-path)
      [[ -n "${2:-}" ]] || { echo "install_npu.sh: --install-path needs a directory" >&2; exit 2; }
      install_path="$(cd "$2" 2>/dev/null && pwd)" || { echo "install_npu.sh: no directory $2" >&2; exit 2; }
      shift 2 ;;
    *) echo "install_npu.sh: unknown argument $1 (usage: install_npu.sh [--install-path DIR])" >&2; exit 2 ;;
  esac
done

if [[ -z "${ASCEND_HOME_PATH:-}" || ! -d "${ASCEND_HOME_PATH:-/nonexistent}" ]]; then
  echo "install_npu.sh: CANN toolkit not found: set ASCEND_HOME_PATH (source <CANN>/set_env.sh) on an Ascend machine" >&2
  exit 3
fi
shopt -s nullglob
packages=("$out"/custom_opp_*.run)
if [[ ${#packages[@]} -eq 0 ]]; then
  echo "install_npu.sh: no custom_opp_*.run in $out: run scripts/build_npu.sh first" >&2
  exit 4
fi

args=(--quiet)
[[ -n "$install_path" ]] && args+=("--install-path=$install_path")
bash "${packages[0]}" "${args[@]}" || { echo "install_npu.sh: the package installer failed" >&2; exit 5; }
target="${install_path:-${ASCEND_OPP_PATH:-$ASCEND_HOME_PATH/opp}}/vendors/$vendor"
if [[ ! -f "$target/op_api/lib/libcust_opapi.so" ]]; then
  echo "install_npu.sh: no $target/op_api/lib/libcust_opapi.so after installing: the package lacks the aclnn API (build it with scripts/build_npu.sh, which enables the binary package)" >&2
  exit 5
fi
echo "install_npu.sh: installed $(basename "${packages[0]}") to $target"
if [[ -n "$install_path" ]]; then
  echo "install_npu.sh: outside the CANN tree, so before use: export ASCEND_CUSTOM_OPP_PATH=$target:\${ASCEND_CUSTOM_OPP_PATH:-}"
fi
