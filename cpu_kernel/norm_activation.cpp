// See norm_activation.h. Each formula below is reference_batch_norm.py's (named there), in the same dtypes and
// order of roundings; only the row sums are more accurate (float32 lanes of 32 values, merged in float64).
// No C++ library templates or inline functions here (builtins instead, scratch memory from the caller): compiled with
// -mavx2, their weak copies could be the ones the linker keeps for the baseline build too.
#include "norm_activation.h"

#include <cfloat>

#include "lanes.h"

namespace ascend_acts_cpu {
namespace ASCEND_ACTS_CPU_ISA {
namespace {

// totals[k] += the sums over [0, size) of the K terms that terms(i, ...) adds at i: eight values at a time into
// float32 lanes (vector_terms) or one (scalar_terms), each segment of kSegment values merged in float64.
template <int K, typename VectorTerms, typename ScalarTerms>
ALWAYS_INLINE void SumTerms(int64_t size, VectorTerms vector_terms, ScalarTerms scalar_terms, double (&totals)[K]) {
    for (int64_t start = 0; start < size; start += kSegment) {
        const int64_t end = Min(size, start + kSegment);
        V lanes[K] = {};
        float rest[K] = {};
        int64_t i = start;
        for (; i + kLanes <= end; i += kLanes) vector_terms(i, lanes);
        for (; i < end; ++i) scalar_terms(i, rest);
        for (int k = 0; k < K; ++k) totals[k] += Total(lanes[k]) + static_cast<double>(rest[k]);
    }
}

// The activation of z: torch's relu (z < 0 ? +0 : z; -0 and NaN stay) and leaky_relu (z > 0 ? z : z * slope).
template <Activation A, typename T>
ALWAYS_INLINE T Activate(T z, T zero, T slope) {
    if constexpr (A == Activation::kRelu) return IfLess(z, zero, zero, z);
    if constexpr (A == Activation::kLeakyRelu) return IfGreater(z, zero, z, z * slope);
    return z;
}

// The statistics set's rows: fn(row, channel) for each, in the rows' order.
template <typename Fn>
ALWAYS_INLINE void ForRows(const Sets& sets, int64_t set, Fn fn) {
    if (sets.groups == 0) {
        for (int64_t sample = 0; sample < sets.n; ++sample) fn(sample * sets.c + set, set);
        return;
    }
    const int64_t per_group = sets.c / sets.groups;
    const int64_t first = (set / sets.groups) * sets.c + (set % sets.groups) * per_group;
    for (int64_t r = 0; r < per_group; ++r) fn(first + r, first % sets.c + r);
}

int64_t RowsPerSet(const Sets& sets) { return sets.groups == 0 ? sets.n : sets.c / sets.groups; }

int64_t Count(const Sets& sets) { return RowsPerSet(sets) * sets.size; }

template <Activation A>
void ForwardSets(const float* y, float* out, const Sets& sets, int64_t first, int64_t last, const float* gamma,
                 const float* beta, float eps, float slope, bool centre_on_mean, float* mean_out, float* invstd_out,
                 float* variance_out) {
    const int64_t size = sets.size;
    const double count = static_cast<double>(Count(sets));
    const V zero{}, slopes = Splat(slope);
    for (int64_t set = first; set < last; ++set) {
        // _shift: the estimate of the mean from the rows' sums
        double sums[1] = {0};
        ForRows(sets, set, [&](int64_t row, int64_t) {
            const float* p = y + row * size;
            SumTerms<1>(
                size, [&](int64_t i, V* lanes) { lanes[0] += Load(p + i); },
                [&](int64_t i, float* rest) { rest[0] += p[i]; }, sums);
        });
        const float shift = static_cast<float>(sums[0] / count);
        // the centred values' sums and squares
        double moments[2] = {0, 0};
        const V shifts = Splat(shift);
        ForRows(sets, set, [&](int64_t row, int64_t) {
            const float* p = y + row * size;
            SumTerms<2>(
                size,
                [&](int64_t i, V* lanes) {
                    const V d = Load(p + i) - shifts;
                    lanes[0] += d;
                    lanes[1] += d * d;
                },
                [&](int64_t i, float* rest) {
                    const float d = p[i] - shift;
                    rest[0] += d;
                    rest[1] += d * d;
                },
                moments);
        });
        // _normalisation
        double offset = moments[0] / count;
        if (!__builtin_isfinite(offset)) offset = 0;
        const float mean = static_cast<float>(static_cast<double>(shift) + offset);
        // squares whose sum overflows float32 (values near 1e19 and beyond; a total within half a unit of FLT_MAX
        // rounds to it, as torch's float32 sum does): torch's variance is inf, as the NumPy passes' (not inf - inf);
        // decided on the set's total, which the lanes' partial sums split by layout
        const bool overflows = static_cast<float>(moments[1]) > FLT_MAX;
        const double square_mean = overflows ? __builtin_inf() : moments[1] / count;
        double variance = square_mean == __builtin_inf() ? square_mean : square_mean - offset * offset;
        if (variance < 0) variance = 0;  // NaN stays
        const float variance32 = static_cast<float>(variance);
        const float invstd = 1.0f / __builtin_sqrtf(variance32 + eps);
        mean_out[set] = mean;
        invstd_out[set] = invstd;
        variance_out[set] = variance32;
        // out = act((y - shift) * scale + bias)
        ForRows(sets, set, [&](int64_t row, int64_t channel) {
            const float scale = gamma[channel] * invstd;
            const float bias = centre_on_mean ? beta[channel]
                                              : static_cast<float>(static_cast<double>(beta[channel]) -
                                                                   offset * static_cast<double>(scale));
            const float centre = centre_on_mean ? mean : shift;
            const float* p = y + row * size;
            float* o = out + row * size;
            const V centres = Splat(centre), scales = Splat(scale), biases = Splat(bias);
            int64_t i = 0;
            for (; i + kLanes <= size; i += kLanes) {
                V z = (Load(p + i) - centres) * scales;
                Store(o + i, Activate<A>(z + biases, zero, slopes));
            }
            for (; i < size; ++i) {
                float z = (p[i] - centre) * scale;
                o[i] = Activate<A>(z + bias, 0.0f, slope);
            }
        });
    }
}

// What the backward recovers of a row: u (x-hat up to the row's factor) and dz (grad_out through the activation),
// from the output (kResult: z = out > 0 ? out : out / slope, u = z - beta, dz = out > 0 ? g : g * slope) or from the
// conv output (u = y - mean, z = u * scale + beta, dz from z's sign).
struct Recovery {
    float shift, scale, bias, slope;
};

template <bool kResult, Activation A, typename T>
ALWAYS_INLINE void Recover(T saved, T grad, T shift, T scale, T bias, T slope, T zero, T& u, T& dz) {
    if constexpr (kResult) {
        const T z = IfGreater(saved, zero, saved, saved / slope);
        u = z - shift;
        dz = IfGreater(saved, zero, grad, grad * slope);
    } else {
        u = saved - shift;
        if constexpr (A == Activation::kNone) {
            dz = grad;
        } else {
            const T z = u * scale + bias;
            if constexpr (A == Activation::kRelu) dz = IfLessEqual(z, zero, zero, grad);
            if constexpr (A == Activation::kLeakyRelu) dz = IfGreater(z, zero, grad, grad * slope);
        }
    }
}

template <bool kResult, Activation A>
void BackwardSets(const float* grad_out, const float* saved, float* grad_y, const Sets& sets, int64_t first,
                  int64_t last, const float* gamma, const float* beta, const float* mean, const float* invstd,
                  float slope, double* grad_gamma, double* grad_beta, double* scratch) {
    const int64_t size = sets.size;
    const int64_t count = Count(sets);
    const V zero{}, slopes = Splat(slope);
    double* row_sums = scratch;                                                 // per row of the set: dz, dz * u, u
    float* factors = reinterpret_cast<float*>(scratch + 3 * RowsPerSet(sets));  // per row: P, Q, R
    auto recovery = [&](int64_t set, int64_t channel) {
        if constexpr (kResult) return Recovery{beta[channel], 0.0f, 0.0f, slope};
        const float scale = static_cast<float>(static_cast<double>(invstd[set]) * gamma[channel]);
        return Recovery{mean[set], scale, beta[channel], slope};
    };
    for (int64_t set = first; set < last; ++set) {
        int64_t rows = 0;
        // pass (1): the row sums of dz, dz * u and u
        ForRows(sets, set, [&](int64_t row, int64_t channel) {
            const Recovery k = recovery(set, channel);
            const float* g = grad_out + row * size;
            const float* s = saved + row * size;
            const V shift = Splat(k.shift), scale = Splat(k.scale), bias = Splat(k.bias);
            double sums[3] = {0, 0, 0};
            SumTerms<3>(
                size,
                [&](int64_t i, V* lanes) {
                    V u, dz;
                    Recover<kResult, A>(Load(s + i), Load(g + i), shift, scale, bias, slopes, zero, u, dz);
                    lanes[0] += dz;
                    lanes[1] += dz * u;
                    lanes[2] += u;
                },
                [&](int64_t i, float* rest) {
                    float u, dz;
                    Recover<kResult, A>(s[i], g[i], k.shift, k.scale, k.bias, k.slope, 0.0f, u, dz);
                    rest[0] += dz;
                    rest[1] += dz * u;
                    rest[2] += u;
                },
                sums);
            for (int k3 = 0; k3 < 3; ++k3) row_sums[3 * rows + k3] = sums[k3];
            ++rows;
        });
        // _centred: u of a conv output centred exactly (the rounded mean leaves it a little off)
        double centre = 0;
        if (!kResult) {
            double total_u = 0;
            for (int64_t r = 0; r < rows; ++r) total_u += row_sums[3 * r + 2];
            centre = total_u / static_cast<double>(count);
            if (!__builtin_isfinite(centre)) centre = 0;
            for (int64_t r = 0; r < rows; ++r) row_sums[3 * r + 1] -= centre * row_sums[3 * r];
        }
        const double set_invstd = invstd[set];
        // u_to_xhat: 1 / gamma (from the output), or invstd
        auto u_to_xhat = [&](int64_t channel) {
            return kResult ? static_cast<double>(1.0f / gamma[channel]) : set_invstd;
        };
        // the factors of grad_y = P dz + Q u + R per row (_batch_factors, _group_factors)
        if (sets.groups == 0) {
            double sum_dz = 0, sum_dz_u = 0;
            for (int64_t r = 0; r < rows; ++r) {
                sum_dz += row_sums[3 * r];
                sum_dz_u += row_sums[3 * r + 1];
            }
            const double channel_gamma = sum_dz_u * (count ? u_to_xhat(set) : 0.0);
            const double k = static_cast<double>(gamma[set]) * set_invstd;
            const float q = static_cast<float>(-k * u_to_xhat(set) * channel_gamma / static_cast<double>(count));
            const float r = static_cast<float>(-k * sum_dz / static_cast<double>(count));
            factors[0] = static_cast<float>(k);
            factors[1] = q;
            factors[2] = static_cast<float>(r - static_cast<double>(q) * centre);
            grad_gamma[set] = channel_gamma;
            grad_beta[set] = sum_dz;
        } else {
            double a = 0, b = 0;
            int64_t r = 0;
            ForRows(sets, set, [&](int64_t row, int64_t channel) {
                const double dz_xhat = row_sums[3 * r + 1] * u_to_xhat(channel);
                a += row_sums[3 * r] * static_cast<double>(gamma[channel]);
                b += dz_xhat * static_cast<double>(gamma[channel]);
                grad_gamma[row] = dz_xhat;
                grad_beta[row] = row_sums[3 * r];
                ++r;
            });
            a /= static_cast<double>(count);
            b /= static_cast<double>(count);
            r = 0;
            ForRows(sets, set, [&](int64_t, int64_t channel) {
                const float q = static_cast<float>(-set_invstd * b * u_to_xhat(channel));
                const float rr = static_cast<float>(-set_invstd * a);
                float* f = factors + 3 * r++;
                f[0] = static_cast<float>(set_invstd * gamma[channel]);
                f[1] = q;
                f[2] = static_cast<float>(rr - static_cast<double>(q) * centre);
            });
        }
        // pass (2): grad_y = (P dz + Q u) + R
        int64_t r = 0;
        ForRows(sets, set, [&](int64_t row, int64_t channel) {
            const Recovery k = recovery(set, channel);
            const float* f = sets.groups == 0 ? factors : factors + 3 * r++;
            const float* g = grad_out + row * size;
            const float* s = saved + row * size;
            float* out = grad_y + row * size;
            const V shift = Splat(k.shift), scale = Splat(k.scale), bias = Splat(k.bias);
            const V p = Splat(f[0]), q = Splat(f[1]), rr = Splat(f[2]);
            int64_t i = 0;
            for (; i + kLanes <= size; i += kLanes) {
                V u, dz;
                Recover<kResult, A>(Load(s + i), Load(g + i), shift, scale, bias, slopes, zero, u, dz);
                const V pd = dz * p, qu = u * q;
                Store(out + i, (pd + qu) + rr);
            }
            for (; i < size; ++i) {
                float u, dz;
                Recover<kResult, A>(s[i], g[i], k.shift, k.scale, k.bias, k.slope, 0.0f, u, dz);
                const float pd = dz * f[0], qu = u * f[1];
                out[i] = (pd + qu) + f[2];
            }
        });
    }
}

}  // namespace

void Forward(const float* y, float* out, Sets sets, int64_t first, int64_t last, const float* gamma, const float* beta,
             float eps, Activation act, float slope, bool centre_on_mean, float* mean, float* invstd, float* variance) {
    switch (act) {
        case Activation::kRelu:
            return ForwardSets<Activation::kRelu>(y, out, sets, first, last, gamma, beta, eps, slope, centre_on_mean,
                                                  mean, invstd, variance);
        case Activation::kLeakyRelu:
            return ForwardSets<Activation::kLeakyRelu>(y, out, sets, first, last, gamma, beta, eps, slope,
                                                       centre_on_mean, mean, invstd, variance);
        default:
            return ForwardSets<Activation::kNone>(y, out, sets, first, last, gamma, beta, eps, slope, centre_on_mean,
                                                  mean, invstd, variance);
    }
}

void Backward(const float* grad_out, const float* saved, float* grad_y, bool saved_is_result, Sets sets, int64_t first,
              int64_t last, const float* gamma, const float* beta, const float* mean, const float* invstd,
              Activation act, float slope, double* grad_gamma, double* grad_beta, double* scratch) {
#define ASCEND_ACTS_CPU_BACKWARD(result, activation)                                                               \
    return BackwardSets<result, activation>(grad_out, saved, grad_y, sets, first, last, gamma, beta, mean, invstd, \
                                            slope, grad_gamma, grad_beta, scratch)
    if (saved_is_result) ASCEND_ACTS_CPU_BACKWARD(true, Activation::kLeakyRelu);  // slope > 0 (1: no activation)
    switch (act) {
        case Activation::kRelu: ASCEND_ACTS_CPU_BACKWARD(false, Activation::kRelu);
        case Activation::kLeakyRelu: ASCEND_ACTS_CPU_BACKWARD(false, Activation::kLeakyRelu);
        default: ASCEND_ACTS_CPU_BACKWARD(false, Activation::kNone);
    }
#undef ASCEND_ACTS_CPU_BACKWARD
}

}  // namespace ASCEND_ACTS_CPU_ISA
}  // namespace ascend_acts_cpu
