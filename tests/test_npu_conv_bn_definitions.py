"""The NPU definitions of the fused Conv+BN+LeakyReLU kernels agree without CANN: the msopgen JSON
(op_host/json/acts_conv_bn.json), the OpDefs parsed from op_host/, the kernel entries in op_kernel/
and the tiling structs with their Python mirrors. (The torch ops are composites of these kernels and
the platform conv, so there is no one-to-one schema to compare with, unlike the elementwise ops.)"""

import copy
import json
import re
from pathlib import Path

import pytest

from ascend_acts.backends import sim

ROOT = Path(__file__).resolve().parents[1]
SPEC = json.loads((ROOT / "op_host/json/acts_conv_bn.json").read_text())
# CANN op -> (op_host file, op_kernel file, kernel entry)
OPS = {
    "ActsBatchNormLeakyRelu": ("batch_norm_leaky_relu", "batch_norm_leaky_relu", "acts_batch_norm_leaky_relu"),
    "ActsBatchNormLeakyReluGrad": ("batch_norm_leaky_relu_grad", "batch_norm_leaky_relu_grad",
                                   "acts_batch_norm_leaky_relu_grad"),
    "ActsConvBnLeakyReluEval": ("conv_bn_leaky_relu_eval", "conv_bn_leaky_relu_eval", "acts_conv_bn_leaky_relu_eval"),
}
DTYPES = {"float": "ge::DT_FLOAT", "float16": "ge::DT_FLOAT16", "bfloat16": "ge::DT_BF16"}


def parse_opdef(text: str) -> dict:
    def tensors(kind):
        found = re.findall(rf'this->{kind}\("(\w+)"\)\s*\.ParamType\(REQUIRED\)\s*\.DataType\(\{{([^}}]*)\}}\)', text)
        return [(name, [t.strip() for t in types.split(",")]) for name, types in found]

    attrs = []
    for name, kind, value in re.findall(r'this->Attr\("(\w+)"\)\.AttrType\(OPTIONAL\)\.(\w+)\(([^)]*)\)', text):
        parsed = {"Float": float, "Bool": lambda v: v == "true",
                  "ListInt": lambda v: [int(i) for i in v.strip("{}").split(",")]}[kind](value)
        attrs.append((name, {"Float": "float", "Bool": "bool", "ListInt": "list_int"}[kind], parsed))
    return {"op": re.search(r"class (\w+) : public OpDef", text).group(1),
            "inputs": tensors("Input"), "outputs": tensors("Output"), "attrs": attrs}


def json_default(attr):
    value = attr["default_value"]
    return {"float": float, "bool": lambda v: v == "true", "list_int": list}[attr["type"]](value)


def check(spec: list) -> None:
    """Raises AssertionError on any disagreement between `spec` (the JSON) and the other definitions."""
    assert sorted(entry["op"] for entry in spec) == sorted(OPS)
    for entry in spec:
        host, kernel_file, kernel = OPS[entry["op"]]
        opdef = parse_opdef((ROOT / f"op_host/{host}.cpp").read_text())
        assert opdef["op"] == entry["op"]
        as_json = lambda items: [(d["name"], [DTYPES[t] for t in d["type"]]) for d in items]  # noqa: E731
        assert opdef["inputs"] == as_json(entry["input_desc"])
        assert opdef["outputs"] == as_json(entry["output_desc"])
        assert opdef["attrs"] == [(a["name"], a["type"], json_default(a)) for a in entry["attr"]]
        source = (ROOT / f"op_kernel/{kernel_file}.cpp").read_text()
        arguments = re.search(rf"void {kernel}\(([^)]*)\)", source).group(1)
        assert arguments.count("GM_ADDR") == len(entry["input_desc"]) + len(entry["output_desc"]) + 2


def test_json_opdefs_and_kernels_agree():
    check(SPEC)


@pytest.mark.parametrize("alter", ["rename_input", "drop_dtype", "change_default", "extra_output"])
def test_a_disagreement_is_detected(alter):
    spec = copy.deepcopy(SPEC)
    entry = spec[-1]
    if alter == "rename_input":
        entry["input_desc"][1]["name"] = "filter"
    elif alter == "drop_dtype":
        entry["output_desc"][0]["type"] = entry["output_desc"][0]["type"][:2]
    elif alter == "change_default":
        entry["attr"][1]["default_value"] = [1, 1, 1, 1]
    else:
        entry["output_desc"].append(dict(entry["output_desc"][0], name="extra"))
    with pytest.raises(AssertionError):
        check(spec)


def header_fields(header: str, struct: str) -> list[tuple[str, str]]:
    body = re.search(rf"struct {struct} \{{(.*?)\n\}};", (ROOT / "op_kernel" / header).read_text(), re.S).group(1)
    fields = []
    for kind, names in re.findall(r"^\s*(uint64_t|uint32_t|int32_t|float|\w+)\s+([\w, ]+);", body, re.M):
        fields += [(kind, name.strip()) for name in names.split(",")]
    return fields


def snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def exposed(cls) -> set[str]:
    """The fields the binding shows of a C++ tiling struct (ascend_acts._sim)."""
    return {name for name in dir(cls) if not name.startswith("_")}


@pytest.mark.skipif(sim.unavailable_reason() is not None, reason=str(sim.unavailable_reason()))
def test_batch_norm_tiling_struct_is_seen_from_python_field_by_field():
    from ascend_acts import _sim

    fields = header_fields("batch_norm_leaky_relu_tiling_data.h", "BatchNormLeakyReluTiling")
    assert exposed(_sim.BatchNormLeakyReluTiling) == {snake(name) for _, name in fields}


@pytest.mark.skipif(sim.unavailable_reason() is not None, reason=str(sim.unavailable_reason()))
def test_eval_tiling_struct_is_seen_from_python_field_by_field():
    from ascend_acts import _sim

    geometry = header_fields("conv_bn_leaky_relu_eval_tiling_data.h", "ConvGeometry")
    names = {"inChannels": "in_channels", "outChannels": "out_channels", "padH": "pad_top", "padW": "pad_left"}
    assert exposed(_sim.ConvGeometry) == {names.get(name, snake(name)) for _, name in geometry}
    plan = header_fields("conv_bn_leaky_relu_eval_tiling_data.h", "ConvBnLeakyReluEvalTiling")
    assert exposed(_sim.ConvBnLeakyReluEvalTiling) == {snake(name) for _, name in plan}
    cube = header_fields("conv_bn_leaky_relu_eval_tiling_data.h", "CubeTilingFields")
    assert exposed(_sim.CubeTiling) == {name for _, name in cube}
