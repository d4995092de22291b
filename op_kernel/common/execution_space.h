// Execution-space markers for code that runs on the AI Core. Under bisheng a function without an
// execution-space qualifier is host-only, so every function device code calls is __aicore__, and so is
// every lambda it calls (CANN's own kernels write `[&](...) __attribute__((cce_aicore)) { ... }`).
// tests/test_kernel_execution_space.py checks both with clang's CUDA rules as a stand-in for bisheng's.
#pragma once

// The tiling-data headers of op_kernel/ are also compiled for the host (op_host/, the emulator's
// launchers), where no AscendC header defines __aicore__: there it marks nothing.
#ifndef __aicore__
#define __aicore__
#endif

// Put after a lambda's parameter list: `[&](const Tile& tile) ACTS_AICORE_LAMBDA { ... }`.
#ifndef ACTS_AICORE_LAMBDA
#if defined(__CCE__) && defined(__clang__)  // bisheng compiling for the AI Core
#define ACTS_AICORE_LAMBDA __attribute__((cce_aicore))
#else
#define ACTS_AICORE_LAMBDA
#endif
#endif
