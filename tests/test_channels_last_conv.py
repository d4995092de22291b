"""The platform's transposed convolution through channels_last (ops/conv_bn_leaky_relu/channels_last.py): taken only
where it applies, torch's values bit for bit there, and a converted generator block that takes it (forward and the
backward's recomputation) trains as the torch block does."""

import copy

import pytest
import torch
import torch.nn.functional as F

import ascend_acts
from ascend_acts.numerics import compiled
from ascend_acts.ops.conv_bn_leaky_relu import channels_last
from ascend_acts.ops.conv_bn_leaky_relu.torch_ops import conv2d as platform_conv2d

with torch.no_grad():
    _TAKEN_HERE = channels_last.applies(torch.zeros(1, 8, 64, 64), torch.zeros(8, 1, 2, 2), None, (2, 2), (0, 0),
                                        (0, 0), 1, (1, 1))
pytestmark = pytest.mark.skipif(not _TAKEN_HERE, reason="the channels_last route is not taken here (not x86-64, or "
                                                         "ascend_acts._cpu not built)")

# (input shape, weight shape, stride, padding, output_padding, groups, dilation): the ResNet / U-Net generator's
# upsampling (k 3, stride 2, output_padding 1), pix2pix's k 4, odd sizes, stride 3
CASES = [((1, 16, 64, 64), (16, 8, 3, 3), 2, 1, 1, 1, 1),
         ((2, 8, 64, 64), (8, 4, 4, 4), 2, 1, 0, 1, 1),
         ((1, 8, 70, 65), (8, 3, 3, 3), 2, 1, 1, 1, 1),
         ((1, 8, 43, 50), (8, 3, 3, 3), 3, 1, 2, 1, 1)]


def _arguments(case, seed=0):
    shape, weight_shape, stride, padding, output_padding, groups, dilation = case
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=generator)
    w = torch.randn(weight_shape[0], weight_shape[1], *weight_shape[2:], generator=generator)
    b = torch.randn(weight_shape[1] * groups, generator=generator)
    return x, w, b, (stride,) * 2, (padding,) * 2, (output_padding,) * 2, groups, (dilation,) * 2


def _platform(x, w, b, stride, padding, output_padding, groups, dilation):
    return platform_conv2d(x, w, b, stride, (padding[0],) * 2 + (padding[1],) * 2, dilation, groups, True,
                           output_padding, layout_route=True)


@pytest.mark.parametrize("case", CASES)
def test_the_channels_last_route_gives_torchs_values_bit_for_bit(case):
    x, w, b, stride, padding, output_padding, groups, dilation = _arguments(case)
    with torch.no_grad():
        assert channels_last.applies(x, w, b, stride, padding, output_padding, groups, dilation)
        ours = _platform(x, w, b, stride, padding, output_padding, groups, dilation)
    expected = F.conv_transpose2d(x, w, b, stride, padding, output_padding, groups, dilation)
    assert ours.is_contiguous() and ours.shape == expected.shape
    assert torch.equal(ours.view(torch.int32), expected.view(torch.int32))


def test_applies_only_to_ungrouped_undilated_float32_cpu_upsamplings_to_large_planes(monkeypatch):
    x, w, b, stride, padding, output_padding, _, dilation = _arguments(CASES[0])
    geometry = (stride, padding, output_padding)
    with torch.no_grad():
        assert channels_last.applies(x, w, b, *geometry, 1, dilation)
        assert channels_last.applies(x, w, None, *geometry, 1, dilation)
        assert not channels_last.applies(x[..., :63, :63], w, b, *geometry, 1, dilation)  # 126 x 126 outputs
        assert not channels_last.applies(x, w, b, (1, 2), *geometry[1:], 1, dilation)  # not an upsampling
        assert not channels_last.applies(x, w, b, *geometry, 1, (2, 2))  # dilated: other bits (oneDNN's order)
        assert not channels_last.applies(x, w[:, :4], b, *geometry, 2, dilation)  # grouped: other bits
        assert not channels_last.applies(x[:, :5], w[:5], b, *geometry, 1, dilation)  # 5 channels: other bits
        assert not channels_last.applies(x.double(), w.double(), b.double(), *geometry, 1, dilation)
        assert not channels_last.applies(x[:0], w, b, *geometry, 1, dilation)
    assert not channels_last.applies(x.requires_grad_(), w, b, *geometry, 1, dilation)  # autograd records it
    with torch.no_grad():
        monkeypatch.setenv(compiled.NUMPY_PASSES, "1")  # no module: no transpose
        assert not channels_last.applies(x.detach(), w, b, *geometry, 1, dilation)


class _Passing(torch.utils._python_dispatch.TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("context", ["grad", "autocast", "dispatch mode", "default device"])
def test_nothing_that_records_or_recasts_the_call_sees_the_opaque_transpose(context):
    """Autograd, autocast, Python modes (a tracer's), a default-device context: the call takes torch's path, with
    torch's result (under autocast its bfloat16 one; an opaque transpose into a bfloat16 buffer wrote past it)."""
    x, w, b, *geometry = _arguments(CASES[0])
    contexts = {"grad": torch.enable_grad, "autocast": lambda: torch.autocast("cpu", torch.bfloat16),
                "dispatch mode": _Passing, "default device": lambda: torch.device("meta")}
    with torch.no_grad(), contexts[context]():
        assert not channels_last._nothing_records()
        taken = []
        original = channels_last.conv_transpose2d
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(channels_last, "conv_transpose2d", lambda *a: taken.append(1) or original(*a))
            ours = _platform(x, w, b, *geometry)
        expected = F.conv_transpose2d(x, w, b, *geometry[:3], geometry[3], geometry[4])
    assert not taken and ours.device.type == "cpu"
    assert ours.dtype == expected.dtype and torch.equal(ours, expected)


def test_a_compiled_call_takes_torchs_path():
    """Under torch.compile the opaque transpose would leave the empty output in the graph."""
    x, w, b, *geometry = _arguments(CASES[0])

    def upsample(x, w, b):
        return _platform(x, w, b, *geometry)

    with torch.no_grad():
        compiled_result = torch.compile(upsample, backend="eager", fullgraph=False)(x, w, b)
    assert torch.equal(compiled_result, F.conv_transpose2d(x, w, b, *geometry[:3], geometry[3], geometry[4]))


def _train_step(model, x):
    x = x.clone().requires_grad_()
    with ascend_acts.use_backend("reference"):
        out = model(x)
        out.square().sum().backward()
    return [out, x.grad] + [p.grad for p in model.parameters()]


@pytest.mark.parametrize("norm", ["instance", "batch"])
def test_a_converted_upsampling_block_that_takes_it_trains_as_torchs(monkeypatch, norm):
    """ConvTranspose2d(k 3, stride 2) -> norm -> ReLU with 128 x 128 outputs: the op's forward and the backward's
    recomputation of the conv output (recompute: K = 8 * 9 / 4) take the channels_last route; the results are, bit for
    bit, those of torch's NCHW route, and as close to the float64 model's as torch's float32 ones (within 2x)."""
    torch.manual_seed(0)
    layer = torch.nn.InstanceNorm2d(6, affine=True) if norm == "instance" else torch.nn.BatchNorm2d(6)
    model = torch.nn.Sequential(torch.nn.ConvTranspose2d(8, 6, 3, 2, 1, output_padding=1), layer, torch.nn.ReLU(True))
    x = torch.randn(1, 8, 64, 64)
    converted = ascend_acts.convert(copy.deepcopy(model))
    assert "recomputes the conv output" in ascend_acts.explain(converted, x)[0].reason
    taken = []
    transpose = channels_last.conv_transpose2d
    monkeypatch.setattr(channels_last, "conv_transpose2d", lambda *a: taken.append(1) or transpose(*a))
    ours = _train_step(converted, x)
    assert len(taken) == 2  # the forward's convolution and the backward's recomputation
    monkeypatch.setattr(channels_last, "_MEASURED_CPU", False)
    nchw = _train_step(ascend_acts.convert(copy.deepcopy(model)), x)
    assert len(taken) == 2
    torchs = _train_step(copy.deepcopy(model), x)
    exact = _train_step(copy.deepcopy(model).double(), x.double())
    for a, b, t, e in zip(ours, nchw, torchs, exact):
        assert torch.equal(a, b)
        error, torch_error = ((v.double() - e).abs().max().item() for v in (a, t))
        assert error <= 2 * torch_error + 1e-6 * e.abs().max().item()


def test_a_backward_inside_autocast_recomputes_as_the_forward_computed():
    """The backward's recomputation of a fused block's conv output runs as the op's kernel did, in float32, whether or
    not the backward is called inside an autocast region (it recomputed in bfloat16 there, and the channels_last route
    wrote a float32 transpose into a bfloat16 buffer)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.ConvTranspose2d(16, 8, 3, 2, 1, output_padding=1), torch.nn.BatchNorm2d(8),
                                torch.nn.ReLU(True))
    x = torch.randn(2, 16, 64, 64)
    grads = []
    for inside in (False, True):
        converted = ascend_acts.convert(copy.deepcopy(model))
        with ascend_acts.use_backend("reference"), torch.autocast("cpu", torch.bfloat16):
            loss = converted(x).float().square().sum()
            if inside:
                loss.backward()
        if not inside:
            loss.backward()
        grads.append([p.grad for p in converted.parameters()])
    for outside, inside in zip(*grads):
        assert torch.equal(outside, inside)



def test_the_layout_benchmark_times_both_routes_and_checks_their_bits(capsys):
    """benchmarks/bench_conv_transpose_layout.py runs (one small case, one round): the table the rule's threshold
    comes from; it stops if the route's values differ from torch's."""
    import sys
    from pathlib import Path

    benchmarks = str(Path(__file__).resolve().parents[1] / "benchmarks")
    sys.path.insert(0, benchmarks)
    threads = torch.get_num_threads()
    try:
        import bench_conv_transpose_layout

        bench_conv_transpose_layout.main(["--cases", "pix2pix_up_128", "dcgan_up_16", "--rounds", "1"])
    finally:
        sys.path.remove(benchmarks)
        torch.set_num_threads(threads)
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert [(row[0], row[-6]) for row in rows] == [("pix2pix_up_128", "yes"), ("dcgan_up_16", "no")]
