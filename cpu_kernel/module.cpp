// ascend_acts._cpu: the reference backend's compiled float32 passes (norm_activation.h, leaky_relu.h), for Python. The arrays come
// as addresses of C-contiguous float32 (tensors, statistics, parameters) and float64 (gradient sums) buffers that
// ops/conv_bn_leaky_relu/cpu_batch_norm.py checks and keeps alive; the GIL is released, so its threads run these
// calls in parallel.
#include <pybind11/pybind11.h>

#include <string>

#include "leaky_relu.h"
#include "norm_activation.h"

namespace py = pybind11;
using ascend_acts_cpu::Activation;
using ascend_acts_cpu::Sets;

namespace {

template <typename T>
T* At(uintptr_t address) {
    return reinterpret_cast<T*>(address);
}

struct Build {
    const char* name;
    decltype(&ascend_acts_cpu::baseline::Forward) forward;
    decltype(&ascend_acts_cpu::baseline::Backward) backward;
    decltype(&ascend_acts_cpu::baseline::LeakyRelu) leaky_relu;
    decltype(&ascend_acts_cpu::baseline::LeakyReluBackward) leaky_relu_backward;
};

#define ASCEND_ACTS_CPU_BUILD(isa)                                                                            \
    Build {                                                                                                   \
#isa, ascend_acts_cpu::isa::Forward, ascend_acts_cpu::isa::Backward, ascend_acts_cpu::isa::LeakyRelu, \
            ascend_acts_cpu::isa::LeakyReluBackward                                                           \
    }

const Build kBaseline = ASCEND_ACTS_CPU_BUILD(baseline);
#ifdef ASCEND_ACTS_CPU_AVX2_BUILT
const Build kAvx2 = ASCEND_ACTS_CPU_BUILD(avx2);
bool HasAvx2() { return __builtin_cpu_supports("avx2"); }
#else
const Build kAvx2 = kBaseline;
bool HasAvx2() { return false; }
#endif

// the build for this CPU; use_isa("baseline") runs the other (tests: both give the same values)
const Build* build = HasAvx2() ? &kAvx2 : &kBaseline;

void Forward(uintptr_t y, uintptr_t out, int64_t n, int64_t c, int64_t size, int64_t groups, int64_t first,
             int64_t last, uintptr_t gamma, uintptr_t beta, float eps, int act, float slope, bool centre_on_mean,
             uintptr_t mean, uintptr_t invstd, uintptr_t variance) {
    build->forward(At<const float>(y), At<float>(out), Sets{n, c, size, groups}, first, last, At<const float>(gamma),
                   At<const float>(beta), eps, static_cast<Activation>(act), slope, centre_on_mean, At<float>(mean),
                   At<float>(invstd), At<float>(variance));
}

void Backward(uintptr_t grad_out, uintptr_t saved, uintptr_t grad_y, bool saved_is_result, int64_t n, int64_t c,
              int64_t size, int64_t groups, int64_t first, int64_t last, uintptr_t gamma, uintptr_t beta,
              uintptr_t mean, uintptr_t invstd, int act, float slope, uintptr_t grad_gamma, uintptr_t grad_beta,
              uintptr_t scratch) {
    build->backward(At<const float>(grad_out), At<const float>(saved), At<float>(grad_y), saved_is_result,
                    Sets{n, c, size, groups}, first, last, At<const float>(gamma), At<const float>(beta),
                    At<const float>(mean), At<const float>(invstd), static_cast<Activation>(act), slope,
                    At<double>(grad_gamma), At<double>(grad_beta), At<double>(scratch));
}

void LeakyRelu(uintptr_t x, uintptr_t out, int64_t count, float slope) {
    build->leaky_relu(At<const float>(x), At<float>(out), count, slope);
}

void LeakyReluBackward(uintptr_t grad, uintptr_t saved, uintptr_t out, int64_t count, float slope) {
    build->leaky_relu_backward(At<const float>(grad), At<const float>(saved), At<float>(out), count, slope);
}

void UseIsa(const std::string& isa) {
    if (isa == "baseline") {
        build = &kBaseline;
    } else if (isa == "avx2" && HasAvx2()) {
        build = &kAvx2;
    } else {
        throw py::value_error("isa must be 'baseline' or, on a CPU with AVX2 and an x86-64 build, 'avx2'; got '" + isa +
                              "'");
    }
}

}  // namespace

PYBIND11_MODULE(_cpu, m) {
    m.doc() = "the reference backend's compiled float32 passes: normalisation + activation, LeakyReLU";
    m.def("forward", &Forward, py::call_guard<py::gil_scoped_release>());
    m.def("backward", &Backward, py::call_guard<py::gil_scoped_release>());
    m.def("leaky_relu", &LeakyRelu, py::call_guard<py::gil_scoped_release>());
    m.def("leaky_relu_backward", &LeakyReluBackward, py::call_guard<py::gil_scoped_release>());
    m.def(
        "isa", [] { return build->name; }, "the build of the passes that runs: avx2 or baseline");
    m.def("use_isa", &UseIsa, "runs the given build of the passes (for tests); not thread-safe");
}
