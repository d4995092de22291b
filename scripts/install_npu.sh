#!/usr/bin/env bash
# Installs the custom op package built by build_npu.sh.
# Usage: scripts/install_npu.sh [--install-path DIR]   (default: the CANN vendors directory)
# Exit codes: 0 installed; 2 bad arguments; 3 CANN toolkit not found; 4 no package built; 5 install failed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
install_path=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --install-path) install_path="${2:-}"; shift 2 ;;
    *) echo "install_npu.sh: unknown argument $1 (usage: install_npu.sh [--install-path DIR])" >&2; exit 2 ;;
  esac
done

if [[ -z "${ASCEND_HOME_PATH:-}" || ! -d "${ASCEND_HOME_PATH:-/nonexistent}" ]]; then
  echo "install_npu.sh: CANN toolkit not found: set ASCEND_HOME_PATH (source <CANN>/set_env.sh) on an Ascend machine" >&2
  exit 3
fi
shopt -s nullglob
packages=("$root"/build_out/custom_opp_*.run)
if [[ ${#packages[@]} -eq 0 ]]; then
  echo "install_npu.sh: no build_out/custom_opp_*.run: run scripts/build_npu.sh first" >&2
  exit 4
fi

args=(--quiet)
[[ -n "$install_path" ]] && args+=("--install-path=$install_path")
bash "${packages[0]}" "${args[@]}" || { echo "install_npu.sh: the package installer failed" >&2; exit 5; }
target="${install_path:-$ASCEND_HOME_PATH/opp}/vendors"
echo "install_npu.sh: installed; before use: source the set_env.bash under $target/<vendor>/bin if present"
