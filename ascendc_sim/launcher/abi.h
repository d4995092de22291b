// The C ABI the Python "sim" backend calls through ctypes (python/ascend_acts/backends/sim.py).
#pragma once

#include <cstdint>

#include "sim/launch.h"

extern "C" {

struct ActsSimStats {
    uint64_t gmBytesIn, gmBytesOut, dataCopyCalls, vectorInstructions, vectorRepeats, peakUbBytes, cubeIterations,
        cubeMacs;
    uint32_t blockDim, tileLength;
    uint64_t blockBytesIn[64], blockBytesOut[64];
    uint64_t bufferBytesIn[16], bufferBytesOut[16];  // per launch buffer, in the launcher's order
};

// 0: ran; 1: a rule was broken (`error` holds "rule\tmessage", `errorBlock` the block or -1); 2: bad arguments.
enum ActsSimStatus { ACTS_SIM_OK = 0, ACTS_SIM_RULE = 1, ACTS_SIM_BAD_ARGUMENT = 2 };

uint32_t acts_sim_platform_count();
const char* acts_sim_platform_name(uint32_t platform);
}

namespace ascend_acts_sim {
// Fills stats/error from a launch result; shared by the product and the test-kernel libraries.
int Report(const ascendc_sim::LaunchResult& result, ActsSimStats* stats, char* error, uint64_t errorLength,
           int64_t* errorBlock);
}  // namespace ascend_acts_sim
