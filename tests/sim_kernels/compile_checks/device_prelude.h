// Force-included (-include) when tests/test_kernel_sources.py compiles a kernel with clang's CUDA rules
// as a stand-in for bisheng's execution spaces: __aicore__ becomes __device__, so a call from device
// code to a function without __aicore__ (host-only under bisheng too) is an error. The emulator's
// AscendC API and the C++ library it uses are made host+device, as CANN's headers mark their API
// __aicore__. Only for that check; never part of a build.
#define __host__ __attribute__((host))
#define __device__ __attribute__((device))
#include <cstdlib>
#include <exception>
#include <new>
// device versions of what the emulator's containers use from <new>
__device__ void* operator new(std::size_t, std::align_val_t);
__device__ inline void* operator new(std::size_t, void* place) noexcept { return place; }
__device__ void operator delete(void*, std::size_t, std::align_val_t) noexcept;
__device__ void operator delete(void*, std::align_val_t) noexcept;
#pragma clang force_cuda_host_device begin
#include "kernel_operator.h"
#include "lib/matmul_intf.h"
#pragma clang force_cuda_host_device end
#undef __aicore__
#define __aicore__ __attribute__((device))
#define ACTS_AICORE_LAMBDA __attribute__((device))
