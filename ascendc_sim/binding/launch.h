// The one launch entry of the emulator's Python modules (ascend_acts._sim for the product kernels,
// ascend_acts._sim_tests for the test kernels): a kernel by name, its GM buffers by parameter name (NumPy
// arrays or CPU torch tensors, used in place), its tiling, the platform; returns the launch's counters or
// raises ascend_acts._sim.EmulatorError (kernel, block, rule).
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernel_table.h"
#include "sim/launch.h"
#include "sim/timeline.h"

namespace ascend_acts_sim {

// The platform of that name; ValueError naming the known ones otherwise.
const ascendc_sim::Platform& PlatformNamed(const std::string& name);

// Counters of one launch (ascend_acts._sim.Launch).
struct LaunchCounters {
    std::string kernel;
    uint64_t gmBytesIn = 0, gmBytesOut = 0, dataCopyCalls = 0, vectorInstructions = 0, vectorRepeats = 0,
             peakUbBytes = 0, cubeIterations = 0, cubeMacs = 0;
    uint32_t blockDim = 0, tileLength = 0;
    std::vector<uint64_t> blockBytesIn, blockBytesOut;                            // per block (MIX launches: per core)
    std::vector<std::pair<std::string, uint64_t>> bufferBytesIn, bufferBytesOut;  // per GM buffer, by name
    std::shared_ptr<ascendc_sim::TimelineSummary> timeline;  // the pipe schedule, when the launch was given costs
};

// Defines `launch(kernel, buffers, tiling=None, platform="ascend910b1", block_dim=None) -> Launch` on
// `module`, launching the kernels of `table`. The Python types it returns and raises live in
// ascend_acts._sim (imported first by the test module).
void DefineLaunch(pybind11::module_& module, KernelTable table);

// Defines the timeline types on `module` (ascend_acts._sim): TimelineCosts (the schedule's cost inputs),
// Timeline (a launch's schedule: Launch.timeline) and `schedule(events, costs, ...)`, the same schedule over
// events given by hand.
void DefineTimeline(pybind11::module_& module);

}  // namespace ascend_acts_sim
