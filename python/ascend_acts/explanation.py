"""`ascend_acts.explain(model, *inputs)` (this module has another name, so that the function does not hide it):
which Conv -> Norm -> activation runs among a model's nn.Sequential children `convert` fuses, why the others are not,
and the activation memory each keeps for backward with and without it.

The model runs once on a converted deep copy and once on an unconverted one (the original, its parameters, buffers,
their version counters and the CPU random state are left as they were). Whether a run fuses is what the converted
copy's Sequential decided while running (nn/fusion.py's `decide`, heard through `fusion.listener`), so explain
cannot disagree with what runs. The bytes are measured, not computed: every tensor autograd saves during a run's
modules (torch.autograd.graph.saved_tensors_hooks), each storage counted once, parameters and buffers left out; a
run's row counts the saved storages the run produced (its input is the previous layer's), the total row every saved
storage of the forward.
"""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from .conversion import convert
from .nn import Sequential as FusingSequential
from .nn import fusion

__all__ = ["explain", "Explanation", "Run"]

_CONVS = (nn.Conv2d, nn.ConvTranspose2d, nn.Conv1d, nn.Linear)
_NORMS = (nn.modules.batchnorm._BatchNorm, nn.modules.instancenorm._InstanceNorm, nn.GroupNorm)
_ACTIVATIONS = (nn.LeakyReLU, nn.ReLU)
# a pad right before the conv belongs to the run (the fused op may apply it): every torch pad module
_PADS = (nn.modules.padding._ConstantPadNd, nn.modules.padding._ReflectionPadNd,
         nn.modules.padding._ReplicationPadNd, nn.modules.padding._CircularPadNd)


@dataclass(frozen=True)
class Run:
    """One (Pad ->) Conv -> Norm (-> activation) run: `path` the Sequential and child indices (`main[3:6]`), `pattern`
    the modules' classes, `fused` whether its conv and norm ran as the fused op, `reason` why not (or what of the run
    was left out), and the bytes of the activations it produced that are kept for backward (by any module) in torch
    and once converted (None: the run did not execute)."""
    path: str
    pattern: str
    fused: bool
    reason: str
    saved_bytes_torch: int | None
    saved_bytes_converted: int | None


class Explanation:
    """The runs `explain` found, in module order: iterable, indexable, and printable as an aligned table."""

    def __init__(self, runs: list[Run], saved_bytes_torch: int, saved_bytes_converted: int):
        self.runs = runs
        self.saved_bytes_torch = saved_bytes_torch  # the whole forward's, every module's
        self.saved_bytes_converted = saved_bytes_converted

    def __iter__(self):
        return iter(self.runs)

    def __len__(self) -> int:
        return len(self.runs)

    def __getitem__(self, index):
        return self.runs[index]

    def __str__(self) -> str:
        header = ("module", "pattern", "fused", "why not / note", "kept (torch)", "kept (converted)")
        rows = [(r.path, r.pattern, "yes" if r.fused else "no", r.reason or "-", _size(r.saved_bytes_torch),
                 _size(r.saved_bytes_converted)) for r in self.runs]
        rows.append(("whole forward", "", f"{sum(r.fused for r in self.runs)}/{len(self.runs)}", "",
                     _size(self.saved_bytes_torch), _size(self.saved_bytes_converted)))
        widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
        right = {4, 5}

        def line(row):
            return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))

        return "\n".join([line(header), line(tuple("-" * w for w in widths)), *map(line, rows)]).rstrip()

    def __repr__(self) -> str:
        return f"Explanation({len(self.runs)} runs, {sum(r.fused for r in self.runs)} fused)\n{self}"


def _size(count: int | None) -> str:
    if count is None:
        return "not run"
    for unit in ("B", "KiB", "MiB"):
        if count < 1024 or unit == "MiB":
            return f"{count} B" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class _Found:
    container: str   # the Sequential's path in the model
    start: int       # the first module's index: the pad's, or the conv's
    stop: int        # one past the last module of the run
    pad: int | None
    conv: int
    norm: int
    activation: int | None
    pattern: str

    @property
    def path(self) -> str:
        return f"{self.container or '<model>'}[{self.start}:{self.stop}]"


def _find_runs(path: str, children: list[nn.Module]) -> list[_Found]:
    """(Pad ->) Conv -> Norm -> LeakyReLU/ReLU/none runs among one Sequential's children; one other module may stand
    between the conv and the norm or between the norm and the activation (a Dropout...), which keeps them apart."""
    found, n = [], len(children)
    for i, conv in enumerate(children):
        if not isinstance(conv, _CONVS):
            continue
        norm = i + 1 if i + 1 < n and isinstance(children[i + 1], _NORMS) else None
        if norm is None and i + 2 < n and isinstance(children[i + 2], _NORMS) and \
                not isinstance(children[i + 1], _CONVS):
            norm = i + 2
        if norm is None:
            continue
        activation = None
        for j in (norm + 1, norm + 2):
            if j < n and isinstance(children[j], _ACTIVATIONS):
                activation = j
                break
            if j < n and (isinstance(children[j], (*_CONVS, *_NORMS)) or any(True for _ in children[j].children())):
                break  # a container (a U-Net's inner block) ends the run: what follows it is not this run's
        stop = (norm if activation is None else activation) + 1
        pad = i - 1 if i and isinstance(children[i - 1], _PADS) else None
        start = i if pad is None else pad
        names = [type(m).__name__ for m in children[start:stop]]
        found.append(_Found(path, start, stop, pad, i, norm, activation,
                            " -> ".join(names + ([] if activation is not None else ["none"]))))
    return found


class _Listener:
    """fusion.listener while the converted copy runs: each Sequential's decisions, and which of its steps is
    running (the saved tensors of a step are the bytes its modules keep)."""

    def __init__(self):
        self.decisions: dict[tuple[int, int], fusion.Decision] = {}
        self.current: list[tuple[int, int, int]] = []

    def decided(self, sequential, index, decision) -> None:
        self.decisions.setdefault((id(sequential), index), decision)

    @contextlib.contextmanager
    def running(self, sequential, index, count):
        self.current.append((id(sequential), index, count))
        try:
            yield
        finally:
            self.current.pop()


class _SavedBytes(TorchDispatchMode):
    """Bytes of the distinct storages autograd saves, in total and per key (the run in progress). A saved storage
    counts for the run that produced it (the key while the op that first wrote it ran, seen as a dispatch mode), not
    for whichever modules save it: a run's output that the next layer saves is the run's, its input is not, so the
    rows of torch and of the converted model compare the same tensors and add up to at most the whole forward."""

    def __init__(self, model: nn.Module, key):
        super().__init__()
        self.excluded = {s[0] for s in map(_storage, (*model.parameters(), *model.buffers())) if s is not None}
        self.key = key
        self.producer: dict = {}  # storage -> the key of the run in progress when an op first returned it
        self.total: dict = {}
        # every storage an op returned, alive until the run ends: a freed temporary's address, reused by a later
        # tensor, would give that tensor the temporary's producer (the counts changed with the allocator's reuse)
        self.alive: list = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        key = self.key()
        for t in torch.utils._pytree.tree_leaves(result):
            if isinstance(t, torch.Tensor):
                storage = _storage(t)
                if storage is not None:
                    self.producer.setdefault(storage[0], key)
                    self.alive.append(t.untyped_storage())
        return result

    def pack(self, t: torch.Tensor):
        storage = _storage(t)
        if storage is not None and storage[0] not in self.excluded:
            self.total[storage[0]] = storage[1]
        return t

    def bytes_of(self, key) -> int | None:
        if key not in self.producer.values():
            return None
        return sum(size for s, size in self.total.items() if self.producer.get(s) == key)


def _storage(t: torch.Tensor):
    try:
        storage = t.untyped_storage()
        return storage.data_ptr(), storage.nbytes()
    except (RuntimeError, NotImplementedError):  # no storage (fake, sparse...): nothing we can count
        return None


def _copied_inputs(inputs):
    return tree_map(lambda t: t.detach().clone().requires_grad_(t.requires_grad) if isinstance(t, torch.Tensor)
                    else t, inputs)


def _unconverted_bytes(model: nn.Module, inputs, runs: dict[int, list[_Found]]):
    """Runs the unconverted copy, attributing each saved tensor to the run whose module produced it (module hooks
    say which run is in progress; plain torch modules compute the same with them)."""
    current: list = []
    handles = []
    # a module placed at several positions (pix2pixHD's one ReLU in every run) is called once per position, in order:
    # its k-th call in a forward is its (k mod occurrences)-th position, whose run (or None) is the key
    keys: dict[nn.Module, list] = {}
    sequentials = dict(model.named_modules())
    for path, module in sequentials.items():
        if isinstance(module, nn.Sequential):
            in_run = {i: run for run in runs.get(path, ()) for i in range(run.start, run.stop)}
            for i, child in enumerate(module):
                keys.setdefault(child, []).append(in_run.get(i))
    calls = dict.fromkeys(keys, 0)

    def enter(module, args):
        occurrences = keys[module]
        current.append(occurrences[calls[module] % len(occurrences)])
        calls[module] += 1  # returns None: the input is left as it is

    def leave(module, args, output):
        current.pop()  # returns None: the output is left as it is

    for module, occurrences in keys.items():
        if any(key is not None for key in occurrences):
            # around the module's own hooks (spectral_norm's pre-hook computes the weight the conv saves), as the
            # converted model's run covers the whole module call
            handles.append(module.register_forward_pre_hook(enter, prepend=True))
            handles.append(module.register_forward_hook(leave, always_call=True))
    counter = _SavedBytes(model, lambda: current[-1] if current else None)
    try:
        with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(counter.pack, lambda t: t), counter:
            model(*_copied_inputs(inputs))
    finally:
        for handle in handles:
            handle.remove()
    return counter


def explain(model: nn.Module, *inputs) -> Explanation:
    """Runs `model(*inputs)` once on a converted deep copy and once on an unconverted one and returns the table of
    every Conv2d/ConvTranspose2d/Conv1d/Linear -> BatchNorm/InstanceNorm/GroupNorm -> LeakyReLU/ReLU/none run among the
    nn.Sequential children: fused or not, why not, and the bytes kept for backward either way. Changes nothing of
    `model` (parameters, buffers, their version counters, the CPU random state)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"explain(): argument 'model' must be a torch.nn.Module, got {type(model).__name__}")
    found: dict[str, list[_Found]] = {}
    for path, module in model.named_modules():
        if isinstance(module, nn.Sequential):
            runs = _find_runs(path, list(module))
            if runs:
                found[path] = runs
    rng = torch.get_rng_state()
    try:
        unconverted = _unconverted_bytes(copy.deepcopy(model), inputs, found)
        torch.set_rng_state(rng)
        converted_model = convert(copy.deepcopy(model))
        containers = dict(converted_model.named_modules())
        listener = _Listener()
        by_id = {id(containers[path]): path for path in found}

        def running_key():
            if not listener.current:
                return None
            sequential, index, _ = listener.current[-1]
            path = by_id.get(sequential)
            for run in found.get(path, ()):
                if run.start <= index < run.stop:
                    return run
            return None

        converted = _SavedBytes(converted_model, running_key)
        previous, fusion.listener = fusion.listener, listener
        try:
            with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(converted.pack, lambda t: t), \
                    converted:
                converted_model(*_copied_inputs(inputs))
        finally:
            fusion.listener = previous
    finally:
        torch.set_rng_state(rng)
    rows = []
    for path, runs in found.items():
        container = containers[path]
        for run in runs:
            fused, reason = _verdict(run, container, listener.decisions)
            rows.append(Run(run.path, run.pattern, fused, reason, unconverted.bytes_of(run),
                            converted.bytes_of(run)))
    return Explanation(rows, sum(unconverted.total.values()), sum(converted.total.values()))


def _verdict(run: _Found, container: nn.Module, decisions: dict) -> tuple[bool, str]:
    """(fused, why not / what was left out or done) from the decisions the converted Sequential made at the run's pad
    and conv."""
    if type(container) is not FusingSequential:  # convert takes exact nn.Sequential containers only
        return False, f"not converted: the container is a {type(container).__name__}, not exactly nn.Sequential"
    notes = []
    decision = decisions.get((id(container), run.start))
    if run.pad is not None and decision is not None and not decision.length:
        # the pad ran as a module: its reason, and the conv's own decision for the rest of the run
        pad = type(list(container)[run.pad]).__name__
        notes.append(f"the {pad} runs itself: {decision.reason}")
        decision = decisions.get((id(container), run.conv))
    if decision is None:
        return False, "did not run in this forward"
    if not decision.length:
        if run.norm != run.conv + 1:
            between = type(list(container)[run.conv + 1]).__name__
            return False, f"a {between} between the conv and the norm"
        return False, decision.reason or "not fused"
    if run.activation is not None and not decision.with_activation:
        if run.activation != run.norm + 1:
            between = type(list(container)[run.norm + 1]).__name__
            notes.append(f"a {between} between the norm and the activation: it runs itself")
        else:
            notes.append(decision.reason or "the activation runs itself")
    norm = list(container)[run.norm]
    if not norm.training and getattr(norm, "running_mean", None) is not None:  # GroupNorm has none: per sample
        notes.append("eval: running statistics folded into the conv")  # the affine applies inside the op
    if decision.recompute:
        notes.append("recomputes the conv output in backward")
    return True, "; ".join(notes)
