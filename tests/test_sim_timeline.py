"""The emulator's pipe timeline and performance model (ascendc_sim/src/timeline.cpp,
ascend_acts.backends.sim.timeline): hand-computed schedules against the assumptions table, the traffic levels
(per core, L2, HBM-unique), a MIX kernel's cross-core flag, and the reported time never below a floor
computed independently from the tensors."""

import dataclasses
import threading

import numpy as np
import pytest
import torch

from ascend_acts.backends import sim
from ascend_acts.backends.sim import timeline
from ascend_acts.ops.conv_bn_leaky_relu import kernels as conv_bn_sim
from ascend_acts.ops.fused_bias_leaky_relu import kernels as fused_bias_sim
from ascend_acts.ops.leaky_relu import kernels as leaky_relu_sim
from ascend_acts.ops.rrelu import kernels as rrelu_sim

pytestmark = pytest.mark.skipif(sim.unavailable_reason() is not None, reason=str(sim.unavailable_reason()))

A = timeline.Assumptions()


@pytest.fixture(autouse=True)
def scheduled():
    """The timeline is opt-in: every launch of these tests is scheduled with the default assumptions."""
    with sim.launch_settings(assumptions=A):
        yield


def schedule(events, assumptions=A, **launch):
    from ascend_acts import _sim

    return _sim.schedule(events, assumptions.to_costs(), **launch)


def copy_in(slot, nbytes, first=True):
    return {"pipe": "MTE2", "kind": "dma", "bytes": nbytes, "first_bytes": nbytes if first else 0,
            "reads": [("GM", 0, 0, nbytes)], "write": ("UB", slot, slot + nbytes)}


def compute(src, dst, nbytes, op="Add"):
    return {"pipe": "V", "kind": "vector", "op": op, "bytes": nbytes, "reads": [("UB", src, src + nbytes)],
            "write": ("UB", dst, dst + nbytes)}


def copy_out(slot, nbytes, offset):
    return {"pipe": "MTE3", "kind": "dma", "bytes": nbytes, "reads": [("UB", slot, slot + nbytes)],
            "write": ("GM", 1, offset, offset + nbytes)}


def dma_in(nbytes, first):
    """One GM -> UB copy's time on MTE2, by the table: its fixed cost + bytes at the HBM (first touch) or L2 rate."""
    return A.dma_issue_cycles + nbytes / (A.mte2_hbm_bytes_per_cycle if first else A.mte2_l2_bytes_per_cycle)


# cycles per 256-byte repeat and the minimum per instruction, by hand from msKPP's 910B1 tables
# (csrc/prof_data/resource910b.cpp): VADD 2, VADDS / VMULS / VLRELU 1, VDIV 4, VCADD 3; about 3 at least
CLASS_CYCLES = {"Add": (2, 3), "Mul": (2, 3), "Muls": (1, 3), "Adds": (1, 3), "LeakyRelu": (1, 3), "Div": (4, 4),
                "ReduceSum": (3, 3)}


def vector(nbytes, op="Add"):
    per_repeat, least = CLASS_CYCLES[op]
    return A.vector_issue_cycles + max(least, -(-nbytes // 256) * per_repeat)


def dma_out(nbytes):
    return A.dma_issue_cycles + nbytes / A.mte3_bytes_per_cycle


LATENCY = A.dma_latency_cycles  # a DMA's data is usable this long after it leaves its pipe


def test_every_assumption_has_a_source():
    names = {f.name for f in dataclasses.fields(timeline.Assumptions)}
    assert names == set(timeline.SOURCES) - {"clock"}
    assert all(source for _, source in timeline.SOURCES.values())
    assert set(timeline.COST_FIELDS) <= names


def test_single_datacopy_costs_latency_plus_bytes_over_bandwidth():
    t = schedule([copy_in(0, 4096)])
    assert t.makespan_cycles == (pytest.approx(dma_in(4096, first=True) + LATENCY),)
    assert t.busy_cycles[0]["MTE2"] == pytest.approx(dma_in(4096, first=True))
    again = schedule([copy_in(0, 4096, first=False)])
    assert again.makespan_cycles == (pytest.approx(dma_in(4096, first=False) + LATENCY),)
    # two copies in flight: the second leaves the pipe after the first, their latencies overlap
    two = schedule([copy_in(0, 4096), copy_in(8192, 4096)])
    assert two.makespan_cycles == (pytest.approx(2 * dma_in(4096, first=True) + LATENCY),)


def test_leaky_relu_of_one_block_is_copy_sync_compute_sync_copy():
    """The real kernel on 8 floats: MTE2 (32 bytes, first touch) -> V (one repeat) -> MTE3, two syncs."""
    leaky_relu_sim.leaky_relu(torch.randn(8), 0.2)
    t = sim.last_launch().timeline
    expected = (dma_in(32, first=True) + LATENCY + A.sync_cycles + vector(32, "LeakyRelu") + A.sync_cycles + dma_out(32)
                + LATENCY)
    assert t.makespan_cycles == (pytest.approx(expected),)
    assert t.syncs == 2


def test_vector_instructions_cost_their_class_cycles():
    """A VADD repeat costs 2 cycles, a VMULS 1, a VDIV 4, a VCADD 3; a one-repeat instruction the minimum (3 cycles,
    VDIV 4); each plus the issue cost. The summary's vector work is the same cycles without the issue."""
    issue = A.vector_issue_cycles
    cases = [("Add", 4096, 16 * 2), ("Muls", 4096, 16 * 1), ("Div", 4096, 16 * 4), ("ReduceSum", 4096, 16 * 3),
             ("Add", 256, 3), ("Muls", 256, 3), ("Div", 256, 4), ("Adds", 768, 3), ("Mul", 64, 3)]
    for op, nbytes, cycles in cases:
        t = schedule([compute(0, 8192, nbytes, op)])
        assert t.makespan_cycles == (pytest.approx(issue + cycles),), op
        assert t.busy_cycles[0]["V"] == pytest.approx(issue + cycles)
        assert t.vector_work_cycles == pytest.approx(cycles)
    # in order on V: the sum; the class counts say which instructions they were
    t = schedule([compute(0, 8192, 4096, "Add"), compute(16384, 24576, 4096, "Muls"),
                  compute(32768, 40960, 256, "Div")])
    assert t.makespan_cycles[0] == pytest.approx(3 * issue + 32 + 16 + 4)
    assert t.vector_work_cycles == pytest.approx(32 + 16 + 4)
    assert t.vector_classes["two tensors"] == (1, 16) and t.vector_classes["scalar operand"] == (1, 16)
    assert t.vector_classes["divide"] == (1, 1)
    assert timeline.vector_cycles("Add", 4096) == 32 and timeline.vector_cycles("Div", 100) == 4


def test_every_vector_api_of_the_emulator_has_one_class_with_a_source():
    import pathlib
    import re

    from ascend_acts import _sim

    root = pathlib.Path(__file__).resolve().parents[1] / "ascendc_sim" / "include" / "sim"
    text = (root / "vector.h").read_text() + (root / "transpose.h").read_text()
    apis = set(re.findall(r"ASCENDC_SIM_(?:BINARY|SCALAR)\((\w+),", text)) - {"NAME"}  # not the macros themselves
    apis |= set(re.findall(r'detail::Issue<T>\("(\w+)"', text)) | set(re.findall(r'VectorClassOf\("(\w+)"\)', text))
    apis |= set(re.findall(r'trace::VectorOf\(\s*"(\w+)", ascendc_sim::EventKind::Vector', text))
    assert {"Add", "Muls", "LeakyRelu", "Cast", "CompareScalar", "ReduceSum", "TransDataTo5HD"} <= apis
    classes = timeline.vector_classes()
    for api in apis:
        assert sum(api in c["apis"] for c in classes) == 1, api
    assert all(c["source"] and c["cycles_per_repeat"] > 0 and c["min_cycles"] >= 3 for c in classes)
    with pytest.raises(ValueError, match="no class"):
        _sim.schedule([compute(0, 512, 256, "Frobnicate")], A.to_costs())
    with pytest.raises(ValueError, match="needs 'op'"):
        _sim.schedule([{"pipe": "V", "kind": "vector", "bytes": 256, "write": ("UB", 0, 256)}], A.to_costs())


def test_vector_floor_is_the_per_class_cycles_the_timeline_charged():
    """rrelu (Philox: two-tensor and scalar-operand instructions): the vector bound is the class cycles of every
    instruction over the vector cores, the same cycles each core's V pipe was busy for besides the issue costs."""
    rrelu_sim.rrelu(torch.randn(1 << 16), torch.tensor([3]), 0.1, 0.3)
    launch = sim.last_launch()
    t = launch.timeline
    busy = sum(core["V"] for core in t.busy_cycles)
    instructions = sum(core["V"] for core in t.events)
    assert t.gather_elements == 0
    assert t.vector_work_cycles == pytest.approx(busy - A.vector_issue_cycles * instructions)
    assert sum(n for n, _ in t.vector_classes.values()) == instructions
    assert t.vector_classes["two tensors"][0] > 0 and t.vector_classes["scalar operand"][0] > 0
    chip = next(p for p in sim.emulator.binding().platforms() if p.name == "ascend910b1")
    model = timeline.model_time(launch)
    clock = timeline.PLATFORM_CLOCK_HZ["ascend910b1"]
    assert model.bounds["vector"] == pytest.approx(t.vector_work_cycles / (chip.vector_cores * clock))


def test_gm_to_l1_copies_run_at_their_measured_rate():
    """GM -> L1 at msKPP's GM_TO_L1 rate; its first reads slowed as GM -> UB's (hbm / l2)."""
    def to_l1(first):
        return {"pipe": "MTE2", "kind": "dma", "bytes": 65536, "first_bytes": 65536 if first else 0,
                "reads": [("GM", 0, 0, 65536)], "write": ("L1", 0, 65536)}

    again = schedule([to_l1(False)])
    assert again.busy_cycles[0]["MTE2"] == pytest.approx(A.dma_issue_cycles + 65536 / A.mte2_l1_bytes_per_cycle)
    first = schedule([to_l1(True)])
    rate = A.mte2_l1_bytes_per_cycle * A.mte2_hbm_bytes_per_cycle / A.mte2_l2_bytes_per_cycle
    assert first.busy_cycles[0]["MTE2"] == pytest.approx(A.dma_issue_cycles + 65536 / rate)


def test_raw_dependency_across_pipes_adds_the_sync_cost_and_independent_work_overlaps():
    dependent = schedule([copy_in(0, 1024), compute(0, 4096, 1024)])
    assert dependent.makespan_cycles[0] == pytest.approx(dma_in(1024, True) + LATENCY + A.sync_cycles + vector(1024))
    assert dependent.syncs == 1
    independent = schedule([copy_in(0, 1024), compute(8192, 4096, 1024)])  # reads other UB
    assert independent.makespan_cycles[0] == pytest.approx(max(dma_in(1024, True) + LATENCY, vector(1024)))
    assert independent.syncs == 0
    same_pipe = schedule([compute(0, 4096, 1024), compute(4096, 8192, 1024)])  # in order on V: no sync
    assert same_pipe.makespan_cycles[0] == pytest.approx(2 * vector(1024))
    assert same_pipe.syncs == 0


def pipeline(tiles, slots, nbytes=16384, in_place=False):
    """copy-in -> compute -> copy-out over `tiles` tiles, the UB buffers reused every `slots` tiles (`in_place`:
    one buffer per tile for input and output, as a kernel computing in place)."""
    events = []
    for i in range(tiles):
        slot = (i % slots) * 2 * nbytes
        out = slot if in_place else slot + nbytes
        events += [copy_in(slot, nbytes), compute(slot, out, nbytes), copy_out(out, nbytes, i * nbytes)]
    return schedule(events)


def test_double_buffering_overlaps_the_pipes_single_buffering_adds_them():
    tiles, nbytes = 16, 32768  # a tile's copy-in outlasts a DMA's latency: two buffers hide it
    copy, calc, store = dma_in(nbytes, True) + LATENCY, vector(nbytes), dma_out(nbytes) + LATENCY
    sync, busiest = A.sync_cycles, max(dma_in(nbytes, True), vector(nbytes), dma_out(nbytes))
    double = pipeline(tiles, slots=2, nbytes=nbytes).makespan_cycles[0]
    # double buffering: the busiest pipe back to back, plus filling and draining the pipeline once
    assert busiest * tiles <= double <= busiest * tiles + copy + calc + store + 4 * sync
    # one buffer, computed in place: the next copy-in waits for the copy-out to have read it (its time on MTE3;
    # its latency is the way to GM): every stage in turn
    in_place = pipeline(tiles, slots=1, nbytes=nbytes, in_place=True).makespan_cycles[0]
    assert in_place == pytest.approx(tiles * (copy + calc + dma_out(nbytes) + 3 * sync) - sync + LATENCY)
    # one input and one output buffer: the next copy-in waits for the compute, the next compute for the copy-out
    single = pipeline(tiles, slots=1, nbytes=nbytes).makespan_cycles[0]
    assert single >= tiles * (copy + calc + 2 * sync)
    assert double < 0.6 * in_place and double < single


def test_real_elementwise_kernel_overlaps_its_pipes():
    """leaky_relu on one core, many tiles (its queues hold two buffers): the makespan is near the busiest pipe,
    well below the sum of the pipes' busy times."""
    with sim.launch_settings(vector_cores=1):
        leaky_relu_sim.leaky_relu(torch.randn(1 << 17), 0.2)
    t = sim.last_launch().timeline
    busy = t.busy_cycles[0]
    assert t.events[0]["MTE2"] > 4
    assert max(busy.values()) <= t.makespan_cycles[0] < 0.8 * sum(busy.values())


def run_cube_correct(assumptions):
    from ascend_acts import _sim_tests

    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 5, 8)).astype(np.float32)   # [H][W][C0]
    w = rng.standard_normal(16 * 72).astype(np.float32)     # 16 x K, K = 8 * 3 * 3 (layout irrelevant here)
    out = np.zeros(16 * 30, np.float32)
    geometry = np.array([6, 5, 3, 1, 1, 1], np.uint32)
    return _sim_tests.launch("cube_correct", {"x": x, "w": w, "y": out}, geometry, block_dim=1,
                             costs=assumptions.to_costs())


def test_mix_kernel_vector_cores_start_after_the_cube_cores_flag():
    """cube_correct: AIC 0 runs Fixpipe then sets flag 1; AIVs 1 and 2 wait for it. Every cycle of flag latency
    moves the AIVs' end by exactly one cycle and leaves the AIC's alone."""
    fast = run_cube_correct(A.with_(cross_core_flag_cycles=0)).timeline
    slow = run_cube_correct(A.with_(cross_core_flag_cycles=1000)).timeline
    assert fast.mix and fast.block_dim == 1 and len(fast.makespan_cycles) == 3
    assert slow.cross_core_waits == 2 and slow.events[0]["S"] == 1  # one set, one wait per AIV
    aic, aivs = slow.makespan_cycles[0], slow.makespan_cycles[1:]
    assert slow.makespan_cycles[0] == pytest.approx(fast.makespan_cycles[0])
    for before, after in zip(fast.makespan_cycles[1:], aivs):
        assert after - before == pytest.approx(1000)
        # the AIV's work (ring copy-in, Muls, copy-out) all comes after the AIC's last event + the flag
        assert after >= (aic + 1000 + dma_in(8 * 16 * 4, False) + vector(8 * 16 * 4, "Muls") + dma_out(8 * 30 * 4)
                         + 2 * LATENCY)
    assert slow.busy_cycles[0]["M"] > 0 and slow.busy_cycles[1]["M"] == 0


def test_hbm_counts_a_buffer_read_twice_once():
    """batch_norm_leaky_relu reads x twice (statistics, then normalise): L2 sees both reads, HBM one."""
    n, c = 4, 8
    x = torch.randn(n, c, 16, 16)
    conv_bn_sim.batch_norm_leaky_relu(x, torch.ones(c), torch.zeros(c), torch.zeros(c), torch.ones(c), 0.2, 1e-5, 0.1)
    launch = sim.last_launch()
    t = launch.timeline
    assert launch.buffer_bytes_in["x"] == 2 * x.nbytes
    assert t.gm_bytes == sum(launch.buffer_bytes_in.values()) + sum(launch.buffer_bytes_out.values())
    per_channel = c * 4  # one 32-byte block each
    # x and y once; weight, bias, running_mean, running_var read; running stats written back, save_* written
    assert t.hbm_bytes == x.nbytes + x.nbytes + 4 * per_channel + 2 * per_channel + 2 * per_channel
    assert t.gm_bytes - t.hbm_bytes == x.nbytes
    model = timeline.model_time(launch)
    assert model.hbm_bytes == t.hbm_bytes and model.l2_bytes == t.gm_bytes
    # a footprint larger than L2: every byte comes from HBM
    small_l2 = timeline.model_time(launch, assumptions=A.with_(l2_capacity_bytes=1024))
    assert small_l2.hbm_bytes == t.gm_bytes


def test_tracing_changes_no_result_or_counter():
    from ascend_acts import _sim

    x = torch.randn(3000)
    tiling = _sim.elementwise_tiling("rrelu", [x.shape, (1,)], 4, {"lower": 0.1, "upper": 0.3})
    outputs, counters = [], []
    for costs in (None, A.to_costs()):
        y = torch.empty_like(x)
        launch = _sim.launch("rrelu", {"x": x, "seed": torch.tensor([5]), "y": y}, tiling, costs=costs)
        outputs.append(y)
        counters.append((launch.gm_bytes_in, launch.gm_bytes_out, launch.datacopy_calls, launch.vector_instructions,
                         launch.vector_repeats, launch.block_bytes_in, launch.buffer_bytes_in))
        assert (launch.timeline is None) == (costs is None)
    assert torch.equal(outputs[0], outputs[1]) and counters[0] == counters[1]


def test_model_time_refuses_other_assumptions_than_the_launch_was_scheduled_with():
    leaky_relu_sim.leaky_relu(torch.randn(64), 0.2)
    with pytest.raises(ValueError, match="dma_latency_cycles"):
        timeline.model_time(sim.last_launch(), assumptions=A.with_(dma_latency_cycles=1.0))
    with sim.launch_settings(assumptions=A.with_(dma_latency_cycles=1.0)):
        leaky_relu_sim.leaky_relu(torch.randn(64), 0.2)
    shorter = timeline.model_time(sim.last_launch(), assumptions=A.with_(dma_latency_cycles=1.0))
    assert shorter.bounds["timeline"] * timeline.PLATFORM_CLOCK_HZ["ascend910b1"] == pytest.approx(
        sim.last_launch().timeline.makespan_cycles[0])
    with pytest.raises(TypeError, match="assumptions"):
        with sim.launch_settings(assumptions={"dma_latency_cycles": 1}):
            pass


def conv_eval():
    x = torch.randn(2, 16, 8, 8).half()
    w = (torch.randn(32, 16, 4, 4) / 16).half()
    conv_bn_sim.eval_kernel(x, w, torch.randn(32), (2, 2), (1, 1, 1, 1), (1, 1), 0.2)
    macs = 2 * 32 * 4 * 4 * 16 * 16  # N * Cout * Ho * Wo * Cin * k * k
    return x.nbytes + w.nbytes + 32 * 4 + 2 * 32 * 4 * 4 * 2, macs


def leaky(dtype):
    x = torch.randn(1 << 16).to(dtype)
    leaky_relu_sim.leaky_relu(x, 0.2)
    return 2 * x.nbytes, 0


def rrelu():
    x = torch.randn(1 << 15)
    rrelu_sim.rrelu(x, torch.tensor([3]), 0.1, 0.3)
    return 2 * x.nbytes, 0


def fused_bias():
    x = torch.randn(4, 32, 8, 8)
    fused_bias_sim.fused_bias_leaky_relu(x, torch.randn(32), 0.2, 2**0.5)
    return 2 * x.nbytes + 32 * 4, 0


@pytest.mark.parametrize("run", [lambda: leaky(torch.float32), lambda: leaky(torch.float16), rrelu, fused_bias,
                                 conv_eval], ids=["leaky_relu_f32", "leaky_relu_f16", "rrelu", "fused_bias",
                                                  "conv_eval"])
@pytest.mark.parametrize("platform", ["ascend910b1", "ascend910b3"])
def test_reported_time_is_never_below_a_floor_computed_from_the_tensors(run, platform):
    """Compulsory bytes (every input read once, every output written once) at HBM bandwidth and the
    convolution's MACs at the cube's peak x efficiency, computed here from the shapes, bound the model's time
    from below; so does each core's busiest pipe."""
    with sim.launch_settings(platform=platform):
        compulsory_bytes, macs = run()
    launch = sim.last_launch()
    model = timeline.model_time(launch, platform)
    chip = next(p for p in sim.emulator.binding().platforms() if p.name == platform)
    clock = timeline.PLATFORM_CLOCK_HZ[platform]
    floors = [compulsory_bytes / A.hbm_bytes_per_s,
              macs / (chip.cube_cores * A.cube_macs_per_cycle_16 * A.cube_efficiency * clock)]
    floors += [max(busy.values()) / clock for busy in launch.timeline.busy_cycles]
    assert model.total_s >= max(floors) + A.launch_overhead_s
    assert model.total_s == pytest.approx(max(model.bounds.values()) + A.launch_overhead_s)
    assert model.bounds["HBM"] >= compulsory_bytes / A.hbm_bytes_per_s * (1 - 1e-9)


def test_launches_are_not_scheduled_unless_asked():
    """Outside launch_settings(assumptions=...) a launch has no timeline (it would cost about half its time), and
    model_time says how to get one. A new thread starts with the default settings, not this module's fixture's."""
    leaky_relu_sim.leaky_relu(torch.randn(64), 0.2)
    assert sim.last_launch().timeline is not None
    launches = []
    thread = threading.Thread(target=lambda: (leaky_relu_sim.leaky_relu(torch.randn(64), 0.2),
                                              launches.append(sim.last_launch())))
    thread.start()
    thread.join()
    assert launches[0].timeline is None
    with pytest.raises(ValueError, match=r"opt-in: launch inside sim.launch_settings\(assumptions=Assumptions\(\)\)"):
        timeline.model_time(launches[0])
