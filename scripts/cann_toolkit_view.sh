#!/usr/bin/env bash
# Makes an extracted CANN toolkit tree (e.g. the 8.1.RC1 snapshot ../shared/tools/cann81_check.sh extracts) look
# like an installed one, so scripts/build_npu.sh can run against it: VIEW gets a link to every top-level entry of
# TOOLKIT plus the links CANN's installer creates (the "softlink" column of the packages' script/filelist.csv:
# <arch>-linux/include -> include, <arch>-linux/lib64 -> lib64, <arch>-linux/bin -> bin, tools -> toolkit/tools).
# A git snapshot has no such links. Nothing in TOOLKIT is changed.
# Usage: scripts/cann_toolkit_view.sh TOOLKIT VIEW      (VIEW must not exist yet; then ASCEND_HOME_PATH=VIEW)
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: cann_toolkit_view.sh TOOLKIT VIEW" >&2; exit 2; }
toolkit="$(cd "$1" 2>/dev/null && pwd)" || { echo "cann_toolkit_view.sh: no directory $1" >&2; exit 2; }
view="$2"
[[ ! -e "$view" ]] || { echo "cann_toolkit_view.sh: $view exists already" >&2; exit 2; }
shopt -s nullglob
arch=("$toolkit"/*-linux)
[[ ${#arch[@]} -eq 1 ]] || { echo "cann_toolkit_view.sh: $toolkit has no single <arch>-linux directory" >&2; exit 2; }
arch="$(basename "${arch[0]}")"
mkdir -p "$view/toolkit"
for entry in "$toolkit"/*; do
  [[ "$(basename "$entry")" == toolkit ]] || ln -s "$entry" "$view/$(basename "$entry")"
done
for entry in "$toolkit"/toolkit/*; do ln -s "$entry" "$view/toolkit/$(basename "$entry")"; done
for name in include lib64 bin; do
  [[ -e "$view/$name" ]] || ln -s "$arch/$name" "$view/$name"   # may dangle: the snapshot lacks lib64's binaries
done
[[ -e "$view/toolkit/tools" ]] || ln -s ../tools "$view/toolkit/tools"
echo "$view"
