// ascend_acts._cpu: the reference backend's compiled float32 passes (norm_activation.h, leaky_relu.h) and layout
// changes (layout.h), for Python. The arrays come as addresses of C-contiguous float32 (tensors, statistics,
// parameters) and float64 (gradient sums) buffers that the Python callers check and keep alive; the GIL is released.
// A large call is shared out over `threads` OpenMP threads: torch's own team (the module links libgomp.so.1, which
// torch has loaded by then, so the threads its convolutions leave spinning take the work at once; a pool of our own
// competed with them for the cores). Each thread takes whole statistics sets (or a range of values), so the results
// do not depend on the split.
#include <pybind11/pybind11.h>

#include <algorithm>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif
#include <pthread.h>

#include "layout.h"
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

// below this many values a call runs on the calling thread (torch's ATen shares out work above 32 Ki values, its
// grain size; twice that here, not tuned further)
constexpr int64_t kParallelValues = int64_t{1} << 16;

// set in a fork()ed child: GNU OpenMP's threads do not survive fork, and a region there waits for them forever
bool forked_child = false;

void MarkForkedChild() { forked_child = true; }

// how many threads run a call over `items` items (statistics sets, or values) of `values` values in all
int Team(int64_t items, int64_t values, int threads) {
    if (forked_child || values < kParallelValues || items < 2) {
        return 1;
    }
    return static_cast<int>(std::min<int64_t>(std::max(threads, 1), items));
}

// body(thread, begin, end) over [first, last) in `team` consecutive ranges, thread 0 .. team - 1
template <typename Body>
void ForRanges(int64_t first, int64_t last, int team, int64_t align, Body body) {
    const int64_t items = last - first;
    if (team <= 1) {
        body(0, first, last);
        return;
    }
    // chunks of a multiple of `align` items (LeakyReLU: whole vectors), the last one shorter
    const int64_t chunk = (items / team + align - 1) / align * align;
#ifdef _OPENMP
#pragma omp parallel for num_threads(team) schedule(static, 1)
#endif
    for (int t = 0; t < team; ++t) {
        const int64_t begin = first + t * chunk;
        const int64_t end = t == team - 1 ? last : std::min(begin + chunk, last);
        if (begin < end) {
            body(t, begin, end);
        }
    }
}

// the statistics sets of norm_activation.h's Sets
int64_t SetCount(const Sets& sets) { return sets.groups ? sets.n * sets.groups : sets.c; }

void Forward(uintptr_t y, uintptr_t out, int64_t n, int64_t c, int64_t size, int64_t groups, uintptr_t gamma,
             uintptr_t beta, float eps, int act, float slope, bool centre_on_mean, uintptr_t mean, uintptr_t invstd,
             uintptr_t variance, int threads) {
    const Sets sets{n, c, size, groups};
    const int team = Team(SetCount(sets), n * c * size, threads);
    ForRanges(0, SetCount(sets), team, 1, [&](int, int64_t begin, int64_t end) {
        build->forward(At<const float>(y), At<float>(out), sets, begin, end, At<const float>(gamma),
                       At<const float>(beta), eps, static_cast<Activation>(act), slope, centre_on_mean, At<float>(mean),
                       At<float>(invstd), At<float>(variance));
    });
}

void Backward(uintptr_t grad_out, uintptr_t saved, uintptr_t grad_y, bool saved_is_result, int64_t n, int64_t c,
              int64_t size, int64_t groups, uintptr_t gamma, uintptr_t beta, uintptr_t mean, uintptr_t invstd, int act,
              float slope, uintptr_t grad_gamma, uintptr_t grad_beta, int threads) {
    const Sets sets{n, c, size, groups};
    const int team = Team(SetCount(sets), n * c * size, threads);
    const int64_t rows = groups ? c / groups : n;  // of a statistics set: norm_activation.h's scratch, per thread
    std::vector<double> scratch(static_cast<size_t>(6 * rows * team));
    ForRanges(0, SetCount(sets), team, 1, [&](int thread, int64_t begin, int64_t end) {
        build->backward(At<const float>(grad_out), At<const float>(saved), At<float>(grad_y), saved_is_result, sets,
                        begin, end, At<const float>(gamma), At<const float>(beta), At<const float>(mean),
                        At<const float>(invstd), static_cast<Activation>(act), slope, At<double>(grad_gamma),
                        At<double>(grad_beta), scratch.data() + 6 * rows * thread);
    });
}

// whole cache lines of values per thread
constexpr int64_t kLineValues = 16;

void LeakyRelu(uintptr_t x, uintptr_t out, int64_t count, float slope, int threads) {
    ForRanges(0, count, Team(count, count, threads), kLineValues, [&](int, int64_t begin, int64_t end) {
        build->leaky_relu(At<const float>(x) + begin, At<float>(out) + begin, end - begin, slope);
    });
}

void LeakyReluBackward(uintptr_t grad, uintptr_t saved, uintptr_t out, int64_t count, float slope, int threads) {
    ForRanges(0, count, Team(count, count, threads), kLineValues, [&](int, int64_t begin, int64_t end) {
        build->leaky_relu_backward(At<const float>(grad) + begin, At<const float>(saved) + begin,
                                   At<float>(out) + begin, end - begin, slope);
    });
}

void Transpose(uintptr_t src, uintptr_t dst, int64_t batches, int64_t rows, int64_t cols) {
    ascend_acts_cpu::TransposePlanes(At<const float>(src), At<float>(dst), batches, rows, cols);
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
    m.doc() = "the reference backend's compiled float32 passes: normalisation + activation, LeakyReLU, layout changes";
    pthread_atfork(nullptr, nullptr, MarkForkedChild);
    m.def("forward", &Forward, py::call_guard<py::gil_scoped_release>());
    m.def("backward", &Backward, py::call_guard<py::gil_scoped_release>());
    m.def("leaky_relu", &LeakyRelu, py::call_guard<py::gil_scoped_release>());
    m.def("leaky_relu_backward", &LeakyReluBackward, py::call_guard<py::gil_scoped_release>());
    m.def("transpose", &Transpose, py::call_guard<py::gil_scoped_release>(),
          "dst[b][c][r] = src[b][r][c] over `batches` (rows, cols) float32 matrices (layout.h)");
    m.def(
        "isa", [] { return build->name; }, "the build of the passes that runs: avx2 or baseline");
    m.def("use_isa", &UseIsa, "runs the given build of the passes (for tests); not thread-safe");
}
