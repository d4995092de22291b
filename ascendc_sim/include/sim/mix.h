// MIX launches (a cube core and its two vector cores per AI core): cross-core flags and GM visibility.
#pragma once

#include <cstddef>

#include "core.h"

namespace ascendc_sim {

// Flag ids and how many sets a flag counts before a wait (our reading of the CrossCoreSetFlag docs:
// ids 0..15, a 4-bit counter).
constexpr uint16_t kCrossCoreFlags = 16;
constexpr size_t kCrossCoreFlagDepth = 15;

void CrossCoreSet(uint8_t mode, uint16_t flagId);
void CrossCoreWait(uint8_t mode, uint16_t flagId);
// Called for every GM access of a MIX launch: the happens-before check (cross_core_hazard).
void NoteMixGmAccess(size_t bufferIndex, uint64_t first, uint64_t bytes, bool write);
// The core a rule violation is reported for (after the cores' threads have ended).
void RestoreCoreIds(uint32_t core, uint32_t blockIdx);

}  // namespace ascendc_sim
