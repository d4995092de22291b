// ascend_acts._sim: our AscendC kernels (op_kernel/) on the emulator (ascendc_sim/), for Python.
//   launch(kernel, buffers, tiling, platform)      the one launch entry (launch.h)
//   elementwise_tiling / batch_norm_leaky_relu_tiling / conv_bn_leaky_relu_eval_tiling /
//   fused_bias_leaky_relu_tiling
//                                                  op_host's tiling functions, returning its structs
//   platforms(), Platform                          the emulator's platform table
//   Rule, EmulatorError, Launch                    what a launch raises and returns
//   kernels()                                      the launch table (generated from the op table)
#include <pybind11/pybind11.h>
#include <pybind11/native_enum.h>
#include <pybind11/stl.h>

#include "kernel_table.h"
#include "launch.h"
#include "tilings.h"

namespace py = pybind11;
using namespace ascend_acts;

#include "launch_table.inc"

namespace {

using ascend_acts_sim::KernelEntry;
using ascend_acts_sim::kOpKernels;
using ascend_acts_sim::TilingKind;

const ascend_acts_sim::KernelTable kTable{std::begin(kOpKernels), std::end(kOpKernels)};

const KernelEntry& KernelWith(const std::string& name, TilingKind tiling, const char* function) {
    const KernelEntry* kernel = kTable.Find(name);
    if (kernel == nullptr || kernel->tiling != tiling) {
        std::string fitting;
        for (const KernelEntry& k : kOpKernels) {
            if (k.tiling == tiling) fitting += std::string(fitting.empty() ? "" : ", ") + k.name;
        }
        throw py::value_error(std::string(function) + "(): kernel must be one of " + fitting + ", got '" + name + "'");
    }
    return *kernel;
}

uint32_t CoresOr(uint32_t cores, uint32_t platformCores) { return cores == 0 ? platformCores : cores; }

ElementwiseTiling ElementwiseTilingFor(const std::string& kernel, uint64_t totalLength, uint32_t elementSize,
                                       const std::string& platformName, uint32_t vectorCores, float negativeSlope,
                                       float lower, float span, uint64_t indexBase) {
    const KernelEntry& k = KernelWith(kernel, TilingKind::ElementwiseTiling, "elementwise_tiling");
    const auto& platform = ascend_acts_sim::PlatformNamed(platformName);
    ElementwiseTiling tiling{};
    if (!ComputeElementwiseTiling(static_cast<ElementwiseOp>(k.variant), totalLength, elementSize,
                                  CoresOr(vectorCores, platform.vectorCores), platform.ubBytes, tiling)) {
        throw py::value_error("no tiling for " + kernel + " with " + std::to_string(totalLength) + " elements of " +
                              std::to_string(elementSize) + " bytes on " + platformName);
    }
    tiling.slope = negativeSlope;
    tiling.lower = lower;
    tiling.span = span;
    tiling.indexBase = indexBase;
    return tiling;
}

BatchNormLeakyReluTiling BatchNormTilingFor(const std::string& kernel, uint32_t batch, uint32_t channels,
                                            uint64_t planeSize, uint32_t elementSize, const std::string& platformName,
                                            uint32_t vectorCores, float negativeSlope, float eps, float momentum,
                                            bool updateRunningStats) {
    const KernelEntry& k = KernelWith(kernel, TilingKind::BatchNormLeakyReluTiling, "batch_norm_leaky_relu_tiling");
    const auto& platform = ascend_acts_sim::PlatformNamed(platformName);
    BatchNormLeakyReluTiling tiling{};
    if (!ComputeBatchNormLeakyReluTiling(static_cast<BatchNormPass>(k.variant), batch, channels, planeSize, elementSize,
                                         negativeSlope, eps, momentum, updateRunningStats,
                                         CoresOr(vectorCores, platform.vectorCores), platform.ubBytes, tiling)) {
        throw py::value_error("no tiling for " + kernel + " of shape (" + std::to_string(batch) + ", " +
                              std::to_string(channels) + ", " + std::to_string(planeSize) + " per plane) with " +
                              std::to_string(elementSize) + "-byte elements on " + platformName);
    }
    return tiling;
}

FusedBiasLeakyReluTiling FusedBiasTilingFor(const std::string& kernel, uint64_t batch, uint64_t channels,
                                            uint64_t spatial, uint32_t elementSize, bool hasBias,
                                            const std::string& platformName, uint32_t vectorCores, float negativeSlope,
                                            float scale, bool savedIsResult) {
    const KernelEntry& k = KernelWith(kernel, TilingKind::FusedBiasLeakyReluTiling, "fused_bias_leaky_relu_tiling");
    const auto& platform = ascend_acts_sim::PlatformNamed(platformName);
    FusedBiasLeakyReluTiling tiling{};
    if (!ComputeFusedBiasLeakyReluTiling(static_cast<FusedBiasPass>(k.variant), batch, channels, spatial, elementSize,
                                         hasBias, negativeSlope, scale, savedIsResult,
                                         CoresOr(vectorCores, platform.vectorCores), platform.ubBytes, tiling)) {
        throw py::value_error("no tiling for " + kernel + " of shape (" + std::to_string(batch) + ", " +
                              std::to_string(channels) + ", " + std::to_string(spatial) + " spatial) with " +
                              std::to_string(elementSize) + "-byte elements on " + platformName);
    }
    return tiling;
}

// Output side of a convolution; padding before + after the input.
int64_t OutputSide(int64_t size, int64_t kernel, int64_t stride, int64_t before, int64_t after, int64_t dilation) {
    return (size + before + after - dilation * (kernel - 1) - 1) / stride + 1;
}

ConvBnLeakyReluEvalTiling ConvEvalTilingFor(const std::vector<uint32_t>& xShape,
                                            const std::vector<uint32_t>& weightShape,
                                            const std::vector<uint32_t>& stride, const std::vector<uint32_t>& padding,
                                            const std::vector<uint32_t>& dilation, uint32_t elementSize,
                                            const std::string& platformName, float negativeSlope) {
    if (xShape.size() != 4 || weightShape.size() != 4 || stride.size() != 2 || padding.size() != 4 ||
        dilation.size() != 2) {
        throw py::value_error("conv_bn_leaky_relu_eval_tiling(): x_shape and weight_shape need 4 sizes, stride and "
                              "dilation 2, padding 4 (top, bottom, left, right)");
    }
    const auto& p = ascend_acts_sim::PlatformNamed(platformName);
    int64_t oh = stride[0] == 0 ? 0
                                : OutputSide(xShape[2], weightShape[2], stride[0], padding[0], padding[1], dilation[0]);
    int64_t ow = stride[1] == 0 ? 0
                                : OutputSide(xShape[3], weightShape[3], stride[1], padding[2], padding[3], dilation[1]);
    ConvGeometry g{xShape[0],
                   xShape[1],
                   xShape[2],
                   xShape[3],
                   weightShape[0],
                   weightShape[2],
                   weightShape[3],
                   stride[0],
                   stride[1],
                   padding[0],
                   padding[2],
                   dilation[0],
                   dilation[1],
                   uint32_t(std::max<int64_t>(oh, 0)),
                   uint32_t(std::max<int64_t>(ow, 0))};
    CubePlatform cube{p.cubeCores, p.vectorCores, p.ubBytes, p.l1Bytes, p.l0aBytes, p.l0bBytes, p.l0cBytes};
    const std::string layer = "input " + py::str(py::cast(xShape)).cast<std::string>() + ", weight " +
                              py::str(py::cast(weightShape)).cast<std::string>() + " on " + platformName;
    if (oh <= 0 || ow <= 0 || weightShape[1] != xShape[1]) {
        throw py::value_error("conv_bn_leaky_relu_eval_tiling(): no output, or weight.shape[1] is not the input's "
                              "channels (groups = 1), for " +
                              layer);
    }
    ConvBnLeakyReluEvalTiling tiling{};
    if (!ComputeConvBnLeakyReluEvalTiling(g, elementSize, negativeSlope, cube, tiling)) {
        throw py::value_error("conv_bn_leaky_relu_eval_tiling(): no eval tiling for " + layer +
                              ": two input bands and two K slices of 16 W' rows do not fit L1, or an output "
                              "row does not fit L0");
    }
    return tiling;
}

const char* TilingName(TilingKind kind) {
    switch (kind) {
        case TilingKind::ElementwiseTiling: return "ElementwiseTiling";
        case TilingKind::BatchNormLeakyReluTiling: return "BatchNormLeakyReluTiling";
        case TilingKind::ConvBnLeakyReluEvalTiling: return "ConvBnLeakyReluEvalTiling";
        case TilingKind::FusedBiasLeakyReluTiling: return "FusedBiasLeakyReluTiling";
        case TilingKind::Raw: return "bytes";
    }
    return "?";
}

template <class T>
std::string Repr(py::handle self, const char* name) {
    std::string text = std::string(name) + "(";
    bool first = true;
    for (auto attribute : py::type::handle_of(self).attr("__dict__")) {
        std::string key = py::str(attribute);
        if (key.rfind("_", 0) == 0) continue;
        text += (first ? "" : ", ") + key + "=" + py::repr(self.attr(attribute)).cast<std::string>();
        first = false;
    }
    return text + ")";
}

template <class T, class... Options>
py::class_<T, Options...> ReadOnlyClass(py::module_& m, const char* name, const char* doc) {
    py::class_<T, Options...> c(m, name, doc);
    c.def("__repr__", [name](py::handle self) { return Repr<T>(self, name); });
    return c;
}

}  // namespace

PYBIND11_MODULE(_sim, m) {
    m.doc() = "Our AscendC kernels on the emulator: one launch entry, op_host's tilings, the platforms and rules.";

    py::native_enum<ascendc_sim::Rule> rule(m, "Rule", "enum.Enum",
                                            "The rules the emulator checks (docs/emulator.md).");
#define ASCEND_ACTS_RULE_VALUE(name) rule.value(#name, ascendc_sim::Rule::name);
    ASCENDC_SIM_RULES(ASCEND_ACTS_RULE_VALUE)
#undef ASCEND_ACTS_RULE_VALUE
    rule.finalize();

    PyObject* error = PyErr_NewExceptionWithDoc(
        "ascend_acts._sim.EmulatorError",
        "A kernel broke an emulator rule: .kernel (its entry), .block (None: launch-level), .rule (a Rule).",
        PyExc_RuntimeError, nullptr);
    m.add_object("EmulatorError", py::reinterpret_steal<py::object>(error));

    ReadOnlyClass<ascendc_sim::Platform>(m, "Platform", "A modelled chip (numbers of its CANN 8.1 platform .ini).")
        .def_property_readonly("name", [](const ascendc_sim::Platform& p) { return std::string(p.name); })
        .def_readonly("vector_cores", &ascendc_sim::Platform::vectorCores)
        .def_readonly("ub_bytes", &ascendc_sim::Platform::ubBytes)
        .def_readonly("select_temporary_offset", &ascendc_sim::Platform::selectTemporaryOffset)
        .def_readonly("cube_cores", &ascendc_sim::Platform::cubeCores)
        .def_readonly("l1_bytes", &ascendc_sim::Platform::l1Bytes)
        .def_readonly("l0a_bytes", &ascendc_sim::Platform::l0aBytes)
        .def_readonly("l0b_bytes", &ascendc_sim::Platform::l0bBytes)
        .def_readonly("l0c_bytes", &ascendc_sim::Platform::l0cBytes)
        .def_readonly("bias_table_bytes", &ascendc_sim::Platform::biasTableBytes)
        .def_readonly("fixpipe_buffer_bytes", &ascendc_sim::Platform::fixpipeBufferBytes);
    m.def(
        "platforms",
        [] {
            py::tuple all(ascendc_sim::kPlatformCount);
            for (uint32_t i = 0; i < ascendc_sim::kPlatformCount; ++i) {
                all[i] = py::cast(&ascendc_sim::kPlatforms[i], py::return_value_policy::reference);
            }
            return all;
        },
        "The platform table, the default (ascend910b1) first.");

    ascend_acts_sim::DefineTimeline(m);
    using ascend_acts_sim::LaunchCounters;
    auto tupleOf = [](const std::vector<uint64_t>& v) { return py::tuple(py::cast(v)); };
    auto dictOf = [](const std::vector<std::pair<std::string, uint64_t>>& v) {
        py::dict d;
        for (const auto& [name, bytes] : v) d[py::str(name)] = bytes;
        return d;
    };
    ReadOnlyClass<LaunchCounters>(m, "Launch", "Counters of one kernel launch.")
        .def_readonly("kernel", &LaunchCounters::kernel)
        .def_readonly("gm_bytes_in", &LaunchCounters::gmBytesIn)
        .def_readonly("gm_bytes_out", &LaunchCounters::gmBytesOut)
        .def_readonly("datacopy_calls", &LaunchCounters::dataCopyCalls)
        .def_readonly("vector_instructions", &LaunchCounters::vectorInstructions)
        .def_readonly("vector_repeats", &LaunchCounters::vectorRepeats)
        .def_readonly("peak_ub_bytes", &LaunchCounters::peakUbBytes)
        .def_readonly("cube_iterations", &LaunchCounters::cubeIterations)
        .def_readonly("cube_macs", &LaunchCounters::cubeMacs)
        .def_readonly("block_dim", &LaunchCounters::blockDim)
        .def_readonly("tile_length", &LaunchCounters::tileLength)
        .def_property_readonly("block_bytes_in", [tupleOf](const LaunchCounters& c) { return tupleOf(c.blockBytesIn); })
        .def_property_readonly("block_bytes_out",
                               [tupleOf](const LaunchCounters& c) { return tupleOf(c.blockBytesOut); })
        .def_property_readonly("buffer_bytes_in", [dictOf](const LaunchCounters& c) { return dictOf(c.bufferBytesIn); })
        .def_property_readonly("buffer_bytes_out",
                               [dictOf](const LaunchCounters& c) { return dictOf(c.bufferBytesOut); })
        .def_readonly("timeline", &LaunchCounters::timeline);

    ReadOnlyClass<ElementwiseTiling>(m, "ElementwiseTiling", "op_host/elementwise_tiling.h's struct.")
        .def_readonly("total_length", &ElementwiseTiling::totalLength)
        .def_readonly("big_core_length", &ElementwiseTiling::bigCoreLength)
        .def_readonly("small_core_length", &ElementwiseTiling::smallCoreLength)
        .def_readonly("index_base", &ElementwiseTiling::indexBase)
        .def_readonly("block_dim", &ElementwiseTiling::blockDim)
        .def_readonly("big_core_count", &ElementwiseTiling::bigCoreCount)
        .def_readonly("tile_length", &ElementwiseTiling::tileLength)
        .def_readonly("slope", &ElementwiseTiling::slope)
        .def_readonly("lower", &ElementwiseTiling::lower)
        .def_readonly("span", &ElementwiseTiling::span);
    m.def("elementwise_tiling", &ElementwiseTilingFor, py::arg("kernel"), py::arg("total_length"),
          py::arg("element_size"), py::arg("platform") = "ascend910b1", py::arg("vector_cores") = 0,
          py::arg("negative_slope") = 0.0f, py::arg("lower") = 0.0f, py::arg("span") = 0.0f, py::arg("index_base") = 0,
          "ComputeElementwiseTiling for `kernel`; vector_cores 0: the platform's. ValueError when it has none.");

    ReadOnlyClass<BatchNormLeakyReluTiling>(m, "BatchNormLeakyReluTiling",
                                            "op_host/batch_norm_leaky_relu_tiling.h's struct.")
        .def_readonly("batch", &BatchNormLeakyReluTiling::batch)
        .def_readonly("channels", &BatchNormLeakyReluTiling::channels)
        .def_readonly("plane_size", &BatchNormLeakyReluTiling::planeSize)
        .def_readonly("used_core_num", &BatchNormLeakyReluTiling::usedCoreNum)
        .def_readonly("channels_per_core", &BatchNormLeakyReluTiling::channelsPerCore)
        .def_readonly("big_core_count", &BatchNormLeakyReluTiling::bigCoreCount)
        .def_readonly("tile_length", &BatchNormLeakyReluTiling::tileLength)
        .def_readonly("stats_length", &BatchNormLeakyReluTiling::statsLength)
        .def_readonly("reduce_work_length", &BatchNormLeakyReluTiling::reduceWorkLength)
        .def_readonly("negative_slope", &BatchNormLeakyReluTiling::negativeSlope)
        .def_readonly("eps", &BatchNormLeakyReluTiling::eps)
        .def_readonly("momentum", &BatchNormLeakyReluTiling::momentum)
        .def_readonly("update_running_stats", &BatchNormLeakyReluTiling::updateRunningStats)
        .def_readonly("inverse_count", &BatchNormLeakyReluTiling::inverseCount)
        .def_readonly("unbias_factor", &BatchNormLeakyReluTiling::unbiasFactor);
    m.def("batch_norm_leaky_relu_tiling", &BatchNormTilingFor, py::arg("kernel"), py::arg("batch"), py::arg("channels"),
          py::arg("plane_size"), py::arg("element_size"), py::arg("platform") = "ascend910b1",
          py::arg("vector_cores") = 0, py::arg("negative_slope") = 0.0f, py::arg("eps") = 0.0f,
          py::arg("momentum") = 0.0f, py::arg("update_running_stats") = false,
          "ComputeBatchNormLeakyReluTiling for `kernel`; vector_cores 0: the platform's. ValueError when it has none.");

    ReadOnlyClass<ConvGeometry>(m, "ConvGeometry",
                                "The eval kernel's convolution (padding: top and left; the "
                                "output size carries bottom/right).")
        .def_readonly("batch", &ConvGeometry::batch)
        .def_readonly("in_channels", &ConvGeometry::inChannels)
        .def_readonly("height", &ConvGeometry::height)
        .def_readonly("width", &ConvGeometry::width)
        .def_readonly("out_channels", &ConvGeometry::outChannels)
        .def_readonly("kernel_h", &ConvGeometry::kernelH)
        .def_readonly("kernel_w", &ConvGeometry::kernelW)
        .def_readonly("stride_h", &ConvGeometry::strideH)
        .def_readonly("stride_w", &ConvGeometry::strideW)
        .def_readonly("pad_top", &ConvGeometry::padH)
        .def_readonly("pad_left", &ConvGeometry::padW)
        .def_readonly("dilation_h", &ConvGeometry::dilationH)
        .def_readonly("dilation_w", &ConvGeometry::dilationW)
        .def_readonly("out_height", &ConvGeometry::outHeight)
        .def_readonly("out_width", &ConvGeometry::outWidth);
    ReadOnlyClass<FusedBiasLeakyReluTiling>(m, "FusedBiasLeakyReluTiling",
                                            "op_host/fused_bias_leaky_relu_tiling.h's struct.")
        .def_readonly("batch", &FusedBiasLeakyReluTiling::batch)
        .def_readonly("channels", &FusedBiasLeakyReluTiling::channels)
        .def_readonly("spatial", &FusedBiasLeakyReluTiling::spatial)
        .def_readonly("channels_per_core", &FusedBiasLeakyReluTiling::channelsPerCore)
        .def_readonly("big_core_count", &FusedBiasLeakyReluTiling::bigCoreCount)
        .def_readonly("used_core_num", &FusedBiasLeakyReluTiling::usedCoreNum)
        .def_readonly("mode", &FusedBiasLeakyReluTiling::mode)
        .def_readonly("rows_per_tile", &FusedBiasLeakyReluTiling::rowsPerTile)
        .def_readonly("tile_width", &FusedBiasLeakyReluTiling::tileWidth)
        .def_readonly("row_pitch", &FusedBiasLeakyReluTiling::rowPitch)
        .def_readonly("tile_length", &FusedBiasLeakyReluTiling::tileLength)
        .def_readonly("channel_block", &FusedBiasLeakyReluTiling::channelBlock)
        .def_readonly("has_bias", &FusedBiasLeakyReluTiling::hasBias)
        .def_readonly("saved_is_result", &FusedBiasLeakyReluTiling::savedIsResult)
        .def_readonly("negative_slope", &FusedBiasLeakyReluTiling::negativeSlope)
        .def_readonly("scale", &FusedBiasLeakyReluTiling::scale)
        .def_readonly("element_size", &FusedBiasLeakyReluTiling::elementSize);
    m.def("fused_bias_leaky_relu_tiling", &FusedBiasTilingFor, py::arg("kernel"), py::arg("batch"), py::arg("channels"),
          py::arg("spatial"), py::arg("element_size"), py::arg("has_bias") = true, py::arg("platform") = "ascend910b1",
          py::arg("vector_cores") = 0, py::arg("negative_slope") = 0.2f, py::arg("scale") = 1.4142135f,
          py::arg("saved_is_result") = true,
          "ComputeFusedBiasLeakyReluTiling for `kernel` over x viewed as (batch, channels, spatial); mode 0 Rows, "
          "1 Columns; vector_cores 0: the platform's. ValueError when it has none.");

    ReadOnlyClass<ConvBnLeakyReluEvalTiling>(m, "ConvBnLeakyReluEvalTiling",
                                             "op_host/conv_bn_leaky_relu_eval_tiling.h's struct.")
        .def_readonly("conv", &ConvBnLeakyReluEvalTiling::conv)
        .def_readonly("block_dim", &ConvBnLeakyReluEvalTiling::blockDim)
        .def_readonly("work_items", &ConvBnLeakyReluEvalTiling::workItems)
        .def_readonly("block_rows", &ConvBnLeakyReluEvalTiling::blockRows)
        .def_readonly("cout_blocks", &ConvBnLeakyReluEvalTiling::coutBlocks)
        .def_readonly("channel_groups", &ConvBnLeakyReluEvalTiling::channelGroups)
        .def_readonly("c0", &ConvBnLeakyReluEvalTiling::c0)
        .def_readonly("k_fractals", &ConvBnLeakyReluEvalTiling::kFractals)
        .def_readonly("k_chunk", &ConvBnLeakyReluEvalTiling::kChunk)
        .def_readonly("weight_slice_k", &ConvBnLeakyReluEvalTiling::weightSliceK)
        .def_readonly("weight_slices", &ConvBnLeakyReluEvalTiling::weightSlices)
        .def_readonly("weight_streamed", &ConvBnLeakyReluEvalTiling::weightStreamed)
        .def_readonly("tile_rows", &ConvBnLeakyReluEvalTiling::tileRows)
        .def_readonly("tiles_per_image", &ConvBnLeakyReluEvalTiling::tilesPerImage)
        .def_readonly("tile_positions", &ConvBnLeakyReluEvalTiling::tilePositions)
        .def_readonly("images_per_item", &ConvBnLeakyReluEvalTiling::imagesPerItem)
        .def_readonly("item_positions", &ConvBnLeakyReluEvalTiling::itemPositions)
        .def_readonly("band_rows", &ConvBnLeakyReluEvalTiling::bandRows)
        .def_readonly("pad_bottom", &ConvBnLeakyReluEvalTiling::padBottom)
        .def_readonly("pad_right", &ConvBnLeakyReluEvalTiling::padRight)
        .def_readonly("l0c_buffers", &ConvBnLeakyReluEvalTiling::l0cBuffers)
        .def_readonly("prologue_rows", &ConvBnLeakyReluEvalTiling::prologueRows)
        .def_readonly("prologue_groups", &ConvBnLeakyReluEvalTiling::prologueGroups)
        .def_readonly("epilogue_rows", &ConvBnLeakyReluEvalTiling::epilogueRows)
        .def_readonly("input_slot_bytes", &ConvBnLeakyReluEvalTiling::inputSlotBytes)
        .def_readonly("output_slot_bytes", &ConvBnLeakyReluEvalTiling::outputSlotBytes)
        .def_readonly("negative_slope", &ConvBnLeakyReluEvalTiling::negativeSlope)
        .def_property_readonly("workspace_bytes", [](const ConvBnLeakyReluEvalTiling& t) { return WorkspaceBytes(t); });
    m.def("conv_bn_leaky_relu_eval_tiling", &ConvEvalTilingFor, py::arg("x_shape"), py::arg("weight_shape"),
          py::arg("stride"), py::arg("padding"), py::arg("dilation"), py::arg("element_size"),
          py::arg("platform") = "ascend910b1", py::arg("negative_slope") = 0.0f,
          "ComputeConvBnLeakyReluEvalTiling (groups = 1; padding top, bottom, left, right). ValueError when it has "
          "none.");

    m.def(
        "kernels",
        [] {
            py::list rows;
            for (const KernelEntry& k : kOpKernels) {
                py::list params;
                for (const auto& p : k.params) {
                    const char* direction = p.direction == ascend_acts_sim::Direction::In    ? "in"
                                            : p.direction == ascend_acts_sim::Direction::Out ? "out"
                                                                                             : "inout";
                    params.append(py::make_tuple(p.name, direction));
                }
                rows.append(py::dict(py::arg("name") = k.name, py::arg("entry") = k.entry,
                                     py::arg("tiling") = TilingName(k.tiling),
                                     py::arg("wraps_integers") = k.wrapsIntegers, py::arg("params") = params));
            }
            return rows;
        },
        "The launch table: one dict per kernel (name, entry, tiling, wraps_integers, params).");

    ascend_acts_sim::DefineLaunch(m, kTable);
}
