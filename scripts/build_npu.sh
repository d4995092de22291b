#!/usr/bin/env bash
# Builds the AscendC custom op package (build_out/custom_opp_*.run) with CANN's msopgen.
# Environment: ASCEND_CANN_PACKAGE_PATH or ASCEND_HOME_PATH (the CANN toolkit; set_env.sh sets the latter);
#   ASCEND_COMPUTE_UNIT: the short SoC name the package is built for, ascend910b (default, Atlas A2) or
#   ascend910_93 (Atlas A3); ASCEND_ACTS_BUILD_OUT (default <repo>/build_out: the msopgen project and the .run).
# Exit codes: 0 built; 2 unsupported SoC; 3 CANN toolkit not found; 4 no msopgen; 5 msopgen or the build failed;
#   6 the project was generated but a CANN file the package build needs is not in this toolkit (it says which).
# Nothing is created before the prerequisites are confirmed.
# The package's vendor name is ascend_acts: it installs to $ASCEND_OPP_PATH/vendors/ascend_acts, where
# ascend_acts.backends.npu, setup.py and `python -m ascend_acts info` look for it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
soc="${ASCEND_COMPUTE_UNIT:-ascend910b}"
out="${ASCEND_ACTS_BUILD_OUT:-$root/build_out}"
vendor=ascend_acts

# The template's ASCEND_COMPUTE_UNIT and AddConfig take short SoC names; msopgen's -c takes a SoC version (a
# chip), which it maps to the short name through op_gen/config/transform.json (SOC_VERSION_TYPE: Ascend910B1 ->
# ascend910b, Ascend910_9391 -> ascend910_93; but "ascend910b" itself -> ascend910, the first generation).
case "$soc" in
  ascend910b) chip=Ascend910B1 ;;
  ascend910_93) chip=Ascend910_9391 ;;
  *)
    hint=""
    if [[ "${soc,,}" =~ ^ascend910b[0-9] ]]; then hint=" ($soc is a chip of the SoC ascend910b: set ascend910b)"
    elif [[ "${soc,,}" =~ ^ascend910_93[0-9] ]]; then hint=" ($soc is a chip of the SoC ascend910_93: set ascend910_93)"
    elif [[ "${soc,,}" == ascend310p* ]]; then hint=" (310P is not supported: docs/npu.md)"; fi
    echo "build_npu.sh: unsupported SoC '$soc': set ASCEND_COMPUTE_UNIT to ascend910b or ascend910_93$hint" >&2
    exit 2 ;;
esac
cann="${ASCEND_CANN_PACKAGE_PATH:-${ASCEND_HOME_PATH:-}}"
if [[ -z "$cann" || ! -d "$cann" ]]; then
  echo "build_npu.sh: CANN toolkit not found: set ASCEND_HOME_PATH (source <CANN>/set_env.sh) on an Ascend machine" >&2
  exit 3
fi
cann="$(cd "$cann" && pwd)"
# set_env.sh puts msopgen on PATH; the toolkit keeps it in python/site-packages/bin with its op_gen package.
if command -v msopgen >/dev/null 2>&1; then
  msopgen=(msopgen)
elif [[ -f "$cann/python/site-packages/bin/msopgen" ]]; then
  msopgen=(python3 "$cann/python/site-packages/bin/msopgen")
else
  echo "build_npu.sh: msopgen not on PATH nor in $cann/python/site-packages/bin: source $cann/set_env.sh (it ships with the CANN toolkit)" >&2
  exit 4
fi
fail() { echo "build_npu.sh: $*" >&2; exit 5; }
# msopgen reads its templates from $ASCEND_HOME_PATH, the project's build.sh needs it too.
export ASCEND_HOME_PATH="$cann"
export PYTHONPATH="$cann/python/site-packages${PYTHONPATH:+:$PYTHONPATH}"

# msopgen 8.1 generates one op per call (without -op it asks which one on stdin: op_info_ir_json.py _choose_op):
# the first op creates the project, every further one is added to it (-m 1). The JSONs are generated from the op
# table (scripts/generate_op_files.py), one per kernel: op_host/<family>/<base>.json.
mapfile -t specs < <(cd "$root" && find op_host -mindepth 2 -maxdepth 2 -name '*.json' | LC_ALL=C sort | sed "s#^#$root/#")
[[ ${#specs[@]} -gt 0 ]] || { echo "build_npu.sh: no op_host/<family>/*.json in $root" >&2; exit 5; }
work="$out/msopgen"
rm -rf "$work"
mkdir -p "$work"
mode=()
generated=0
for spec in "${specs[@]}"; do
  ops=$(python3 -c 'import json, sys; print(" ".join(op["op"] for op in json.load(open(sys.argv[1]))))' "$spec") \
    || fail "cannot read the op types of $spec"
  for op in $ops; do
    "${msopgen[@]}" gen -i "$spec" -f pytorch -c "ai_core-$chip" -lan cpp -out "$work" -op "$op" "${mode[@]}" </dev/null \
      || fail "msopgen gen failed for $op of $spec"
    mode=(-m 1)
    generated=$((generated + 1))
  done
done

# msopgen writes one template per op (op_host/<op>.cpp + <op>_tiling.h, op_kernel/<op>.cpp) named after the op
# type in snake case (utils.py fix_name_lower_with_under: ActsRrelu -> acts_rrelu). Our folders go next to
# the templates (op_host/<family>/, op_kernel/<family>/, common/: relative includes resolve as in our tree;
# the package build compiles only the top-level .cpp of each, and its source package copies all of op_kernel/),
# and each template becomes one line including our file that defines the same OpDef class / kernel entry, so
# no op is defined twice and a naming mismatch stops the build instead of compiling a template.
replace_templates() {  # dir, regex capturing the name a template defines, how our files define that name
  local dir="$1" pattern="$2" ours_pattern="$3" template name ours
  for template in "$work/$dir"/*.cpp; do
    name="$(sed -nE "s/.*$pattern.*/\\1/p" "$template" | head -n 1)"
    [[ -n "$name" ]] || fail "cannot tell which op $template is for"
    ours="$(cd "$root/$dir" && grep -rlE --include='*.cpp' "${ours_pattern//NAME/$name}" . | LC_ALL=C sort | head -n 1 || true)"
    [[ -n "$ours" ]] || fail "no file in $dir/ defines $name (msopgen generated $(basename "$template") for it)"
    printf '// %s of this package: %s/%s (scripts/build_npu.sh)\n#include "%s"\n' "$name" "$dir" "${ours#./}" \
      "${ours#./}" >"$template"
  done
}
replace_templates op_host 'class ([A-Za-z0-9_]+) : public OpDef' 'class NAME : public OpDef'
replace_templates op_kernel '__aicore__ void ([A-Za-z0-9_]+)\(' '__aicore__ void NAME\('
rm -f "$work"/op_host/*_tiling.h  # the templates' TilingData; ours are plain structs
for dir in op_host op_kernel; do
  for folder in "$root/$dir"/*/; do
    cp -R "${folder%/}" "$work/$dir/"
    rm -f "$work/$dir/$(basename "$folder")"/*.json  # msopgen's input, not the package's
  done
done

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

# The CANN files the generated project's build uses, in the order it uses them (template cmake/intf.cmake,
# cmake/func.cmake opbuild(), op_host/CMakeLists.txt, cmake/util/const_var.py BIN_CMD). Stop at the first one
# that is not here, or not runnable on this machine, instead of failing somewhere inside CMake.
host_elf_machine() { case "$(uname -m)" in x86_64) echo 62 ;; aarch64) echo 183 ;; *) echo "" ;; esac; }
elf_machine() { od -An -t u2 -j 18 -N 2 "$1" 2>/dev/null | tr -d ' '; }
missing=()
check_file() {  # path (alternatives separated by |), what uses it, executable?
  local alternatives="$1" purpose="$2" executable="${3:-}" path found="" reason="not there"
  IFS='|' read -ra paths <<<"$alternatives"
  for path in "${paths[@]}"; do
    [[ -e "$cann/$path" ]] || continue
    if [[ "$(head -c 4 "$cann/$path" | od -An -c | tr -d ' ')" == '177ELF' ]]; then
      local machine; machine="$(elf_machine "$cann/$path")"
      if [[ -n "$(host_elf_machine)" && "$machine" != "$(host_elf_machine)" ]]; then
        reason="there, but built for another architecture (ELF machine $machine; this is $(uname -m))"; continue
      fi
    fi
    if [[ -n "$executable" && ! -x "$cann/$path" ]]; then reason="there, but not executable"; continue; fi
    found="$path"; break
  done
  [[ -n "$found" ]] || missing+=("$cann/${paths[0]}: $reason ($purpose)")
}
check_file include/register/op_def_registry.h "headers of the op_host build: -I \$ASCEND_CANN_PACKAGE_PATH/include"
check_file lib64/libexe_graph.so "linked by the opbuild step, cmake/func.cmake"
check_file lib64/libregister.so "linked by the opbuild step, cmake/func.cmake"
check_file "lib64/libtiling_api.so|lib64/libtiling_api.a" "linked by the opbuild step, cmake/func.cmake"
check_file toolkit/tools/opbuild/op_build "generates the aclnn API and op proto, cmake/func.cmake" executable
check_file lib64/libnnopbase.so "linked into the tiling library, op_host/CMakeLists.txt"
check_file lib64/librt2_registry.a "linked into the tiling library, op_host/CMakeLists.txt"
check_file bin/opc "compiles each kernel, cmake/util/const_var.py" executable
check_file compiler/ccec_compiler/bin/bisheng "the AscendC compiler opc runs" executable
if [[ ${#missing[@]} -gt 0 ]]; then
  {
    echo "build_npu.sh: msopgen generated the project for all $generated ops in $work (our OpDefs and kernels in place)."
    echo "build_npu.sh: stopped before the package build: the first CANN file it needs is missing: ${missing[0]}"
    for more in "${missing[@]:1}"; do echo "build_npu.sh:   also missing: $more"; done
  } >&2
  exit 6
fi

(cd "$work" && bash build.sh) || fail "the package build failed (see the output above)"
shopt -s nullglob
built=("$work"/build_out/custom_opp_*.run)
[[ ${#built[@]} -gt 0 ]] || fail "the build made no build_out/custom_opp_*.run"
rm -f "$out"/custom_opp_*.run
cp "${built[@]}" "$out/"
echo "build_npu.sh: built $(cd "$out" && ls custom_opp_*.run) in $out for $soc (vendor $vendor); install with scripts/install_npu.sh"
