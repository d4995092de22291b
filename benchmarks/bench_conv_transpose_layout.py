"""Wall time of the platform's transposed convolution on the CPU two ways, interleaved round by round: torch's
(F.conv_transpose2d on NCHW tensors) and the channels_last route (ops/conv_bn_leaky_relu/channels_last.py: the
weight as channels_last, oneDNN's channels_last result transposed to NCHW by cpu_kernel/layout.cpp), at the
upsamplings of CycleGAN's and pix2pix's generators (batch 1, planes up to 256 x 256) and of DCGAN's (batch 64, small
planes), whether or not the route's rule takes them; the results are checked bit for bit. Also the NHWC -> NCHW
copy alone: torch's .contiguous() against the module's transpose. The rule's threshold (channels_last.MIN_PLANE)
comes from this table.

    python benchmarks/bench_conv_transpose_layout.py               # every case, 9 rounds
    python benchmarks/bench_conv_transpose_layout.py --cases cyclegan_up2 --rounds 21
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ascend_acts.numerics import compiled
from ascend_acts.ops.conv_bn_leaky_relu import channels_last


@dataclass(frozen=True)
class Case:
    name: str
    input: tuple[int, int, int, int]
    out_channels: int
    kernel: int
    output_padding: int  # stride 2, padding 1 throughout


CASES = [
    Case("cyclegan_up1", (1, 256, 64, 64), 128, 3, 1),
    Case("cyclegan_up2", (1, 128, 128, 128), 64, 3, 1),
    Case("pix2pix_up_128", (1, 128, 64, 64), 64, 4, 0),
    Case("pix2pix_up_256", (1, 128, 128, 128), 64, 4, 0),
    Case("dcgan_up_16", (64, 256, 8, 8), 128, 4, 0),
    Case("dcgan_up_32", (64, 128, 16, 16), 64, 4, 0),
]


def _wall(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def _interleaved(functions: dict, rounds: int) -> dict:
    """Median wall time of each function over `rounds` rounds, each function first in turn (torch's OpenMP threads
    spin for a while after its op, slowing whatever follows)."""
    for function in functions.values():  # warm-up
        function()
    names, times = list(functions), {name: [] for name in functions}
    for index in range(rounds):
        for name in names[index % len(names):] + names[:index % len(names)]:
            times[name].append(_wall(functions[name]))
    return {name: statistics.median(values) for name, values in times.items()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="+", default=[c.name for c in CASES], choices=[c.name for c in CASES])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    if compiled.module() is None:
        raise SystemExit("ascend_acts._cpu is not built (or ASCEND_ACTS_NUMPY_PASSES=1): no transpose to measure")
    torch.set_num_threads(args.threads)
    print(f"{'case':<15} {'output':<18} {'rule':<5} {'torch ms':>9} {'route ms':>9} {'route/torch':>11}"
          f" {'copy: torch ms':>14} {'ours ms':>8}")
    for case in (c for c in CASES if c.name in args.cases):
        print(_measure(case, args.rounds), flush=True)


def _measure(case: Case, rounds: int) -> str:
    """The case's table row."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(case.input, generator=generator)
    w = torch.randn(case.input[1], case.out_channels, case.kernel, case.kernel, generator=generator)
    b = torch.randn(case.out_channels, generator=generator)
    geometry = ((2, 2), (1, 1), (case.output_padding,) * 2)
    expected = F.conv_transpose2d(x, w, b, *geometry)
    routed = channels_last.conv_transpose2d(x, w, b, *geometry, 1, (1, 1))
    if not torch.equal(routed.view(torch.int32), expected.view(torch.int32)):
        raise SystemExit(f"{case.name}: the channels_last route's values differ from torch's")
    with torch.no_grad():
        taken = channels_last.applies(x, w, b, *geometry, 1, (1, 1))
    times = _interleaved({"torch": lambda: F.conv_transpose2d(x, w, b, *geometry),
                          "route": lambda: channels_last.conv_transpose2d(x, w, b, *geometry, 1, (1, 1))}, rounds)
    nhwc = expected.contiguous(memory_format=torch.channels_last)
    out = torch.empty(expected.shape)
    n, c, h, width = expected.shape
    copies = _interleaved({"torch": nhwc.contiguous,
                           "ours": lambda: compiled.module().transpose(nhwc.data_ptr(), out.data_ptr(), n, h * width,
                                                                       c)}, rounds)
    return (f"{case.name:<15} {str(tuple(expected.shape)):<18} {'yes' if taken else 'no':<5}"
            f" {times['torch'] * 1e3:9.2f} {times['route'] * 1e3:9.2f} {times['route'] / times['torch']:11.3f}"
            f" {copies['torch'] * 1e3:14.2f} {copies['ours'] * 1e3:8.2f}")

if __name__ == "__main__":
    main()
