"""CPU time of the reference backend's norm + activation passes (reference_batch_norm.forward / backward) against
torch's equivalent (native_batch_norm + relu / leaky_relu, and their backward through autograd), per op at the shapes
CycleGAN's and DCGAN's steps normalise, interleaved round by round: the machine may be shared, so the ratio of each
round's CPU times (process time: both threads) is the figure, its median over the rounds reported, with the wall
time's ratio and each one's best CPU time. torch's CPU time counts its OpenMP threads' spinning after each of its
ops, which ours (a thread pool that blocks) does not have.

    python benchmarks/bench_norm_passes.py                  # every case, 15 rounds
    python benchmarks/bench_norm_passes.py --cases in_relu_256 --rounds 31
    python benchmarks/bench_norm_passes.py --base OLD.py    # also an older reference_batch_norm.py, side by side

`--base` loads another copy of reference_batch_norm.py (e.g. `git show main:<path> > /tmp/old.py`) as a sibling
module, so that a change is measured against what it replaces in the same rounds; its results are checked bit for
bit against the current module's.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import time
from dataclasses import dataclass

import numpy as np
import torch

from ascend_acts.ops.conv_bn_leaky_relu import reference_batch_norm

EPS = 1e-5


@dataclass(frozen=True)
class Case:
    name: str
    shape: tuple[int, int, int, int]
    instance: bool  # InstanceNorm2d (groups = C), else BatchNorm2d
    activation: str  # "relu", "leaky" (0.2) or "none"

    @property
    def slope(self) -> float:
        return {"relu": 0.0, "leaky": 0.2, "none": 1.0}[self.activation]

    @property
    def save_output(self) -> bool:
        """What the op keeps, as the fused blocks choose: the output after an invertible LeakyReLU, else the conv
        output (then the forward centres on the mean)."""
        return self.activation == "leaky"


CASES = [
    Case("in_relu_256", (1, 64, 256, 256), True, "relu"),
    Case("in_relu_128", (1, 128, 128, 128), True, "relu"),
    Case("in_relu_64", (1, 256, 64, 64), True, "relu"),
    Case("in_none_64", (1, 256, 64, 64), True, "none"),
    Case("in_leaky_64", (1, 128, 64, 64), True, "leaky"),
    Case("in_leaky_32", (1, 256, 32, 32), True, "leaky"),
    Case("bn_relu_16", (64, 128, 16, 16), False, "relu"),
    Case("bn_leaky_16", (64, 128, 16, 16), False, "leaky"),
    Case("bn_relu_8", (64, 256, 8, 8), False, "relu"),
    Case("bn_leaky_8", (64, 256, 8, 8), False, "leaky"),
]


def load_module(path: str):
    """Another reference_batch_norm.py as a sibling module (its relative imports resolve as the current one's)."""
    spec = importlib.util.spec_from_file_location("ascend_acts.ops.conv_bn_leaky_relu._bench_base", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Ours:
    """forward and backward of one reference_batch_norm module on a case, on the op's arrays."""

    def __init__(self, module, case: Case, y: torch.Tensor, grad: torch.Tensor):
        self.module, self.case = module, case
        n, c = case.shape[:2]
        self.groups = c if case.instance else 0
        self.y0 = y.numpy()
        self.y = self.y0.copy()
        self.out = self.y if case.save_output else np.empty_like(self.y)  # the op's: in place where y is not kept
        self.gamma, self.beta = np.ones(c, np.float32), np.zeros(c, np.float32)
        if not case.instance:  # BatchNorm's affine parameters after some training
            rng = np.random.default_rng(1)
            self.gamma = rng.uniform(0.5, 1.5, c).astype(np.float32)
            self.beta = rng.uniform(-0.2, 0.2, c).astype(np.float32)
        self.grad = grad.numpy()
        self.grad_y = np.empty_like(self.grad)
        self.forward()
        self.saved = self.out.copy() if case.save_output else self.y0

    def forward(self):
        np.copyto(self.y, self.y0)
        return self._forward()

    def _forward(self):
        case = self.case
        self.stats = self.module.forward(self.y, self.gamma, self.beta, EPS, case.slope, self.out,
                                         case.activation == "relu", self.groups,
                                         centre_on_mean=not case.save_output)
        return self.out

    def backward(self):
        case = self.case
        mean, invstd = self.stats[:2]
        self.grads = self.module.backward(self.grad, self.saved, case.save_output, self.gamma, self.beta, mean,
                                          invstd, case.slope, self.grad_y, case.activation == "relu", self.groups)
        return self.grad_y


class Torch:
    """torch's modules' computation: native_batch_norm (instance norm on the (1, N*C, H, W) view, as F.instance_norm
    runs it), the activation in place (nn.ReLU(True) / nn.LeakyReLU(0.2, True)); backward through autograd."""

    def __init__(self, case: Case, y: torch.Tensor, grad: torch.Tensor):
        self.case, self.y, self.grad = case, y, grad
        n, c, h, w = case.shape
        self.norm = torch.nn.InstanceNorm2d(c) if case.instance else torch.nn.BatchNorm2d(c)
        self.leaf = y.clone().requires_grad_()
        self.graph = self._run(self.leaf)

    def _run(self, y):
        z = self.norm(y)
        if self.case.activation == "relu":
            return torch.relu_(z)
        if self.case.activation == "leaky":
            return torch.nn.functional.leaky_relu_(z, 0.2)
        return z

    def forward(self):
        with torch.no_grad():
            return self._run(self.y)

    def backward(self):
        return torch.autograd.grad(self.graph, self.leaf, self.grad, retain_graph=True)[0]


def timed(fn) -> tuple[float, float]:
    """(CPU time of the process, wall time) of fn()."""
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - cpu, time.perf_counter() - wall


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="+", default=[case.name for case in CASES])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--base", help="an older reference_batch_norm.py to measure side by side")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    base = load_module(args.base) if args.base else None
    print(f"{'case':<13} {'phase':<8} {'torch ms':>9} {'ours ms':>8} {'ours/torch':>10}"
          + (f" {'base ms':>8} {'base/torch':>10} {'ours/base':>9}" if base else ""))
    for case in (c for c in CASES if c.name in args.cases):
        generator = torch.Generator().manual_seed(0)
        y = torch.randn(case.shape, generator=generator) * 2 + 0.5
        grad = torch.randn(case.shape, generator=generator)
        impls = {"torch": Torch(case, y, grad), "ours": Ours(reference_batch_norm, case, y, grad)}
        if base:
            impls["base"] = Ours(base, case, y, grad)
            for phase in ("forward", "backward"):
                ours, old = getattr(impls["ours"], phase)(), getattr(impls["base"], phase)()
                if not np.array_equal(ours.view(np.int32), old.view(np.int32)):
                    raise SystemExit(f"{case.name} {phase}: results differ from the base module's")
            for ours, old in zip(impls["ours"].grads + impls["ours"].stats, impls["base"].grads + impls["base"].stats):
                if not np.array_equal(ours.view(np.int32), old.view(np.int32)):
                    raise SystemExit(f"{case.name}: statistics or parameter gradients differ from the base module's")
        for phase in ("forward", "backward"):
            times = {name: [] for name in impls}
            walls = {name: [] for name in impls}
            for _ in range(2):  # warm-up
                for impl in impls.values():
                    getattr(impl, phase)()
            names = list(impls)
            for index in range(args.rounds):
                # each in turn first: torch's OpenMP threads spin for a while after its op, slowing whatever follows
                for name in names[index % len(names):] + names[:index % len(names)]:
                    impl = impls[name]
                    if phase == "forward" and isinstance(impl, Ours):
                        np.copyto(impl.y, impl.y0)  # not timed: the in-place forward's input
                        cpu, wall = timed(impl._forward)
                    else:
                        cpu, wall = timed(getattr(impl, phase))
                    times[name].append(cpu)
                    walls[name].append(wall)

            def ratio(a, b, times=times):
                return statistics.median(x / y for x, y in zip(times[a], times[b]))

            best = {name: min(values) for name, values in times.items()}
            wall_ratio = statistics.median(x / y for x, y in zip(walls["ours"], walls["torch"]))

            line = (f"{case.name:<13} {phase:<8} {statistics.median(times['torch']) * 1e3:9.2f} "
                    f"{statistics.median(times['ours']) * 1e3:8.2f} {ratio('ours', 'torch'):10.3f}")
            if base:
                line += (f" {statistics.median(times['base']) * 1e3:8.2f} {ratio('base', 'torch'):10.3f}"
                         f" {ratio('ours', 'base'):9.3f}")
            line += f"   wall ours/torch {wall_ratio:.3f}; best CPU: " + " ".join(
                f"{name} {value * 1e3:.2f}" for name, value in best.items())
            print(line, flush=True)


if __name__ == "__main__":
    main()
