// ascend_acts._sim_tests: the test kernels of this folder behind the same launch entry as the product
// kernels (ascendc_sim/binding/launch.h); its types (Launch, Rule, EmulatorError) are ascend_acts._sim's.
#include <pybind11/pybind11.h>

#include "launch.h"

namespace ascend_acts_sim {
std::vector<KernelEntry> BrokenKernels();
std::vector<KernelEntry> CubeKernels();
std::vector<KernelEntry> ConvEvalBrokenKernels();
}  // namespace ascend_acts_sim

PYBIND11_MODULE(_sim_tests, m) {
    using namespace ascend_acts_sim;
    pybind11::module_::import("ascend_acts._sim");  // registers the types launch returns and raises
    static const std::vector<KernelEntry> kernels = [] {
        std::vector<KernelEntry> all = BrokenKernels();
        for (auto& k : CubeKernels()) all.push_back(k);
        for (auto& k : ConvEvalBrokenKernels()) all.push_back(k);
        return all;
    }();
    m.doc() = "Deliberately broken kernels, one per emulator rule, and their controls (tests/sim_kernels/).";
    DefineLaunch(m, KernelTable{kernels.data(), kernels.data() + kernels.size()});
}
