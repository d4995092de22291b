"""Checks shared by the tests of the fused Conv -> norm -> activation op (norm groups, padding modes, recompute):
a case is a dict of named tensors (input, weight, bias, bn_weight, bn_bias, running_mean, running_var; None where
absent) run by a callable on such a dict, ours against torch's composite."""

from __future__ import annotations

import torch


def copies(tensors, grad=True):
    """Independent copies; the differentiable ones (not the running statistics) requiring grad."""
    return {name: None if t is None else t.clone().requires_grad_() if grad and not name.startswith("running")
            else t.clone() for name, t in tensors.items()}


def differentiable(tensors):
    return [t for name, t in tensors.items() if t is not None and not name.startswith("running")]


def assert_close(ours, theirs, dtype):
    tolerance = {torch.float64: 1e-10, torch.float32: 2e-4}[dtype]
    torch.testing.assert_close(ours.double(), theirs.double(), rtol=tolerance, atol=tolerance)


def assert_run_as_torch(ours, theirs, tensors, dtype):
    """Output, every gradient (input, conv weight and bias, norm weight and bias) and the running statistics of
    `ours` against `theirs` (callables on a case's copies); returns the copies `ours` ran on."""
    mine, reference = copies(tensors), copies(tensors)
    out, want = ours(mine), theirs(reference)
    assert out.shape == want.shape and out.dtype == want.dtype
    assert_close(out, want, dtype)
    grad = torch.randn_like(want)
    for got, expected in zip(torch.autograd.grad(out, differentiable(mine), grad),
                             torch.autograd.grad(want, differentiable(reference), grad)):
        assert_close(got, expected, dtype)
    for name in ("running_mean", "running_var"):
        if tensors[name] is not None:
            assert_close(mine[name], reference[name], dtype)
    return mine


def assert_compiled_as_eager(train, tensors):
    """torch.compile(fullgraph=True) of `train` (a training call on a case) against eager: output, gradients and
    running statistics."""
    eager, compiled = copies(tensors), copies(tensors)
    want = train(eager)
    got = torch.compile(train, fullgraph=True, backend="aot_eager")(compiled)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    for ours, theirs in zip(torch.autograd.grad(got.square().sum(), differentiable(compiled)),
                            torch.autograd.grad(want.square().sum(), differentiable(eager))):
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
    for name in ("running_mean", "running_var"):
        if tensors[name] is not None:
            torch.testing.assert_close(compiled[name], eager[name])


def assert_gradient_penalty_as_torch(runs, tensors, dtype):
    """WGAN-GP through the block's double backward: the penalty and its gradient w.r.t. every differentiable tensor,
    for each of `runs` (ours, torch's). A per-sample norm's statistics cancel the conv bias: torch's graph does not
    reach it (a zero gradient)."""
    results = []
    for run in runs:
        t = copies(tensors)
        (grad_input,) = torch.autograd.grad(run(t).sum(), t["input"], create_graph=True)
        penalty = (grad_input.flatten(1).norm(dim=1) - 1).pow(2).mean()
        results.append([penalty, *torch.autograd.grad(penalty, differentiable(t), allow_unused=True,
                                                       materialize_grads=True)])
    for ours, theirs in zip(*results):
        assert_close(ours, theirs, dtype)


def assert_forward_mode_as_torch(runs, tensors, dtype):
    """torch.func.jvp of each of `runs` (ours, torch's) w.r.t. every differentiable tensor, random tangents."""
    names = [name for name, t in tensors.items() if t is not None and not name.startswith("running")]
    primals = tuple(differentiable(tensors))
    tangents = tuple(torch.randn_like(t) for t in primals)
    results = []
    for run in runs:
        def function(*values, run=run):
            return run(dict(copies(tensors, grad=False), **dict(zip(names, values))))

        results.append(torch.func.jvp(function, primals, tangents))
    for ours, theirs in zip(*results):
        assert_close(ours, theirs, dtype)


def assert_compiled_and_exported_as_eager(train, evaluate, tensors):
    """assert_compiled_as_eager of `train`; torch.export of `evaluate` (a call without running statistics) with a
    dynamic batch."""
    assert_compiled_as_eager(train, tensors)

    class Block(torch.nn.Module):
        def forward(self, x):
            t = dict(copies(tensors, grad=False), input=x)
            t["running_mean"] = t["running_var"] = None
            return evaluate(t)

    x = tensors["input"]
    program = torch.export.export(Block(), (x,), dynamic_shapes=({0: torch.export.Dim("batch")},))
    wider = torch.cat([x, x * 0.5])
    torch.testing.assert_close(program.module()(wider), Block()(wider), rtol=1e-5, atol=1e-5)
