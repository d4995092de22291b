"""The fused bias + LeakyReLU kernels (op_kernel/ family "fused_bias_leaky_relu", StyleGAN2's fused_leaky_relu): on
the emulator for CPU tensors (the "sim" backend's functions), through the op package on NPU tensors, one launch
sequence for both (`backends.launch`): y = leaky_relu(input + bias[c], negative_slope) * scale with c = dim 1
(relu: torch.relu in place of the LeakyReLU; clamp >= 0: clamped to [-clamp, clamp]), and its backward with the
per-channel grad_bias, one launch each (docs/fused_bias_kernels.md).

On the emulator large tensors run in pieces of whole channels: it records, per output byte, which block wrote it
(2 bytes each), so an input of more than LAUNCH_BYTES runs as several launches over channel ranges, each on contiguous
copies of its channels. A channel belongs to one piece, so each grad_bias entry is still one kernel's complete
float32 sum and every bias is read once over all pieces; results equal one launch's (y and dx bit for bit).
`last_launch()` has the last piece's counters.
"""

from __future__ import annotations

import torch

from ...backends.launch import check_dtype, launch, on_emulator
from ...backends.sim import emulator
from ...numerics.layout import batch_channels_spatial
from ...op_table import kernel as table_kernel

LAUNCH_BYTES = 1 << 26


def tiling(kernel: str, shape, element_size: int, has_bias: bool = True, platform: str | None = None,
           vector_cores: int | None = None, **attrs):
    """The op_host tiling (ascend_acts._sim.FusedBiasLeakyReluTiling) of `kernel` for an input of `shape`
    (N, C, spatial...) with the kernel's attributes `attrs` (the op table's defaults for those not given); only the
    sizes are used, so they may exceed what fits in memory."""
    spec = table_kernel(kernel)
    current = emulator.settings()
    return emulator.binding().fused_bias_leaky_relu_tiling(
        kernel, _input_shapes(spec, tuple(shape), has_bias), element_size,
        {a.name: a.default for a in spec.attrs} | attrs, current.platform if platform is None else platform,
        current.vector_cores if vector_cores is None else vector_cores)


def _input_shapes(spec, shape: tuple, has_bias: bool) -> list:
    """The shapes of the kernel's inputs: the data tensors (x; dy and saved) of `shape`, then the optional bias."""
    channels = shape[1] if len(shape) > 1 else 0
    return [shape if t.name != "bias" else ((channels,) if has_bias else None) for t in spec.inputs]


def _check_input(name: str, t: torch.Tensor) -> None:
    check_dtype(t)
    if t.dim() < 2:
        raise ValueError(f"{name}: expected a tensor of rank >= 2 with channels in dimension 1, got shape "
                         f"{tuple(t.shape)}")


def _check_like(name: str, t: torch.Tensor, like_name: str, like: torch.Tensor) -> None:
    if t.shape != like.shape or t.dtype != like.dtype:
        raise ValueError(f"{name}: expected {like_name}'s shape {tuple(like.shape)} and dtype {like.dtype}, got "
                         f"{tuple(t.shape)} and {t.dtype}")


def _check_bias(bias: torch.Tensor | None, like: torch.Tensor) -> None:
    if bias is not None and (bias.shape != (like.shape[1],) or bias.dtype != like.dtype):
        raise ValueError(f"bias: expected a vector of the {like.shape[1]} channels of dimension 1 in {like.dtype}, "
                         f"got shape {tuple(bias.shape)} and {bias.dtype}")


def _channel_pieces(like: torch.Tensor) -> list[tuple[int, int]]:
    """Channel ranges [c0, c1) of at most LAUNCH_BYTES each on the emulator (a single channel may be more); all the
    channels at once on an NPU."""
    n, c, s = batch_channels_spatial(tuple(like.shape))
    channel_bytes = n * s * like.element_size()
    step = c if channel_bytes == 0 or not on_emulator(like) else max(LAUNCH_BYTES // channel_bytes, 1)
    return [(c0, min(c0 + step, c)) for c0 in range(0, c, step)]


def _channels(t: torch.Tensor | None, piece: tuple[int, int], whole: bool) -> torch.Tensor | None:
    """Channels [c0, c1) of t (dim 1; a bias: dim 0), contiguous; t itself when the piece is the whole."""
    if t is None or whole:
        return t
    c0, c1 = piece
    return (t[c0:c1] if t.dim() == 1 else t[:, c0:c1]).contiguous()


def _launch(kernel: str, like: torch.Tensor, buffers: dict, **attrs) -> None:
    def tiling():  # the op package's tiling, from the launch's inputs and the kernel's attributes
        settings = emulator.settings()
        return emulator.binding().fused_bias_leaky_relu_tiling(
            kernel, [None if buffers[t.name] is None else tuple(buffers[t.name].shape)
                     for t in table_kernel(kernel).inputs],
            like.element_size(), attrs, settings.platform, settings.vector_cores)

    launch(kernel, buffers, attrs, tiling)


def fused_bias_leaky_relu(input: torch.Tensor, bias: torch.Tensor | None, negative_slope: float,
                          scale: float, clamp: float = -1.0, relu: bool = False) -> torch.Tensor:
    """leaky_relu(input + bias[c], negative_slope) * scale (relu: torch.relu in place of the LeakyReLU) over
    dimension 1 of `input` (rank >= 2), clamped to [-clamp, clamp] when clamp >= 0; bias may be None. A new
    tensor."""
    _check_input("input", input)
    _check_bias(bias, input)
    x = input.detach().contiguous()
    b = None if bias is None else bias.detach().contiguous()
    y = torch.empty_like(x)
    if x.numel() == 0:  # nothing to launch (a launch over an empty N or spatial dimension has no GM window)
        return y
    pieces = _channel_pieces(x)
    for piece in pieces:
        whole = len(pieces) == 1
        x_piece, y_piece = _channels(x, piece, whole), (y if whole else None)
        if y_piece is None:
            y_piece = torch.empty_like(x_piece)
        _launch("fused_bias_leaky_relu", x_piece,
                {"x": x_piece, "bias": _channels(b, piece, whole), "y": y_piece},
                negative_slope=negative_slope, scale=scale, clamp=clamp, relu=relu)
        if not whole:
            y[:, piece[0]:piece[1]] = y_piece
    return y


def fused_bias_leaky_relu_backward(grad_output: torch.Tensor, saved: torch.Tensor, bias: torch.Tensor | None,
                                   negative_slope: float, scale: float, saved_is_result: bool, clamp: float = -1.0,
                                   relu: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(grad_input, grad_bias): grad_input = grad_output * scale * (pre > 0 ? 1 : negative_slope) (relu: pre <= 0 ?
    +0.0 : grad_output * scale), zero where a clamp (>= 0) cut the output, and grad_bias its sum over every
    dimension but 1 (in grad_output's dtype), with pre read from `saved`, the forward's output (saved_is_result:
    needs negative_slope >= 0, scale >= 1 and no clamp) or its input (pre = saved + bias)."""
    _check_input("grad_output", grad_output)
    _check_like("saved", saved, "grad_output", grad_output)
    _check_bias(bias, grad_output)
    if saved_is_result and not (negative_slope >= 0 and scale >= 1):
        raise ValueError(f"saved_is_result: the output gives the sign of input + bias only for negative_slope >= 0 "
                         f"and scale >= 1, got negative_slope={negative_slope}, scale={scale}; save the input")
    if saved_is_result and clamp >= 0:
        raise ValueError(f"saved_is_result: a clamped output does not tell whether the output reached the bound or "
                         f"passed it (clamp={clamp}); save the input")
    dy, kept = grad_output.detach().contiguous(), saved.detach().contiguous()
    b = None if bias is None else bias.detach().contiguous()
    dx = torch.empty_like(dy)
    grad_bias = torch.empty(dy.shape[1], dtype=dy.dtype, device=dy.device)
    if dy.numel() == 0:  # no launch (as the forward); every channel sums no elements
        return dx, grad_bias.zero_()
    pieces = _channel_pieces(dy)
    for piece in pieces:
        whole = len(pieces) == 1
        dy_piece = _channels(dy, piece, whole)
        dx_piece = dx if whole else torch.empty_like(dy_piece)
        grad_bias_piece = grad_bias if whole else torch.empty(dy_piece.shape[1], dtype=dy.dtype)
        _launch("fused_bias_leaky_relu_grad", dy_piece,
                {"dy": dy_piece, "saved": _channels(kept, piece, whole), "bias": _channels(b, piece, whole),
                 "dx": dx_piece, "grad_bias": grad_bias_piece},
                negative_slope=negative_slope, scale=scale, saved_is_result=saved_is_result, clamp=clamp, relu=relu)
        if not whole:
            dx[:, piece[0]:piece[1]] = dx_piece
            grad_bias[piece[0]:piece[1]] = grad_bias_piece
    return dx, grad_bias
