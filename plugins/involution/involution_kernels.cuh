/*
 * Involution CUDA kernels (device code). Included by involution_kernels.cu only; other code uses
 * the launchers declared in involution_kernels.h.
 *
 * Layouts (all contiguous): x (N,C,H,W), w (N,G,K*K,Ho,Wo), out (N,C,Ho,Wo).
 * Every kernel uses a 1-D grid-stride loop with 64-bit linear indices, so any tensor size
 * that fits in memory works with any grid size.
 */
#ifndef TRTBUILD_INVOLUTION_KERNELS_CUH
#define TRTBUILD_INVOLUTION_KERNELS_CUH

#include <cstdint>

// tests/host_emulation.cpp compiles these kernels with a host compiler (it supplies __half and the
// thread-index built-ins) to check them on machines without a GPU.
#ifndef TRTBUILD_INVOLUTION_HOST_EMULATION
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#endif

namespace trtbuild
{
namespace involution
{
namespace detail
{

//! Accumulator type: fp32 for fp32 and fp16 data, fp64 for fp64 data.
template <typename T>
struct AccType
{
    using type = float;
};
template <>
struct AccType<double>
{
    using type = double;
};

__device__ __forceinline__ float loadAcc(float const* p, int64_t i)
{
    return p[i];
}
__device__ __forceinline__ float loadAcc(__half const* p, int64_t i)
{
    return __half2float(p[i]);
}
__device__ __forceinline__ double loadAcc(double const* p, int64_t i)
{
    return p[i];
}

__device__ __forceinline__ void storeAcc(float* p, int64_t i, float v)
{
    p[i] = v;
}
__device__ __forceinline__ void storeAcc(__half* p, int64_t i, float v)
{
    p[i] = __float2half_rn(v);
}
__device__ __forceinline__ void storeAcc(double* p, int64_t i, double v)
{
    p[i] = v;
}

//! Shape arguments passed by value to every kernel (all 64-bit to avoid overflow in products).
struct KernelShape
{
    int64_t N, C, H, W, G, Cg, Ho, Wo;
    int64_t K, stride, pad, dil;
};

//! Forward. One thread owns one output pixel (n, ho, wo) of one group g and a chunk of
//! `channelsPerThread` consecutive channels of that group. The K*K kernel values of the pixel are
//! read once (into registers when KS > 0, i.e. K known at compile time) and reused for every
//! channel of the chunk. Consecutive threads differ in wo, so reads of w and writes of out are
//! coalesced. KS == 0 is the generic path for any runtime K.
template <typename T, int KS>
__global__ void __launch_bounds__(256) involutionForwardKernel(
    KernelShape s, int64_t channelsPerThread, int64_t numChunks, T const* __restrict__ x,
    T const* __restrict__ w, T* __restrict__ out)
{
    using Acc = typename AccType<T>::type;
    int64_t const K = KS > 0 ? KS : s.K;
    int64_t const KK = K * K;
    int64_t const HoWo = s.Ho * s.Wo;
    int64_t const HW = s.H * s.W;
    int64_t const total = s.N * s.G * numChunks * HoWo;

    for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
         idx += static_cast<int64_t>(blockDim.x) * gridDim.x)
    {
        int64_t const wo = idx % s.Wo;
        int64_t t = idx / s.Wo;
        int64_t const ho = t % s.Ho;
        t /= s.Ho;
        int64_t const chunk = t % numChunks;
        t /= numChunks;
        int64_t const g = t % s.G;
        int64_t const n = t / s.G;

        int64_t const cBegin = g * s.Cg + chunk * channelsPerThread;
        int64_t cEnd = cBegin + channelsPerThread;
        if (cEnd > (g + 1) * s.Cg)
        {
            cEnd = (g + 1) * s.Cg;
        }
        int64_t const pix = ho * s.Wo + wo;
        int64_t const wBase = (n * s.G + g) * KK * HoWo + pix;
        int64_t const hBase = ho * s.stride - s.pad;
        int64_t const wiBase = wo * s.stride - s.pad;

        if constexpr (KS > 0)
        {
            Acc wk[KS * KS];
#pragma unroll
            for (int k = 0; k < KS * KS; ++k)
            {
                wk[k] = loadAcc(w, wBase + k * HoWo);
            }
            for (int64_t c = cBegin; c < cEnd; ++c)
            {
                int64_t const xBase = (n * s.C + c) * HW;
                Acc acc = 0;
#pragma unroll
                for (int kh = 0; kh < KS; ++kh)
                {
                    int64_t const hi = hBase + kh * s.dil;
                    if (hi < 0 || hi >= s.H)
                    {
                        continue;
                    }
#pragma unroll
                    for (int kw = 0; kw < KS; ++kw)
                    {
                        int64_t const wi = wiBase + kw * s.dil;
                        if (wi >= 0 && wi < s.W)
                        {
                            acc += wk[kh * KS + kw] * loadAcc(x, xBase + hi * s.W + wi);
                        }
                    }
                }
                storeAcc(out, (n * s.C + c) * HoWo + pix, acc);
            }
        }
        else
        {
            for (int64_t c = cBegin; c < cEnd; ++c)
            {
                int64_t const xBase = (n * s.C + c) * HW;
                Acc acc = 0;
                for (int64_t kh = 0; kh < K; ++kh)
                {
                    int64_t const hi = hBase + kh * s.dil;
                    if (hi < 0 || hi >= s.H)
                    {
                        continue;
                    }
                    for (int64_t kw = 0; kw < K; ++kw)
                    {
                        int64_t const wi = wiBase + kw * s.dil;
                        if (wi >= 0 && wi < s.W)
                        {
                            acc += loadAcc(w, wBase + (kh * K + kw) * HoWo) * loadAcc(x, xBase + hi * s.W + wi);
                        }
                    }
                }
                storeAcc(out, (n * s.C + c) * HoWo + pix, acc);
            }
        }
    }
}

//! Gradient w.r.t. the input, as a gather (no atomics): one thread per input element
//! (n, c, h, wi) sums gradOut[n,c,ho,wo] * w[n,g,kh*K+kw,ho,wo] over every (kh, kw, ho, wo)
//! whose tap lands on (h, wi), i.e. ho*stride - pad + kh*dil == h (likewise for width).
template <typename T>
__global__ void __launch_bounds__(256) involutionBackwardInputKernel(
    KernelShape s, T const* __restrict__ gradOut, T const* __restrict__ w, T* __restrict__ gradX)
{
    using Acc = typename AccType<T>::type;
    int64_t const KK = s.K * s.K;
    int64_t const HoWo = s.Ho * s.Wo;
    int64_t const total = s.N * s.C * s.H * s.W;

    for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
         idx += static_cast<int64_t>(blockDim.x) * gridDim.x)
    {
        int64_t const wi = idx % s.W;
        int64_t t = idx / s.W;
        int64_t const h = t % s.H;
        t /= s.H;
        int64_t const c = t % s.C;
        int64_t const n = t / s.C;
        int64_t const g = c / s.Cg;

        int64_t const gBase = (n * s.C + c) * HoWo;
        int64_t const wBase = (n * s.G + g) * KK * HoWo;
        Acc acc = 0;
        for (int64_t kh = 0; kh < s.K; ++kh)
        {
            int64_t const hNum = h + s.pad - kh * s.dil;
            if (hNum < 0)
            {
                break; // decreases with kh: no later kh can land in range either
            }
            if (hNum % s.stride != 0)
            {
                continue;
            }
            int64_t const ho = hNum / s.stride;
            if (ho >= s.Ho)
            {
                continue;
            }
            for (int64_t kw = 0; kw < s.K; ++kw)
            {
                int64_t const wNum = wi + s.pad - kw * s.dil;
                if (wNum < 0)
                {
                    break;
                }
                if (wNum % s.stride != 0)
                {
                    continue;
                }
                int64_t const wo = wNum / s.stride;
                if (wo >= s.Wo)
                {
                    continue;
                }
                int64_t const pix = ho * s.Wo + wo;
                acc += loadAcc(gradOut, gBase + pix) * loadAcc(w, wBase + (kh * s.K + kw) * HoWo + pix);
            }
        }
        storeAcc(gradX, idx, acc);
    }
}

//! Gradient w.r.t. the per-pixel kernels: one thread per weight element (n, g, k, ho, wo) sums
//! gradOut[n,c,ho,wo] * x[n,c,hi,wi] over the C/G channels of group g (zero when the tap is
//! outside the input). Consecutive threads differ in wo: reads and writes are coalesced.
template <typename T>
__global__ void __launch_bounds__(256) involutionBackwardWeightKernel(
    KernelShape s, T const* __restrict__ gradOut, T const* __restrict__ x, T* __restrict__ gradW)
{
    using Acc = typename AccType<T>::type;
    int64_t const KK = s.K * s.K;
    int64_t const HoWo = s.Ho * s.Wo;
    int64_t const HW = s.H * s.W;
    int64_t const total = s.N * s.G * KK * HoWo;

    for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
         idx += static_cast<int64_t>(blockDim.x) * gridDim.x)
    {
        int64_t const wo = idx % s.Wo;
        int64_t t = idx / s.Wo;
        int64_t const ho = t % s.Ho;
        t /= s.Ho;
        int64_t const k = t % KK;
        t /= KK;
        int64_t const g = t % s.G;
        int64_t const n = t / s.G;

        int64_t const hi = ho * s.stride - s.pad + (k / s.K) * s.dil;
        int64_t const wi = wo * s.stride - s.pad + (k % s.K) * s.dil;
        Acc acc = 0;
        if (hi >= 0 && hi < s.H && wi >= 0 && wi < s.W)
        {
            int64_t const pix = ho * s.Wo + wo;
            int64_t const tap = hi * s.W + wi;
            for (int64_t c = g * s.Cg; c < (g + 1) * s.Cg; ++c)
            {
                acc += loadAcc(gradOut, (n * s.C + c) * HoWo + pix) * loadAcc(x, (n * s.C + c) * HW + tap);
            }
        }
        storeAcc(gradW, idx, acc);
    }
}

} // namespace detail
} // namespace involution
} // namespace trtbuild

#endif // TRTBUILD_INVOLUTION_KERNELS_CUH
