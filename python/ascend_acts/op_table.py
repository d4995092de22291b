"""The op table: the one place that says which ops exist, what they take and who implements them.

Everything else that lists ops is derived from here: the torch.library schemas and per-device registrations
(`ascend_acts.ops`), the backends' dispatch, the msopgen JSON and OpDef sources of the custom op package, the
aclnn prototypes and registrations of the torch_npu extension, the emulator's launch table and the tests'
parametrisations. Generated files are checked in; `python scripts/generate_op_files.py --check` (run by the
tests) fails when one is stale.

Two kinds of entries:
- `TorchOp`: an operator of the `ascend_acts` torch.library namespace (schema, the kernels it runs on the NPU,
  the backends and dtypes that implement it).
- `Kernel`: an AscendC kernel of the custom op package (its inputs, outputs, attributes, dtypes, tiling).

Names: every spelling of a kernel's name comes from its `base` by one rule (`Kernel.op_type`, `.entry`,
`.aclnn`, `.family`'s folders); a torch op's in-place and backward variants are spelled `<name>_` and
`<name>_backward` as aten spells its own.

This module imports nothing from the package (build scripts load it by path, without torch).
"""

from __future__ import annotations

from dataclasses import dataclass

# dtypes by torch's names (torch.<name>); CANN's names for the same types in msopgen JSON / OpDef
FLOAT_TYPES = ("float16", "bfloat16", "float32")
ALL_FLOAT_TYPES = (*FLOAT_TYPES, "float64")
CANN_DTYPE = {"float32": "float", "float16": "float16", "bfloat16": "bfloat16", "int64": "int64"}
GE_DTYPE = {"float32": "ge::DT_FLOAT", "float16": "ge::DT_FLOAT16", "bfloat16": "ge::DT_BF16", "int64": "ge::DT_INT64"}

# The CPU backends and the NPU fallback, and the input dtypes each runs (the emulator runs the NPU kernels,
# whose vector unit has no float64).
BACKEND_DTYPES = {
    "reference": ALL_FLOAT_TYPES,  # NumPy, float64 oracle
    "sim": FLOAT_TYPES,            # our AscendC kernels on our emulator
    "torch": ALL_FLOAT_TYPES,      # torch built-ins: the NPU fallback, also run on CPU tensors by the tests
}
PLATFORMS = ("ascend910b", "ascend910_93")  # AddConfig of every kernel (docs/npu.md)


def camel(snake: str) -> str:
    return "".join(word.capitalize() for word in snake.split("_"))


# --- AscendC kernels --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Tensor:
    """A kernel input or output; `dtypes` has one entry per supported combination (msopgen's columns), parallel
    to `FLOAT_TYPES`, the dtype of the kernel's data tensors in that combination."""

    name: str
    dtypes: tuple[str, ...] = FLOAT_TYPES
    optional: bool = False


def per_channel(name: str) -> Tensor:
    """A per-channel float32 tensor (BatchNorm parameters and statistics, folded conv bias)."""
    return Tensor(name, ("float32",) * len(FLOAT_TYPES))


@dataclass(frozen=True)
class Attr:
    name: str
    type: str  # "float", "bool", "list_int"
    default: object


@dataclass(frozen=True)
class Kernel:
    base: str            # snake_case; every other name derives from it
    family: str          # op_kernel/<family>/ and op_host/<family>/ hold its source, tiling and host code
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    attrs: tuple[Attr, ...]
    tiling: str          # C++ tiling function of the OpDef (op_host/<family>/)
    infer_shape: str
    infer_dtype: str
    inplace: tuple[str, ...] = ()  # inputs that are outputs of the same name (aclnn: <name>Ref)
    summary: str = ""
    int_wraparound: bool = False  # relies on int32 vector results wrapping (a hardware check: docs/emulator.md)

    @property
    def op_type(self) -> str:
        """The CANN op type (OpDef class, msopgen "op"): Acts + CamelCase(base)."""
        return "Acts" + camel(self.base)

    @property
    def entry(self) -> str:
        """The __global__ kernel entry, as msopgen derives it from the op type: acts_<base>."""
        return "acts_" + self.base

    @property
    def aclnn(self) -> str:
        """The generated two-phase aclnn API: aclnn<OpType>GetWorkspaceSize / aclnn<OpType>."""
        return "aclnn" + self.op_type


_FLOATS_ATTR_SLOPE = Attr("negative_slope", "float", 0.01)
_RRELU_ATTRS = (Attr("lower", "float", 0.125), Attr("upper", "float", 1.0 / 3.0))
_SEED = Tensor("seed", ("int64",) * len(FLOAT_TYPES))
_ELEMENTWISE = dict(family="elementwise", infer_shape="ge::SameShapeAsInput0", infer_dtype="ge::SameTypeAsInput0")
_BATCH_NORM = dict(family="batch_norm_leaky_relu", infer_shape="ge::FirstLikeInputRestPerChannel",
                   infer_dtype="ge::FirstLikeInputRestFloat")

KERNELS: tuple[Kernel, ...] = (
    Kernel("leaky_relu", inputs=(Tensor("x"),), outputs=(Tensor("y"),), attrs=(_FLOATS_ATTR_SLOPE,),
           tiling="optiling::ElementwiseTilingFunc<ascend_acts::ElementwiseOp::LeakyRelu>",
           summary="y = x > 0 ? x : x * negative_slope", **_ELEMENTWISE),
    Kernel("leaky_relu_grad", inputs=(Tensor("dy"), Tensor("saved")), outputs=(Tensor("dx"),),
           attrs=(_FLOATS_ATTR_SLOPE,),
           tiling="optiling::ElementwiseTilingFunc<ascend_acts::ElementwiseOp::LeakyReluGrad>",
           summary="dx = saved > 0 ? dy : dy * negative_slope (saved: the input, or the output when slope >= 0)",
           **_ELEMENTWISE),
    Kernel("r_relu", inputs=(Tensor("x"), _SEED), outputs=(Tensor("y"),), attrs=_RRELU_ATTRS,
           tiling="optiling::ElementwiseTilingFunc<ascend_acts::ElementwiseOp::RRelu>",
           summary="y = x >= 0 ? x : x * a, a ~ U(lower, upper) from Philox keyed on (seed, flat index)",
           int_wraparound=True, **_ELEMENTWISE),
    Kernel("r_relu_grad", inputs=(Tensor("dy"), Tensor("saved"), _SEED), outputs=(Tensor("dx"),),
           attrs=_RRELU_ATTRS, tiling="optiling::ElementwiseTilingFunc<ascend_acts::ElementwiseOp::RReluGrad>",
           summary="dx = dy * (saved >= 0 ? 1 : a), the forward's noise regenerated from the seed",
           int_wraparound=True, **_ELEMENTWISE),
    Kernel("batch_norm_leaky_relu",
           inputs=(Tensor("x"), per_channel("weight"), per_channel("bias"), per_channel("running_mean"),
                   per_channel("running_var")),
           outputs=(Tensor("y"), per_channel("save_mean"), per_channel("save_invstd"), per_channel("running_mean"),
                    per_channel("running_var")),
           attrs=(_FLOATS_ATTR_SLOPE, Attr("eps", "float", 1e-5), Attr("momentum", "float", 0.1),
                  Attr("update_running_stats", "bool", True)),
           tiling="optiling::BatchNormLeakyReluTilingFunc<ascend_acts::BatchNormPass::Forward>",
           inplace=("running_mean", "running_var"),
           summary="y = leaky_relu(batch_norm(x)) over N,C,spatial x in training; updates the running statistics",
           **_BATCH_NORM),
    Kernel("batch_norm_leaky_relu_grad",
           inputs=(Tensor("dy"), Tensor("y"), per_channel("weight"), per_channel("bias"), per_channel("save_invstd")),
           outputs=(Tensor("dx"), per_channel("grad_weight"), per_channel("grad_bias")),
           attrs=(_FLOATS_ATTR_SLOPE,),
           tiling="optiling::BatchNormLeakyReluTilingFunc<ascend_acts::BatchNormPass::Backward>",
           summary="the InPlace-ABN backward: gradients of x, weight, bias from the forward's output", **_BATCH_NORM),
    Kernel("conv_bn_leaky_relu_eval",
           inputs=(Tensor("x"), Tensor("weight"), per_channel("bias")), outputs=(Tensor("y"),),
           attrs=(Attr("strides", "list_int", (1, 1)), Attr("pads", "list_int", (0, 0, 0, 0)),
                  Attr("dilations", "list_int", (1, 1)), _FLOATS_ATTR_SLOPE),
           family="conv_bn_leaky_relu_eval", tiling="optiling::ConvBnLeakyReluEvalTilingFunc",
           infer_shape="ge::ConvOutputShape", infer_dtype="ge::SameTypeAsInput0",
           summary="y = leaky_relu(conv2d(x, weight) + bias) with BatchNorm folded into weight and bias"),
)


# --- torch.library operators ---------------------------------------------------------------------------
_GEOMETRY = "int[2] stride, int[4] padding, int[2] dilation, int groups"


@dataclass(frozen=True)
class TorchOp:
    name: str
    schema: str                     # torch.library schema without the name: "(args) -> returns"
    npu_kernels: tuple[str, ...]    # bases of the Kernels its NPU implementation launches (the platform's
                                    # own ops, e.g. torch_npu's conv, are not listed)
    backends: tuple[str, ...] = ("reference", "sim", "torch")
    dtypes: tuple[str, ...] = ALL_FLOAT_TYPES
    summary: str = ""

    @property
    def inplace(self) -> bool:
        return self.name.endswith("_")

    @property
    def qualified_name(self) -> str:
        return f"ascend_acts::{self.name}"


TORCH_OPS: tuple[TorchOp, ...] = (
    TorchOp("leaky_relu", "(Tensor self, float negative_slope) -> Tensor", ("leaky_relu",)),
    TorchOp("leaky_relu_", "(Tensor(a!) self, float negative_slope) -> ()", ("leaky_relu",)),
    TorchOp("leaky_relu_backward",
            "(Tensor grad_output, Tensor self, float negative_slope, bool self_is_result) -> Tensor",
            ("leaky_relu_grad",)),
    TorchOp("rrelu_with_seed", "(Tensor self, Tensor seed, float lower, float upper) -> Tensor", ("r_relu",)),
    TorchOp("rrelu_with_seed_", "(Tensor(a!) self, Tensor seed, float lower, float upper) -> ()", ("r_relu",)),
    TorchOp("rrelu_with_seed_backward",
            "(Tensor grad_output, Tensor self, Tensor seed, float lower, float upper, bool self_is_result) -> Tensor",
            ("r_relu_grad",)),
    # Like aten::native_batch_norm, training updates the running statistics itself (in place, torch's formula)
    TorchOp("conv_bn_leaky_relu_train",
            f"(Tensor input, Tensor weight, Tensor? bias, Tensor bn_weight, Tensor bn_bias, Tensor(a!)? running_mean, "
            f"Tensor(b!)? running_var, {_GEOMETRY}, float momentum, float eps, float negative_slope, "
            "bool save_output) -> (Tensor out, Tensor conv_out, Tensor mean, Tensor invstd)",
            ("batch_norm_leaky_relu",)),
    TorchOp("conv_bn_leaky_relu_train_backward",
            f"(Tensor grad_out, Tensor saved, bool saved_is_output, Tensor input, Tensor weight, Tensor bn_weight, "
            f"Tensor bn_bias, Tensor mean, Tensor invstd, {_GEOMETRY}, float negative_slope) "
            "-> (Tensor, Tensor, Tensor, Tensor, Tensor)",
            ("batch_norm_leaky_relu_grad",)),
    TorchOp("conv_bias_leaky_relu",
            f"(Tensor input, Tensor weight, Tensor bias, {_GEOMETRY}, float negative_slope) -> Tensor",
            ("conv_bn_leaky_relu_eval",)),
    TorchOp("conv_bias_leaky_relu_backward",
            f"(Tensor grad_out, Tensor input, Tensor weight, Tensor bias, {_GEOMETRY}, float negative_slope) "
            "-> (Tensor, Tensor, Tensor)",
            ()),
)


def torch_op(name: str) -> TorchOp:
    return _TORCH_OPS_BY_NAME[name]


def kernel(base: str) -> Kernel:
    return _KERNELS_BY_BASE[base]


def families() -> tuple[str, ...]:
    return tuple(dict.fromkeys(k.family for k in KERNELS))


def valid_backend_dtypes(op: TorchOp) -> list[tuple[str, str]]:
    """The (backend, dtype) pairs that run `op`: what tests parametrise over (no skips for invalid pairs)."""
    return [(b, d) for b in op.backends for d in op.dtypes if d in BACKEND_DTYPES[b]]


_TORCH_OPS_BY_NAME = {op.name: op for op in TORCH_OPS}
_KERNELS_BY_BASE = {k.base: k for k in KERNELS}
assert len(_TORCH_OPS_BY_NAME) == len(TORCH_OPS) and len(_KERNELS_BY_BASE) == len(KERNELS), "duplicate names"
assert all(b in _KERNELS_BY_BASE for op in TORCH_OPS for b in op.npu_kernels), "unknown kernel in TORCH_OPS"
