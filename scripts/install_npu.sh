#!/usr/bin/env bash
# Installs the custom op package built by build_npu.sh (vendor name ascend_acts).
# Usage: scripts/install_npu.sh [--install-path DIR]
# Where, as the package's own installer decides (the op project template's scripts/install.sh): DIR if given,
# else $ASCEND_CUSTOM_OPP_PATH if set (one directory), else $ASCEND_OPP_PATH (default <CANN>/opp). The package
# lands in <that>/vendors/ascend_acts; its generated aclnn library is op_api/lib/libcust_opapi.so.
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
if [[ -n "$install_path" ]]; then
  args+=("--install-path=$install_path")
  base="$install_path"
elif [[ -n "${ASCEND_CUSTOM_OPP_PATH:-}" ]]; then
  # the installer takes the whole value as one directory (and creates it), unlike the runtime's list of vendors
  if [[ "$ASCEND_CUSTOM_OPP_PATH" == *:* ]]; then
    echo "install_npu.sh: ASCEND_CUSTOM_OPP_PATH=$ASCEND_CUSTOM_OPP_PATH lists several directories, but the package installer installs into it as one: pass --install-path DIR, or unset it to install into \$ASCEND_OPP_PATH" >&2
    exit 2
  fi
  if [[ "$(basename "$ASCEND_CUSTOM_OPP_PATH")" == "$vendor" ]]; then
    echo "install_npu.sh: ASCEND_CUSTOM_OPP_PATH=$ASCEND_CUSTOM_OPP_PATH is the vendor directory the runtime reads; the package installer would install into $ASCEND_CUSTOM_OPP_PATH/vendors/$vendor: pass --install-path $(dirname "$(dirname "$ASCEND_CUSTOM_OPP_PATH")") to reinstall there" >&2
    exit 2
  fi
  base="$ASCEND_CUSTOM_OPP_PATH"
else
  export ASCEND_OPP_PATH="${ASCEND_OPP_PATH:-$ASCEND_HOME_PATH/opp}"  # what set_env.sh sets; the installer needs it
  base="$ASCEND_OPP_PATH"
fi
bash "${packages[0]}" "${args[@]}" || { echo "install_npu.sh: the package installer failed" >&2; exit 5; }
target="$base/vendors/$vendor"
if [[ ! -f "$target/op_api/lib/libcust_opapi.so" ]]; then
  echo "install_npu.sh: no $target/op_api/lib/libcust_opapi.so after installing: the package lacks the aclnn API (build it with scripts/build_npu.sh, which enables the binary package)" >&2
  exit 5
fi
echo "install_npu.sh: installed $(basename "${packages[0]}") to $target"
if [[ "$base" != "${ASCEND_OPP_PATH:-}" ]]; then
  # the runtime reads ASCEND_CUSTOM_OPP_PATH as a list of vendor directories
  echo "install_npu.sh: outside the CANN tree, so before use: export ASCEND_CUSTOM_OPP_PATH=$target:\${ASCEND_CUSTOM_OPP_PATH:-}"
fi
