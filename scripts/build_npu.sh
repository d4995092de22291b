#!/usr/bin/env bash
# Builds the AscendC custom op package (build_out/custom_opp_*.run) with CANN's msopgen.
# Environment: ASCEND_CANN_PACKAGE_PATH or ASCEND_HOME_PATH (the CANN toolkit; set_env.sh sets the latter);
#   ASCEND_COMPUTE_UNIT (default ascend910b; ascend310p, or a chip name of those series such as Ascend910B3);
#   ASCEND_ACTS_BUILD_OUT (default <repo>/build_out: the msopgen project and the .run go there).
# Exit codes: 0 built; 2 unsupported SoC; 3 CANN toolkit not found; 4 msopgen not on PATH; 5 the build failed.
# Nothing is created before the prerequisites are confirmed.
# The package's vendor name is ascend_acts: it installs to $ASCEND_OPP_PATH/vendors/ascend_acts, where
# ascend_acts.npu, setup.py and `python -m ascend_acts info` look for it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
soc="${ASCEND_COMPUTE_UNIT:-ascend910b}"
out="${ASCEND_ACTS_BUILD_OUT:-$root/build_out}"
vendor=ascend_acts

# The OpDefs in op_host/ are configured for these series (AICore().AddConfig).
if [[ ! "$soc" =~ ^[Aa]scend(910[Bb]|310[Pp])[0-9]?$ ]]; then
  echo "build_npu.sh: unsupported SoC '$soc': set ASCEND_COMPUTE_UNIT to ascend910b or ascend310p (or a chip name of those series, e.g. Ascend910B3)" >&2
  exit 2
fi
cann="${ASCEND_CANN_PACKAGE_PATH:-${ASCEND_HOME_PATH:-}}"
if [[ -z "$cann" || ! -d "$cann" ]]; then
  echo "build_npu.sh: CANN toolkit not found: set ASCEND_HOME_PATH (source <CANN>/set_env.sh) on an Ascend machine" >&2
  exit 3
fi
if ! command -v msopgen >/dev/null 2>&1; then
  echo "build_npu.sh: msopgen not on PATH: source $cann/set_env.sh (it ships with the CANN toolkit)" >&2
  exit 4
fi
fail() { echo "build_npu.sh: $*" >&2; exit 5; }

# One msopgen JSON per op family; the first creates the project, the others are appended (-m 1).
specs=("$root/op_host/json/acts_elementwise.json" "$root/op_host/json/acts_conv_bn.json")
work="$out/msopgen"
rm -rf "$work"
mkdir -p "$work"
append=()
for spec in "${specs[@]}"; do
  msopgen gen -i "$spec" -f pytorch -c "ai_core-$soc" -lan cpp -out "$work" "${append[@]}" \
    || fail "msopgen gen failed for $spec"
  append=(-m 1)
done

# msopgen writes one template per op (op_host/<op>.cpp + <op>_tiling.h, op_kernel/<op>.cpp) named after the op
# type. Replace each template with our file that defines the same OpDef class / kernel entry, so no op is
# defined twice and a naming mismatch stops the build instead of compiling a template.
replace_templates() {  # dir, regex capturing the name a template defines, how our files define that name
  local dir="$1" pattern="$2" ours_pattern="$3" template name ours
  for template in "$work/$dir"/*.cpp; do
    name="$(sed -nE "s/.*$pattern.*/\\1/p" "$template" | head -n 1)"
    [[ -n "$name" ]] || fail "cannot tell which op $template is for"
    ours="$(grep -lE "${ours_pattern//NAME/$name}" "$root/$dir"/*.cpp | head -n 1 || true)"
    [[ -n "$ours" ]] || fail "no file in $dir/ defines $name (msopgen generated $(basename "$template") for it)"
    cp "$ours" "$template"
  done
}
replace_templates op_host 'class ([A-Za-z0-9_]+) : public OpDef' 'class NAME : public OpDef'
replace_templates op_kernel '__aicore__ void ([A-Za-z0-9_]+)\(' '__aicore__ void NAME\('
rm -f "$work"/op_host/*_tiling.h  # the templates' TilingData; ours is the plain struct of elementwise_tiling.h
cp "$root"/op_host/*.h "$work/op_host/"
cp "$root"/op_kernel/*.h "$work/op_kernel/"

# Build configuration: our vendor name, this toolkit, the SoC, and the binary package (it carries the aclnn API).
python3 - "$work/CMakePresets.json" "$vendor" "$cann" "$soc" <<'PY' || fail "cannot configure $work/CMakePresets.json"
import json, sys
path, vendor, cann, soc = sys.argv[1:]
with open(path) as f:
    presets = json.load(f)
variables = presets["configurePresets"][0]["cacheVariables"]
for name, kind, value in [("vendor_name", "STRING", vendor), ("ASCEND_CANN_PACKAGE_PATH", "PATH", cann),
                          ("ASCEND_COMPUTE_UNIT", "STRING", soc), ("ENABLE_BINARY_PACKAGE", "BOOL", "True")]:
    variables[name] = {"type": kind, "value": value}
with open(path, "w") as f:
    json.dump(presets, f, indent=4)
PY
(cd "$work" && bash build.sh) || fail "the package build failed (see the output above)"
shopt -s nullglob
built=("$work"/build_out/custom_opp_*.run)
[[ ${#built[@]} -gt 0 ]] || fail "the build made no build_out/custom_opp_*.run"
rm -f "$out"/custom_opp_*.run
cp "${built[@]}" "$out/"
echo "build_npu.sh: built $(cd "$out" && ls custom_opp_*.run) in $out for $soc (vendor $vendor); install with scripts/install_npu.sh"
