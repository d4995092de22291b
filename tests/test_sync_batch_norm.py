"""Synchronised BatchNorm in the fused Conv+BN+LeakyReLU block (issue 15).

Two and three gloo processes on 127.0.0.1 (distributed_run.py, scenarios in sync_bn_scenarios.py) against one
process running plain torch (Conv2d, BatchNorm2d, LeakyReLU) on the concatenated batch: the output, input
gradients, the parameter gradients summed over the ranks, parameters after SGD (or Adam) steps and the running
statistics, with and without DistributedDataParallel (CPU, gloo); ReLU and ConvTranspose2d (output_padding) blocks
through sync_conv_bn_leaky_relu as well. Each world size starts its workers once
(module-scoped fixtures) for all its scenarios.
"""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist
from torch import nn

import ascend_acts
import sync_bn_scenarios as scenarios
from ascend_acts import backends
from distributed_run import run
from markers import fast_only

F64, F32 = torch.float64, torch.float32
MODULE = "sync_bn_scenarios"


def _sim_wanted() -> bool:
    if backends.unavailable_reason("sim") is None:
        return True
    if os.environ.get("ASCEND_ACTS_REQUIRE_SIM") == "1":
        pytest.fail(f"backend 'sim' is required but unavailable: {backends.unavailable_reason('sim')}")
    return False


def steps(order, sizes, dtype, **kwargs):
    return ("steps", dict(order=order, sizes=sizes, dtype=dtype, **kwargs))


TWO = {
    "convert_first": steps("convert_first", [3, 1], F64),
    "sync_first": steps("sync_first", [2, 2], F64),
    "direct": steps("direct", [1, 3], F64),
    "float32": steps("convert_first", [3, 2], F32),
    "one_value_on_a_rank": steps("sync_first", [1, 2], F64, spatial=1),
    "global_count_one": ("global_count_one", dict(sizes=[1, 0])),
    "saved_output": ("saved_tensors", dict(negative_slope=0.2)),
    "saved_conv_out": ("saved_tensors", dict(negative_slope=0.0)),
    "ddp_refuses_cpu": ("ddp_refuses_cpu", {}),
    "ddp": steps("direct", [3, 1], F64, ddp=True),
    "ddp_convert_twice": steps("convert_twice", [3, 1], F64, ddp=True, architecture="discriminator",
                               optimizer="adam"),
    "ddp_sync_first": steps("sync_first", [1, 2], F64, ddp=True, architecture="discriminator"),
    "compile": steps("direct", [2, 1], F64, steps=2, compile_backend="aot_eager"),
    "generator": steps("sync_op", [3, 1], F64, spatial=3, architecture="generator"),
    "generator_float32": steps("sync_op", [2, 3], F32, spatial=3, architecture="generator"),
    # SGD: Adam would turn the rounding noise of the gradient of the conv bias before a BN into whole steps
    "generator_ddp": steps("sync_op", [1, 2], F64, spatial=3, architecture="generator", ddp=True),
    # the same generator in Sequential containers: convert fuses its synchronised ReLU and transposed runs
    "generator_converted": steps("convert_twice", [3, 1], F64, spatial=3, architecture="generator"),
    "saved_relu": ("saved_tensors_relu", dict(transposed=False)),
    "saved_relu_transposed": ("saved_tensors_relu", dict(transposed=True)),
}
THREE = {
    "empty_rank": steps("convert_first", [2, 0, 3], F64),
    "uneven_float32": steps("sync_first", [1, 2, 3], F32),
    "ddp_empty_rank": steps("convert_twice", [2, 0, 1], F64, ddp=True, architecture="discriminator",
                            optimizer="adam"),
    "subgroups": steps("convert_first", [2, 1, 3], F64, subgroups=[[0, 1], [2]]),
    "generator_empty_rank": steps("sync_op", [2, 0, 1], F64, spatial=3, architecture="generator"),
}
GENERATOR_LAYERS = ((4,), (3,), (3,))


@pytest.fixture(scope="module")
def two():
    wanted = dict(TWO)
    if _sim_wanted():
        wanted["sim"] = steps("sync_first", [2, 1], F32, backend="sim")
        wanted["sim_ddp"] = steps("sync_first", [2, 1], F32, backend="sim", ddp=True, architecture="discriminator")
    return run(2, MODULE, wanted)


@pytest.fixture(scope="module")
def three():
    return run(3, MODULE, THREE)


def results(runs, name):
    for result in runs[name]:
        if isinstance(result, Exception):
            raise result
    return runs[name]


def oracle(sizes, dtype, spatial=5, steps=2, first_momentum=None, samples=slice(None), architecture="blocks",
           optimizer="sgd"):
    """One process, torch's own modules, the concatenated batch (its `samples`)."""
    model = scenarios.plain_model(dtype, first_momentum, architecture=architecture)
    x, grad = (t[samples] for t in scenarios.data(sizes, dtype, spatial, architecture=architecture))
    out, grad_input, _ = scenarios.train(model, x, grad, steps, lambda m: None, count=False, optimizer=optimizer)
    model.eval()
    with torch.no_grad():
        eval_out = model(x)
    return {"out": out, "grad_input": grad_input, "eval_out": eval_out, **scenarios.state(model)}


def _pairs(result, expected, sizes, rank, world_size, ddp):
    per_sample = {"out": 1, "grad_input": world_size if ddp else 1, "eval_out": 1}
    for key, scale in per_sample.items():
        yield key, result[key], scenarios.rank_slice(expected[key], sizes, rank) * scale
    for key in ("grads", "params", "buffers"):
        for i, (mine, theirs) in enumerate(zip(result[key], expected[key], strict=True)):
            yield f"{key}[{i}]", mine, theirs


def _rank_part(whole, sizes, rank, world_size, ddp):
    """A single-process run's results as rank `rank` would return them."""
    part = dict(whole)
    for key, scale in (("out", 1), ("grad_input", world_size if ddp else 1), ("eval_out", 1)):
        part[key] = scenarios.rank_slice(whole[key], sizes, rank) * scale
    return part


def _relative_error(mine, theirs) -> float:
    scale = max(float(theirs.double().abs().max()) if theirs.numel() else 0.0, 1.0)
    return float((mine.double() - theirs.double()).abs().max()) / scale if theirs.numel() else 0.0


def check_against_torch(runs, name, sizes, dtype, ranks=None, ddp=False, rank_sizes=None, **oracle_kwargs):
    """float64: within 1e-10 relative of torch in float64. float32: within 8x (+1e-6) torch's own float32
    error against float64, quantity by quantity. `rank_sizes`: the batch sizes of the ranks checked, when the
    oracle runs only some `samples` of the whole batch of `sizes`. `ddp`: the input gradients are `world size` times
    torch's (the workers scale the loss so that DDP's average is the whole batch's gradient)."""
    per_rank = results(runs, name)
    expected = oracle(sizes, F64, **oracle_kwargs)
    torch_own = oracle(sizes, dtype, **oracle_kwargs) if dtype != F64 else None
    for rank in ranks if ranks is not None else range(len(per_rank)):
        result = per_rank[rank]
        assert result["out"].dtype == dtype
        sizes = rank_sizes or sizes
        pairs = _pairs(result, expected, sizes, rank, len(sizes), ddp)
        torch_pairs = _pairs(_rank_part(torch_own, sizes, rank, len(sizes), ddp), expected, sizes, rank,
                             len(sizes), ddp) if torch_own else None
        for key, mine, theirs in pairs:
            assert mine.shape == theirs.shape, (rank, key)
            error = _relative_error(mine, theirs)
            if torch_own is None:
                assert error <= 1e-10, (rank, key, error)
            else:
                _, torch_mine, _ = next(torch_pairs)
                assert error <= 8 * _relative_error(torch_mine, theirs) + 1e-6, (rank, key, error)


def check_collectives(runs, name, layers=((4,), (3,))):
    """Per training step and layer one all_gather of 2C + 1 numbers and one all_reduce of 2C; none in eval."""
    gathered = sum(2 * c + 1 for (c,) in layers)
    reduced = sum(2 * c for (c,) in layers)
    for result in results(runs, name):
        for step in result["collectives"]:
            assert step == {"all_gather": len(layers), "all_gather_numel": gathered, "all_reduce": len(layers),
                            "all_reduce_numel": reduced}
        assert result["eval_collectives"] == {}


# --- two processes -----------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", ["convert_first", "sync_first", "direct"])
def test_two_processes_equal_torch_on_the_whole_batch(two, name):
    """Both conversion orders and ConvBNLeakyReLU2d(sync=True), uneven batches, two SGD steps, then eval."""
    check_against_torch(two, name, TWO[name][1]["sizes"], F64)
    check_collectives(two, name)


@pytest.mark.slow
def test_two_processes_float32_within_torchs_own_error(two):
    check_against_torch(two, "float32", [3, 2], F32)
    check_collectives(two, "float32")


@pytest.mark.slow
def test_sim_backend(two):
    if "sim" not in two:
        pytest.skip("the emulator library is not built")
    check_against_torch(two, "sim", [2, 1], F32)
    check_collectives(two, "sim")
    check_against_torch(two, "sim_ddp", [2, 1], F32, ddp=True, architecture="discriminator")


@pytest.mark.slow
def test_one_value_per_channel_on_a_rank_is_fine_when_the_whole_batch_has_more(two):
    check_against_torch(two, "one_value_on_a_rank", [1, 2], F64, spatial=1)


@pytest.mark.slow
def test_one_value_per_channel_over_all_ranks_raises_everywhere_and_changes_nothing(two):
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        nn.BatchNorm2d(3).train()(torch.zeros(1, 3, 1, 1))  # what torch says for the whole batch
    for result in results(two, "global_count_one"):
        assert result["message"] is not None and "Expected more than 1 value per channel" in result["message"]
        assert result["unchanged"]


def _saved(result):
    big = [entry for entry in result["saved"] if entry[0] >= result["input_numel"]]
    return sorted(("output" if is_out else "input" if is_in else "other", numel) for numel, is_out, is_in in big)


@pytest.mark.slow
def test_saves_only_the_output_like_inplace_abn(two):
    """Slope > 0: the input (the convolution needs it) and the output; torch's Conv2d, SyncBatchNorm and
    LeakyReLU keep the conv output and the BN output as well (counted on their CPU equivalent BatchNorm2d,
    which saves what torch's SyncBatchNorm function saves: its input)."""
    for result in results(two, "saved_output"):
        assert _saved(result) == [("input", result["input_numel"]), ("output", result["out_numel"])]
    torch_saved = []
    block = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.LeakyReLU(0.2)).double()
    x = torch.randn(3, 2, 6, 6, dtype=F64, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: torch_saved.append(t) or t, lambda t: t):
        out = block(x)
    assert len([t for t in torch_saved if t.numel() >= out.numel()]) == 2  # conv output, BN output
    # slope 0: the output cannot give x-hat back, the conv output is kept instead (as the unsynchronised op)
    for result in results(two, "saved_conv_out"):
        assert _saved(result) == [("input", result["input_numel"]), ("other", result["out_numel"])]


@pytest.mark.slow
def test_relu_and_transposed_blocks_equal_torch_on_the_whole_batch(two):
    """ConvTranspose2d -> BN(momentum=None) -> ReLU, ConvTranspose2d (output_padding, bias) -> BN -> LeakyReLU and
    Conv2d -> BN -> ReLU, synchronised (sync_conv_bn_leaky_relu with relu / transposed): outputs, input and parameter
    gradients, parameters after SGD steps (with and without DDP), running statistics and the eval output equal
    torch's modules on the whole batch; the same two collectives per layer and step."""
    check_against_torch(two, "generator", [3, 1], F64, spatial=3, architecture="generator")
    check_collectives(two, "generator", GENERATOR_LAYERS)
    check_against_torch(two, "generator_float32", [2, 3], F32, spatial=3, architecture="generator")
    check_against_torch(two, "generator_ddp", [1, 2], F64, ddp=True, spatial=3, architecture="generator")
    check_against_torch(two, "generator_converted", [3, 1], F64, spatial=3, architecture="generator")
    check_collectives(two, "generator_converted", GENERATOR_LAYERS)  # our op's collectives: the runs fused


@pytest.mark.slow
def test_relu_keeps_the_conv_output(two):
    """ReLU is not invertible: the synchronised op keeps the conv output (and the convolution its input), as the
    unsynchronised op does, never the output as well."""
    for name in ("saved_relu", "saved_relu_transposed"):
        for result in results(two, name):
            assert _saved(result) == [("input", result["input_numel"]), ("other", result["out_numel"])], name


@pytest.mark.slow
def test_ddp_training_steps_on_the_cpu(two):
    """DistributedDataParallel (gloo, CPU) around ConvBNLeakyReLU2d(sync=True) blocks, and around a DCGAN
    discriminator (fused blocks plus standalone BatchNorm2d/1d) converted in either order, SGD and Adam, uneven
    batches: parameters, gradients, running statistics and outputs equal torch on the whole batch."""
    check_against_torch(two, "ddp", [3, 1], F64, ddp=True)
    check_against_torch(two, "ddp_convert_twice", [3, 1], F64, ddp=True, architecture="discriminator",
                        optimizer="adam")
    check_against_torch(two, "ddp_sync_first", [1, 2], F64, ddp=True, architecture="discriminator")


@pytest.mark.slow
def test_ddp_refuses_torchs_sync_batch_norm_left_by_convert_first(two):
    """convert, then convert_sync_batchnorm, puts torch's SyncBatchNorm into our blocks: they synchronise
    (test above), but torch's DDP refuses it in a CPU module at construction, loudly, until `convert` runs again."""
    assert all("SyncBatchNorm layers only work with GPU modules" in r["message"]
               for r in results(two, "ddp_refuses_cpu"))


@pytest.mark.slow
def test_torch_compile_fullgraph(two):
    """torch.compile(fullgraph=True): the collectives are traced into the graph (forward and backward), with
    momentum=None on the first block (its 1 / num_batches_tracked stays a tensor)."""
    check_against_torch(two, "compile", [2, 1], F64)


# --- three processes ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_three_processes_with_an_empty_rank(three):
    """The empty rank joins both collectives, returns an empty output and zero gradients, and updates its
    running statistics with the global ones (as torch's SyncBatchNorm)."""
    check_against_torch(three, "empty_rank", [2, 0, 3], F64)
    check_collectives(three, "empty_rank")
    assert results(three, "empty_rank")[1]["out"].shape[0] == 0


@pytest.mark.slow
def test_three_processes_uneven_float32(three):
    check_against_torch(three, "uneven_float32", [1, 2, 3], F32)


@pytest.mark.slow
def test_three_processes_ddp_with_an_empty_rank(three):
    check_against_torch(three, "ddp_empty_rank", [2, 0, 1], F64, ddp=True, architecture="discriminator",
                        optimizer="adam")


@pytest.mark.slow
def test_relu_and_transposed_blocks_with_an_empty_rank(three):
    check_against_torch(three, "generator_empty_rank", [2, 0, 1], F64, spatial=3, architecture="generator")
    check_collectives(three, "generator_empty_rank", GENERATOR_LAYERS)
    assert results(three, "generator_empty_rank")[1]["out"].shape[0] == 0


@pytest.mark.slow
def test_the_users_process_group_is_kept(three):
    """convert_sync_batchnorm(model, group) with groups {0, 1} and {2}: ranks 0 and 1 normalise over their
    two batches, rank 2 alone (a group of one: no collective)."""
    sizes = [2, 1, 3]
    check_against_torch(three, "subgroups", sizes, F64, ranks=[0, 1], samples=slice(0, 3))
    check_against_torch({"subgroups": results(three, "subgroups")[2:]}, "subgroups", sizes, F64, rank_sizes=[3],
                        samples=slice(3, 6))
    assert results(three, "subgroups")[2]["collectives"] == [{}, {}]


# --- one process (no workers) ------------------------------------------------------------------------
def _pair_of_blocks():
    torch.manual_seed(0)
    plain = ascend_acts.nn.ConvBNLeakyReLU2d(2, 4, 3, padding=1, negative_slope=0.2).double()
    synced = ascend_acts.nn.ConvBNLeakyReLU2d(2, 4, 3, padding=1, negative_slope=0.2, sync=True).double()
    synced.load_state_dict(plain.state_dict())
    return plain, synced


def _same_training_step(plain, synced):
    x = torch.randn(3, 2, 5, 5, dtype=F64)
    outs = [block(x) for block in (plain, synced)]
    torch.testing.assert_close(outs[1], outs[0], rtol=0, atol=0)
    for a, b in zip(plain.state_dict().values(), synced.state_dict().values()):
        torch.testing.assert_close(b, a, rtol=0, atol=0)


def test_without_torch_distributed_it_is_the_plain_block():
    assert not dist.is_initialized()
    _same_training_step(*_pair_of_blocks())


def test_a_world_of_one_uses_no_collective(tmp_path, monkeypatch):
    def no_collective(*args, **kwargs):
        raise AssertionError("a collective in a world of one")

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        for name in scenarios.COLLECTIVES:
            monkeypatch.setattr(dist, name, no_collective)
        _same_training_step(*_pair_of_blocks())
    finally:
        monkeypatch.undo()
        dist.destroy_process_group()


@pytest.mark.slow
@pytest.mark.parametrize("sync", [True, False])
def test_compile_fullgraph_with_momentum_none_in_a_world_of_one(tmp_path, sync):
    """momentum=None's factor 1 / num_batches_tracked is data-dependent: passing float() of it to the op broke
    the graph (fullgraph=True raised). Compiled training steps equal torch's eager modules (whose own
    BatchNorm2d(momentum=None) cannot compile with fullgraph=True in this torch)."""
    torch.manual_seed(0)
    theirs = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4, momentum=None),
                           nn.LeakyReLU(0.2)).double()
    ours = ascend_acts.nn.ConvBNLeakyReLU2d(2, 4, 3, padding=1, momentum=None, negative_slope=0.2, sync=sync).double()
    ours.load_state_dict(theirs.state_dict())
    compiled = torch.compile(ours, fullgraph=True, backend="aot_eager")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        for _ in range(3):
            x = torch.randn(3, 2, 5, 5, dtype=F64, requires_grad=True)
            outs = [compiled(x), theirs(x)]
            grads = [torch.autograd.grad(out, (x, *module.parameters()), torch.ones_like(out))
                     for out, module in zip(outs, (ours, theirs))]
            torch.testing.assert_close(outs[0], outs[1], rtol=1e-10, atol=1e-12)
            for mine, torchs in zip(*grads, strict=True):
                torch.testing.assert_close(mine, torchs, rtol=1e-10, atol=1e-12)
            for mine, torchs in zip(ours.state_dict().values(), theirs.state_dict().values(), strict=True):
                torch.testing.assert_close(mine, torchs, rtol=1e-12, atol=0)
    finally:
        dist.destroy_process_group()
    assert int(ours.bn.num_batches_tracked) == 3


@pytest.mark.parametrize("relu, transposed", fast_only([(True, False), (True, True), (False, True)], [(True, True)],
                                                      unpack=True))
def test_relu_and_transposed_without_torch_distributed_are_the_plain_op(relu, transposed):
    """No process group: sync_conv_bn_leaky_relu is conv_bn_activation with relu / transposed / output_padding, as
    torch's modules compute them (values, gradients, running statistics); a non-bool relu is refused."""
    from ascend_acts.sync_batch_norm import sync_conv_bn_leaky_relu

    assert not dist.is_initialized()
    torch.manual_seed(0)
    conv = (nn.ConvTranspose2d(2, 4, 3, 2, 1, output_padding=1) if transposed else nn.Conv2d(2, 4, 3, padding=1))
    theirs = nn.Sequential(conv, nn.BatchNorm2d(4), nn.ReLU() if relu else nn.LeakyReLU(0.2)).double()
    stats = [b.clone() for b in theirs[1].buffers()][:2]
    x = torch.randn(3, 2, 5, 5, dtype=F64, requires_grad=True)
    out = sync_conv_bn_leaky_relu(x, conv.weight, conv.bias, *stats, theirs[1].weight, theirs[1].bias, True, 0.1,
                                  1e-5, 0.2, conv.stride, conv.padding, conv.dilation, conv.groups, relu=relu,
                                  transposed=transposed, output_padding=conv.output_padding if transposed else 0)
    expected = theirs(x)
    params = (x, conv.weight, conv.bias, theirs[1].weight, theirs[1].bias)
    grads = [torch.autograd.grad(y, params, torch.ones_like(y)) for y in (out, expected)]
    torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-12)
    for mine, torchs in zip(*grads, strict=True):
        torch.testing.assert_close(mine, torchs, rtol=1e-10, atol=1e-12)
    for mine, torchs in zip(stats, [theirs[1].running_mean, theirs[1].running_var], strict=True):
        torch.testing.assert_close(mine, torchs, rtol=1e-12, atol=0)
    with pytest.raises(TypeError, match="argument 'relu' must be a bool"):
        sync_conv_bn_leaky_relu(x, conv.weight, relu=1)


def test_the_direct_api_checks_its_arguments():
    with pytest.raises(ValueError, match="'process_group' needs sync=True"):
        ascend_acts.nn.ConvBNLeakyReLU2d(2, 4, 3, process_group=object())
    conv, bn = nn.Conv2d(2, 4, 3), nn.SyncBatchNorm(4)
    assert ascend_acts.nn.ConvBNLeakyReLU2d.from_modules(conv, bn, nn.LeakyReLU()).bn is bn


@pytest.mark.slow
def test_dcgan_example_with_two_processes(tmp_path):
    """examples/dcgan.py --nproc 2: two gloo workers, the discriminator's block synchronised; rank 0 writes."""
    pytest.importorskip("sklearn", reason="the DCGAN example needs pip install -e '.[examples]'")
    import socket
    import subprocess
    import sys
    from pathlib import Path

    with socket.socket() as probe:  # a free port on 127.0.0.1 for the rendezvous
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    root = Path(__file__).resolve().parents[1]
    result = subprocess.run([sys.executable, str(root / "examples/dcgan.py"), "--quick", "--quiet", "--nproc", "2",
                             "--port", str(port), "--out", str(tmp_path)], cwd=root, capture_output=True, text=True,
                            timeout=400)
    assert result.returncode == 0, result.stderr
    assert "on 2 process(es)" in result.stdout
    assert (tmp_path / "checkpoint.pt").is_file()
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=False)["discriminator"]
    assert int(state["2.1.num_batches_tracked"]) == 3 * 3  # per step: real, fake (D step), fake (G step)


# --- ascend_acts.nn.SyncBatchNorm: the class, its state and `convert` (one process) -----------------------
def _torch_sync_model(process_group=None):
    model = scenarios.plain_model(F64, architecture="discriminator")
    return nn.SyncBatchNorm.convert_sync_batchnorm(model, process_group)


def _randomised_state(model):
    torch.manual_seed(3)
    with torch.no_grad():
        for name, t in model.state_dict().items():
            t.copy_(torch.randint(1, 9, ()) if name.endswith("num_batches_tracked") else torch.rand_like(t) + 0.5)
    return {name: t.clone() for name, t in model.state_dict().items()}


def _torch_models(architecture):
    """torch's BatchNorm model and its convert_sync_batchnorm (torch.nn.SyncBatchNorm) version."""
    return (scenarios.plain_model(F64, architecture=architecture),
            nn.SyncBatchNorm.convert_sync_batchnorm(scenarios.plain_model(F64, architecture=architecture)))


def _direct_block():
    return ascend_acts.nn.ConvBNLeakyReLU2d(2, 4, 3, sync=True).double()


def _torch_blocks():
    return [nn.Sequential(nn.Conv2d(2, 4, 3, bias=False), bn, nn.LeakyReLU()).double()
            for bn in (nn.BatchNorm2d(4), nn.SyncBatchNorm(4))]


@pytest.mark.parametrize("ours, theirs", [
    (lambda: scenarios.model_variant("sync_first", F64, architecture="discriminator"),
     lambda: _torch_models("discriminator")),
    (lambda: scenarios.model_variant("convert_twice", F64, architecture="discriminator"),
     lambda: _torch_models("discriminator")),
    (_direct_block, _torch_blocks)], ids=["sync_first", "convert_twice", "direct"])
def test_state_dicts_load_both_ways_between_torch_and_converted_models(ours, theirs):
    """Same keys, shapes and dtypes as torch's BatchNorm2d/1d and SyncBatchNorm models: strict loads both ways."""
    ours = ours()
    assert any(type(m) is ascend_acts.nn.SyncBatchNorm for m in ours.modules())
    assert not any(isinstance(m, nn.SyncBatchNorm) for m in ours.modules())
    for torch_model in theirs():
        saved = _randomised_state(torch_model)
        ours.load_state_dict(saved, strict=True)
        mine = ours.state_dict()
        assert list(mine) == list(saved)
        for name, t in saved.items():
            assert mine[name].dtype == t.dtype and torch.equal(mine[name], t), name
        mine = _randomised_state(ours)
        torch_model.load_state_dict(mine, strict=True)
        for name, t in torch_model.state_dict().items():
            assert torch.equal(t, mine[name]), name


def test_convert_swaps_torchs_sync_batch_norm_in_place_keeping_its_process_group():
    group = object()  # convert only carries it; the forward would use it
    model = _torch_sync_model(group)
    torch_bns = [m for m in model.modules() if isinstance(m, nn.SyncBatchNorm)]
    hook = torch_bns[0].register_forward_hook(lambda *args: None)
    parameters, buffers = list(model.parameters()), list(model.buffers())
    assert ascend_acts.convert(model) is model
    assert [type(m) for m in torch_bns] == [ascend_acts.nn.SyncBatchNorm] * 4
    assert all(m.process_group is group for m in torch_bns)
    assert all(mine is theirs for mine, theirs in zip(model.parameters(), parameters, strict=True))
    assert all(mine is theirs for mine, theirs in zip(model.buffers(), buffers, strict=True))
    assert hook.id in torch_bns[0]._forward_hooks
    # either order ends in ours: convert_sync_batchnorm on a converted model puts torch's back, convert again swaps
    again = nn.SyncBatchNorm.convert_sync_batchnorm(model, group)
    assert sum(type(m) is nn.SyncBatchNorm for m in again.modules()) == 4
    ascend_acts.convert(again)
    assert sum(type(m) is ascend_acts.nn.SyncBatchNorm for m in again.modules()) == 4
    assert ascend_acts.nn.ConvBNLeakyReLU2d(2, 4, 3, sync=True, process_group=group).bn.process_group is group


@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 7), (3, 3, 4, 5)])
@pytest.mark.parametrize("momentum", [0.1, None])
def test_standalone_in_a_world_of_one_is_torchs_batch_norm(tmp_path, shape, momentum):
    """Where torch's SyncBatchNorm raises on the CPU ("expected input tensor to be on GPU"), ours is
    BatchNorm (a world of one needs no collective), 2-D to 4-D inputs like torch's."""
    x = torch.randn(*shape, dtype=F64, requires_grad=True)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        with pytest.raises(ValueError, match="SyncBatchNorm expected input tensor to be on GPU"):
            nn.SyncBatchNorm(3).double()(x)
        torch_bn = (nn.BatchNorm1d if len(shape) < 4 else nn.BatchNorm2d)(3, momentum=momentum).double()
        ours = ascend_acts.nn.SyncBatchNorm(3, momentum=momentum).double()
        for _ in range(2):
            outs = [bn(x) for bn in (torch_bn, ours)]
            grads = [torch.autograd.grad(out, x, torch.ones_like(out))[0] for out in outs]
            torch.testing.assert_close(outs[1], outs[0], rtol=0, atol=0)
            torch.testing.assert_close(grads[1], grads[0], rtol=0, atol=0)
        for mine, theirs in zip(ours.state_dict().values(), torch_bn.state_dict().values(), strict=True):
            torch.testing.assert_close(mine, theirs, rtol=0, atol=0)
    finally:
        dist.destroy_process_group()


def test_standalone_bad_input_raises_like_torch_and_changes_nothing():
    bn = ascend_acts.nn.SyncBatchNorm(3)
    with pytest.raises(ValueError, match=r"expected at least 2D input \(got 1D input\)"):
        bn(torch.zeros(3))
    with pytest.raises(ValueError, match="number of input channels should be non-zero"):
        ascend_acts.nn.SyncBatchNorm(0)(torch.zeros(2, 0))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        bn(torch.zeros(1, 3))
    assert int(bn.num_batches_tracked) == 0 and torch.equal(bn.running_var, torch.ones(3))


def test_the_synchronised_standalone_function_checks_before_communicating():
    """Checked before the collective (no group is touched: None here would fail in it), with F.batch_norm's
    error types."""
    from ascend_acts.sync_batch_norm import sync_batch_norm

    x = torch.randn(4, 3, 2, dtype=F64)
    stats = (torch.zeros(3, dtype=F64), torch.ones(3, dtype=F64))
    with pytest.raises(NotImplementedError, match="'input' must be a floating-point tensor"):
        sync_batch_norm(x.int(), *stats, None, None, 0.1, 1e-5, None)
    with pytest.raises(RuntimeError, match="'weight' must have the input's dtype"):
        sync_batch_norm(x, *stats, torch.ones(3), None, 0.1, 1e-5, None)
    with pytest.raises(RuntimeError, match=r"'running_var' must have shape \(3,\)"):
        sync_batch_norm(x, stats[0], torch.ones(4, dtype=F64), None, None, 0.1, 1e-5, None)
    with pytest.raises(RuntimeError, match="mixed dtype"):  # what torch says for the weight above
        nn.functional.batch_norm(x, *stats, torch.ones(3), None, True)
    assert torch.equal(stats[0], torch.zeros(3, dtype=F64)) and torch.equal(stats[1], torch.ones(3, dtype=F64))
