"""The emulator's performance model: the assumptions it rests on (one table, every value with its source or
marked as an assumption), and a launch's modelled 910B time from the pipe schedule the emulator recorded.

Every launch of the sim backend is scheduled (ascendc_sim/src/timeline.cpp): each operation a kernel issues is
an event on its core's pipe, started as soon as its pipe is free and the memory it reads and writes is
ready (a sync cost when a dependency crosses pipes, a flag latency when it crosses cores): the schedule of
a perfectly synchronised kernel. `model_time(launch)` turns that into seconds and adds the launch-level
bounds, so the reported time is never below a traffic or compute floor:

    total = max(timeline makespan, HBM bytes / HBM bandwidth, L2 bytes / L2 bandwidth,
                cube MACs / (cube cores x peak x efficiency), vector class cycles / vector cores)
            + launch overhead

docs/benchmarks.md describes the model and what it cannot see.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

# The CANN 8.1 platform files (aarch64-linux/data/platform_config/<SoC>.ini; 910B3 and 910_9391 list the same
# rates): [AICoreMemoryRates] are the compiler's per-core rates, which we read as bytes per cycle of one core.
_INI = "CANN 8.1 platform_config/Ascend910B1.ini"
# msKPP's profiling data (Huawei MindStudio Kernel Performance Prediction, Mulan PSL v2): per-core copy rates of
# 910B1 in GB/s (GiB), which msKPP itself turns into bytes per cycle as GB/s * 2^30 / 1.8e9 (csrc/prof_data/
# data_adapter.cpp); its theoretical table (csrc/core/arch/arch_info.cpp: L1 -> L0A 256, L1 -> L0B 128 B/cycle)
# agrees with that reading. Figures only.
_MSKPP = "msKPP (xiaobingling93-pixel/Ascend-mskpp) csrc/prof_data/resource910b.cpp"
_GIB_PER_S = 2**30 / 1.8e9  # bytes per cycle per GiB/s at msKPP's 1.8 GHz


def _per_cycle(gib_per_s: float) -> float:
    return round(gib_per_s * _GIB_PER_S, 1)


# AI core clock per emulator platform: cube_freq of its .ini (MHz)
PLATFORM_CLOCK_HZ = {"ascend910b1": 1.85e9, "ascend910b3": 1.80e9, "ascend910_93": 1.85e9}


@dataclass(frozen=True)
class Assumptions:
    """The model's inputs. SOURCES says where each value comes from; "assumption" marks a value with none.
    Vector instructions cost their class's measured cycles (vector_classes(), the emulator's one table)."""

    # --- per core, the pipe schedule (cycles, bytes per cycle) ------------------------------------------
    dma_issue_cycles: float = 32.0
    dma_latency_cycles: float = 500.0
    mte2_hbm_bytes_per_cycle: float = _per_cycle(78.3) / 2  # 23.35
    mte2_l2_bytes_per_cycle: float = _per_cycle(78.3)       # 46.7
    mte2_l1_bytes_per_cycle: float = _per_cycle(262.0)      # 156.3
    mte3_bytes_per_cycle: float = _per_cycle(110.0)         # 65.6
    fix_bytes_per_cycle: float = _per_cycle(200.0)          # 119.3
    l0c_to_ub_bytes_per_cycle: float = 256.0
    mte1_l0a_bytes_per_cycle: float = _per_cycle(437.6)     # 261.0
    mte1_l0b_bytes_per_cycle: float = _per_cycle(219.6)     # 131.0
    mte1_issue_cycles: float = 16.0
    cube_macs_per_cycle_16: float = 4096.0
    cube_macs_per_cycle_32: float = 1024.0
    mmad_efficiency: float = 0.98
    mmad_issue_cycles: float = 16.0
    vector_issue_cycles: float = 16.0
    gather_elements_per_cycle: float = 5.2
    sync_cycles: float = 32.0
    cross_core_flag_cycles: float = 500.0
    # --- the launch ---------------------------------------------------------------------------------
    hbm_bytes_per_s: float = 1.6e12
    l2_bytes_per_s: float = 4.0e12
    l2_capacity_bytes: int = 201326592
    cube_efficiency: float = 0.89
    launch_overhead_s: float = 3.2e-6

    def to_costs(self):
        """The binding's TimelineCosts (the per-core fields) for `ascend_acts._sim.launch(..., costs=)`."""
        from ... import _sim

        costs = _sim.TimelineCosts()
        for name in COST_FIELDS:
            setattr(costs, name, float(getattr(self, name)))
        return costs

    def with_(self, **changes) -> "Assumptions":
        return replace(self, **changes)


COST_FIELDS = ("dma_issue_cycles", "dma_latency_cycles", "mte2_hbm_bytes_per_cycle", "mte2_l2_bytes_per_cycle",
               "mte2_l1_bytes_per_cycle", "mte3_bytes_per_cycle", "fix_bytes_per_cycle", "l0c_to_ub_bytes_per_cycle",
               "mte1_l0a_bytes_per_cycle", "mte1_l0b_bytes_per_cycle", "mte1_issue_cycles", "cube_macs_per_cycle_16",
               "cube_macs_per_cycle_32", "mmad_efficiency", "mmad_issue_cycles", "vector_issue_cycles",
               "gather_elements_per_cycle", "sync_cycles", "cross_core_flag_cycles")

# (unit, source) per field; "assumption" starts every value no document gives
SOURCES = {
    "clock": ("Hz", f"{_INI}: cube_freq=1850 (910B1, 910_93), 1800 (910B3)"),
    "dma_issue_cycles": ("cycles a GM DMA (MTE2, MTE3, FIX) holds its pipe besides its bytes",
                         "assumption, in line with Huawei's Ascend C best practices (a single DataCopy of 16 KB or "
                         "more reaches close to peak bandwidth): 16 KB then runs at 92% (L2) to 96% (HBM) of the "
                         "per-core rate"),
    "dma_latency_cycles": ("cycles from a GM DMA leaving its pipe to its data being usable (DMAs overlap)",
                           "assumption"),
    "mte2_hbm_bytes_per_cycle": ("B/cycle per core, GM -> UB, bytes no earlier access of the launch touched",
                                 "half the L2 rate: msKPP (xiaobingling93-pixel/Ascend-mskpp) mskpp/prof_data/"
                                 "mov_prof.py notes measured L2-hit vs miss bandwidth differing by 2x or more (4.5x "
                                 f"in theory); was {_INI} ddr_read_rate=32"),
    "mte2_l2_bytes_per_cycle": ("B/cycle per core, GM -> UB, bytes read again or written before (in L2)",
                                f"{_MSKPP} GM_TO_UB_910b1: 78.3 GB/s per core = 46.7 B/cycle at msKPP's 1.8 GHz; "
                                f"was {_INI} l2_read_rate=110"),
    "mte2_l1_bytes_per_cycle": ("B/cycle per core, GM -> L1 (first reads at hbm / l2 of this)",
                                f"{_MSKPP} GM_TO_L1_910b1: 262 GB/s at 512 KB = 156 B/cycle; the .ini lists none"),
    "mte3_bytes_per_cycle": ("B/cycle per core, UB -> GM", f"{_MSKPP} UB_TO_GM_910b1: 110 GB/s = 65.6 B/cycle; "
                                                           f"{_INI} ub_to_ddr_rate=64 agrees"),
    "fix_bytes_per_cycle": ("B/cycle per core, L0C -> GM", f"{_MSKPP} L0C_TO_GM_910b1: 197-211 GB/s = 119 B/cycle; "
                                                           "was an assumption (the .ini's l2_write_rate=86)"),
    "l0c_to_ub_bytes_per_cycle": ("B/cycle", f"{_INI} l0_c_to_ub_rate=256"),
    "mte1_l0a_bytes_per_cycle": ("B/cycle", f"{_MSKPP} L1_TO_L0A_910b1: 437.6 GB/s = 261 B/cycle (msKPP's "
                                            f"theoretical 256); was {_INI} l1_to_l0_a_rate=512"),
    "mte1_l0b_bytes_per_cycle": ("B/cycle", f"{_MSKPP} L1_TO_L0B_910b1: 219.6 GB/s = 131 B/cycle (theoretical 128); "
                                            f"was {_INI} l1_to_l0_b_rate=256"),
    "mte1_issue_cycles": ("cycles per LoadData", "assumption"),
    "cube_macs_per_cycle_16": ("MAC/cycle per cube core", f"{_INI} cube_m/n/k_size=16 (one 16x16x16 fractal per "
                                                          "cycle); Huawei, Hot Chips 31 (2019): 4096 FP16 MACs per "
                                                          "cycle per Da Vinci core"),
    "cube_macs_per_cycle_32": ("MAC/cycle per cube core", "a quarter of float16's; zzc0721/torch-performance-test-data "
                                                          "issue #109: 910B2 float32 matmul 84.5 TFLOPS, at least 978 "
                                                          "MAC/cycle per core (24 cores at 1.8 GHz, assumption)"),
    "mmad_efficiency": ("achieved / peak of every Mmad in the timeline",
                        f"{_MSKPP} MMAD_FP16_FP16_FP32_1_core_910b1: 7955 of 8192 ops/cycle on average for "
                        "m*k*n >= 131072 (0.97), up to 8175 (0.998)"),
    "mmad_issue_cycles": ("cycles per Mmad", "assumption"),
    "vector_issue_cycles": ("cycles per vector instruction besides its class's cycles",
                            "assumption: the API call's set-up (mask, addresses, repeat parameters); msKPP's back-to-"
                            "back figures already include the V pipe's own minimum"),
    "gather_elements_per_cycle": ("elements/cycle", f"{_MSKPP} VGATHER_UINT32_1_core_910b1: 64 elements per repeat "
                                                    "at 12.3 cycles per repeat; was an assumption (8)"),
    "sync_cycles": ("cycles per dependency between two pipes of a core (SetFlag/WaitFlag)", "assumption"),
    "cross_core_flag_cycles": ("cycles, CrossCoreSetFlag -> WaitFlag", "assumption"),
    "hbm_bytes_per_s": ("B/s", "assumption: the commonly quoted 1.6 TB/s for 910B (no official figure); measured "
                               "achieved: flagos-ai/FlagGems PR #2162, torch mean of 2^30 float32 on Ascend in "
                               "3.00 ms = 1.43 TB/s (results also at 1.3 TB/s)"),
    "l2_bytes_per_s": ("B/s", "Huawei's MindIE LLM tuning guide measures an MTE2 bandwidth of 3.87 TB/s at a 94% L2 "
                              "hit rate on Atlas A2; 48 vector cores x msKPP's 46.7 B/cycle x 1.85 GHz = 4.1 TB/s"),
    "l2_capacity_bytes": ("B", f"{_INI} [SoCInfo] l2_size=201326592 (192 MiB)"),
    "cube_efficiency": ("achieved / peak of the cube bound (ours and aclnnConvolution's)",
                        "zzc0721/torch-performance-test-data issue #109: 910B2 float16 matmul 4096^3 at 314.5 "
                        "TFLOPS = 0.89 of 24 cores x 4096 MAC x 2 x 1.8 GHz (910B2's core count and clock: "
                        "assumption)"),
    "launch_overhead_s": ("s per kernel launch, on the device",
                          "Ascend/msopprof example/sample_overhead/README.md (910B4, one core, 10 KB): task 5.18-"
                          "5.90 us, of it the core's time 4.60-5.34 us, scalar 2.58-3.30 us: dispatch (task - core "
                          "0.58 us) + scalar set-up no timeline sees (2.58 us) = 3.2 us; the copies and vector work "
                          "are the timeline's"),
}


def vector_classes() -> list[dict]:
    """The vector instruction classes the timeline charges (ascendc_sim/src/timeline.cpp, the one table): name,
    cycles_per_repeat, min_cycles, apis, instructions, source."""
    from ... import _sim

    return _sim.vector_classes()


def vector_cycles(api: str, nbytes: float, instructions: int = 1) -> float:
    """The V-pipe cycles of `instructions` instructions of AscendC `api` over `nbytes` in all (256-byte repeats), by
    its class, without the issue cost: what the timeline charges and the vector floor counts."""
    for c in vector_classes():
        if api in c["apis"]:
            repeats = -(-nbytes // 256)
            return max(instructions * c["min_cycles"], repeats * c["cycles_per_repeat"])
    raise ValueError(f"vector_cycles(): {api!r} is in no class of vector_classes()")


def table(assumptions: Assumptions | None = None, platform: str = "ascend910b1") -> list[tuple[str, str, str, str]]:
    """(name, value, unit, source) for every assumption: what docs/benchmarks.md and the results quote."""
    a = assumptions or Assumptions()
    rows = [("clock", f"{PLATFORM_CLOCK_HZ[platform] / 1e9:g} GHz ({platform})", *SOURCES["clock"])]
    for f in fields(a):
        unit, source = SOURCES[f.name]
        value = getattr(a, f.name)
        rows.append((f.name, f"{value:,}" if isinstance(value, int) else f"{value:g}", unit, source))
    for c in vector_classes():
        rows.append((f"vector class: {c['name']}", f"max({c['min_cycles']:g}, {c['cycles_per_repeat']:g} x repeats)",
                     f"cycles per instruction: {' '.join(c['apis']) or '(no API of ours)'} ({c['instructions']})",
                     c["source"]))
    return rows


@dataclass(frozen=True)
class ModelledTime:
    """A launch's modelled time (seconds) and what it rests on. `bounds` are the floors and the schedule;
    `total_s` = the largest + the launch overhead; `binding` names the largest."""

    kernel: str
    platform: str
    bounds: dict[str, float]
    launch_overhead_s: float
    total_s: float
    binding: str
    core_makespans_s: tuple[float, ...]
    pipe_busy_s: dict[str, float]       # summed over cores
    busiest_core_pipes_s: dict[str, float]  # the pipes of the core with the longest makespan
    per_core_gm_bytes: tuple[int, ...]  # MTE2 + MTE3 + FIX bytes of each core
    l2_bytes: int                       # every GM byte the launch moved
    hbm_bytes: int                      # compulsory bytes (or l2_bytes when the footprint exceeds L2)
    footprint_bytes: int
    syncs: int


def _platform(name: str):
    from ... import _sim

    for p in _sim.platforms():
        if p.name == name:
            return p
    raise ValueError(f"model_time(): platform must be one of {[p.name for p in _sim.platforms()]}, got {name!r}")


def model_time(launch, platform: str = "ascend910b1", assumptions: Assumptions | None = None) -> ModelledTime:
    """The modelled time of `launch` (ascend_acts._sim.Launch, e.g. sim.last_launch()) on `platform`, with the
    assumptions its timeline was scheduled with (an Assumptions whose per-core fields differ is an error:
    relaunch inside `launch_settings(assumptions=...)`)."""
    a = assumptions or Assumptions()
    t = launch.timeline
    if t is None:
        raise ValueError("model_time(): the launch has no timeline (it is opt-in: launch inside "
                         "sim.launch_settings(assumptions=Assumptions()))")
    mismatched = [n for n in COST_FIELDS if getattr(t.costs, n) != float(getattr(a, n))]
    if mismatched:
        raise ValueError(f"model_time(): the launch was scheduled with other values of {mismatched}")
    chip = _platform(platform)
    clock = PLATFORM_CLOCK_HZ[platform]
    makespans = tuple(c / clock for c in t.makespan_cycles)
    # 32-byte granules: a scalar read of a few bytes counts a granule, never more than was moved
    hbm = min(t.hbm_bytes, t.gm_bytes) if t.footprint_bytes <= a.l2_capacity_bytes else t.gm_bytes
    cube_cycles = t.cube_macs_16 / a.cube_macs_per_cycle_16 + t.cube_macs_32 / a.cube_macs_per_cycle_32
    # the same per-class cycles the timeline charged each instruction (issue costs excluded)
    vector_cycles = t.vector_work_cycles + t.gather_elements / a.gather_elements_per_cycle
    bounds = {
        "timeline": max(makespans, default=0.0),
        "HBM": hbm / a.hbm_bytes_per_s,
        "L2": t.gm_bytes / a.l2_bytes_per_s,
        "cube": cube_cycles / (chip.cube_cores * a.cube_efficiency * clock),
        "vector": vector_cycles / (chip.vector_cores * clock),
    }
    binding = max(bounds, key=bounds.get)
    pipes = {}
    for core in t.busy_cycles:
        for pipe, cycles in core.items():
            pipes[pipe] = pipes.get(pipe, 0.0) + cycles / clock
    busiest = max(range(len(makespans)), key=makespans.__getitem__) if makespans else None
    busiest_pipes = {} if busiest is None else {p: c / clock for p, c in t.busy_cycles[busiest].items() if c}
    per_core = tuple(i + o for i, o in zip(launch.block_bytes_in, launch.block_bytes_out))
    return ModelledTime(launch.kernel, platform, bounds, a.launch_overhead_s, bounds[binding] + a.launch_overhead_s,
                        binding, makespans, {p: s for p, s in pipes.items() if s}, busiest_pipes, per_core,
                        t.gm_bytes, hbm, t.footprint_bytes, t.syncs)
