"""Checks of the NPU side that need no CANN: the op definitions agree everywhere, and the build
scripts fail fast and clearly without the toolkit."""

import copy
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import torch

import ascend_acts  # noqa: F401  (registers the ops)
from ascend_acts.backends import sim

ROOT = Path(__file__).resolve().parents[1]
SPEC = json.loads((ROOT / "op_host/json/acts_elementwise.json").read_text())

# CANN op -> (op_host file, kernel entry, torch op, its forward inputs in CANN order, tensor-argument names)
OPS = {
    "ActsLeakyRelu": ("leaky_relu", "acts_leaky_relu", "leaky_relu", ["self"]),
    "ActsLeakyReluGrad": ("leaky_relu_grad", "acts_leaky_relu_grad", "leaky_relu_backward", ["grad_output", "self"]),
    "ActsRRelu": ("rrelu", "acts_r_relu", "rrelu_with_seed", ["self", "seed"]),
    "ActsRReluGrad": ("rrelu_grad", "acts_r_relu_grad", "rrelu_with_seed_backward", ["grad_output", "self", "seed"]),
}
DTYPES = {"float": "ge::DT_FLOAT", "float16": "ge::DT_FLOAT16", "bfloat16": "ge::DT_BF16", "int64": "ge::DT_INT64"}


def msopgen_name(op_type: str) -> str:
    """The name msopgen 8.1 gives an op's files and kernel entry (op_gen/interface/utils.py
    fix_name_lower_with_under, as its docstring specifies): lower case, "_" before a capital that follows a
    lower-case letter or digit, or that follows a capital and precedes a lower-case letter."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", op_type).lower()


def test_msopgen_name_follows_the_documented_examples():
    examples = {"Abc": "abc", "AbcDef": "abc_def", "ABCDef": "abc_def", "Abc2DEf": "abc2_d_ef",
                "Abc2DEF": "abc2_def", "ABC2dEF": "abc2d_ef", "ActsRRelu": "acts_r_relu"}
    assert {name: msopgen_name(name) for name in examples} == examples


def test_every_kernel_entry_has_msopgen_s_name():
    """scripts/build_npu.sh replaces each template msopgen generates with our kernel of the same entry name."""
    entries = {cann_op: kernel for cann_op, (_, kernel, _, _) in OPS.items()}
    fused = {entry["op"] for entry in json.loads((ROOT / "op_host/json/acts_conv_bn.json").read_text())}
    defined = set(re.findall(r"__global__ __aicore__ void (\w+)\(", " ".join(
        f.read_text() for f in (ROOT / "op_kernel").glob("*.cpp"))))
    assert {op: msopgen_name(op) for op in entries} == entries
    assert {msopgen_name(op) for op in [*entries, *fused]} == defined


def parse_opdef(text: str) -> dict:
    def tensors(kind):
        found = re.findall(rf'this->{kind}\("(\w+)"\)\s*\.ParamType\(REQUIRED\)\s*\.DataType\(\{{([^}}]*)\}}\)', text)
        return [(name, [t.strip() for t in types.split(",")]) for name, types in found]

    return {"op": re.search(r"class (\w+) : public OpDef", text).group(1),
            "inputs": tensors("Input"), "outputs": tensors("Output"),
            "attrs": re.findall(r'this->Attr\("(\w+)"\)\.AttrType\(OPTIONAL\)\.Float\(([-\d.e]+)\)', text)}


def check(spec: list) -> None:
    """Raises AssertionError on any disagreement between `spec` (the JSON) and the other definitions."""
    assert sorted(entry["op"] for entry in spec) == sorted(OPS)
    for entry in spec:
        file, kernel, torch_op, torch_inputs = OPS[entry["op"]]
        opdef = parse_opdef((ROOT / f"op_host/{file}.cpp").read_text())
        assert opdef["op"] == entry["op"]
        as_json = lambda items: [(d["name"], [DTYPES[t] for t in d["type"]]) for d in items]  # noqa: E731
        assert opdef["inputs"] == as_json(entry["input_desc"])
        assert opdef["outputs"] == as_json(entry["output_desc"])
        assert [(a, float(d)) for a, d in opdef["attrs"]] == \
               [(a["name"], float(a["default_value"])) for a in entry["attr"]]
        schema = getattr(torch.ops.ascend_acts, torch_op).default._schema
        tensor_args = [a.name for a in schema.arguments if isinstance(a.type, torch.TensorType)]
        assert tensor_args == torch_inputs and len(entry["input_desc"]) == len(torch_inputs)
        float_args = [a.name for a in schema.arguments if a.type.kind() == "FloatType"]
        assert float_args == [a["name"] for a in entry["attr"]]
        assert len(schema.returns) == len(entry["output_desc"])
        assert re.search(rf"void {kernel}\(", (ROOT / f"op_kernel/{file}.cpp").read_text())
        entry_args = re.search(rf"void {kernel}\(([^)]*)\)", (ROOT / f"op_kernel/{file}.cpp").read_text()).group(1)
        assert entry_args.count("GM_ADDR") == len(entry["input_desc"]) + len(entry["output_desc"]) + 2  # + workspace, tiling


def test_json_opdefs_schemas_and_kernels_agree():
    check(SPEC)


@pytest.mark.parametrize("alter", ["rename_attr", "drop_dtype", "change_default", "extra_input"])
def test_a_disagreement_is_detected(alter):
    spec = copy.deepcopy(SPEC)
    entry = spec[0]
    if alter == "rename_attr":
        entry["attr"][0]["name"] = "slope"
    elif alter == "drop_dtype":
        entry["input_desc"][0]["type"] = entry["input_desc"][0]["type"][:2]
    elif alter == "change_default":
        entry["attr"][0]["default_value"] = "0.2"
    else:
        entry["input_desc"].append(dict(entry["input_desc"][0], name="extra"))
    with pytest.raises(AssertionError):
        check(spec)


@pytest.mark.skipif(sim.unavailable_reason() is not None, reason=str(sim.unavailable_reason()))
def test_tiling_struct_is_seen_from_python_field_by_field():
    from ascend_acts import _sim

    header = (ROOT / "op_kernel/elementwise_tiling_data.h").read_text()
    body = re.search(r"struct ElementwiseTiling \{(.*?)\};", header, re.S).group(1)
    fields = re.findall(r"^\s*(uint64_t|uint32_t|float)\s+(\w+);", body, re.M)
    snake = {re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower() for _, name in fields}
    assert {n for n in dir(_sim.ElementwiseTiling) if not n.startswith("_")} == snake


def run_script(name, *args, env_overrides=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASCEND")}
    env.update(env_overrides or {})
    return subprocess.run(["bash", str(ROOT / "scripts" / name), *args], capture_output=True, text=True, env=env,
                          timeout=60)


def test_build_script_fails_fast_without_cann(tmp_path):
    before = (ROOT / "build_out").exists()
    result = run_script("build_npu.sh")
    assert result.returncode == 3 and "CANN toolkit not found" in result.stderr
    result = run_script("build_npu.sh", env_overrides={"ASCEND_HOME_PATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 4 and "msopgen not on PATH" in result.stderr
    assert (ROOT / "build_out").exists() == before  # nothing created


def test_install_script_fails_fast(tmp_path):
    assert run_script("install_npu.sh").returncode == 3
    result = run_script("install_npu.sh", env_overrides={"ASCEND_HOME_PATH": str(tmp_path)})
    assert result.returncode == 4 and "run scripts/build_npu.sh first" in result.stderr
    result = run_script("install_npu.sh", "--bogus")
    assert result.returncode == 2
