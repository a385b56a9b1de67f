/*
 * Host emulation of the involution CUDA kernels, for checking them where there is no GPU.
 *
 * Compiles ../involution_kernels.cuh (the exact device code the GPU runs) with a host C++
 * compiler: the CUDA keywords become no-ops, blockIdx/threadIdx/blockDim/gridDim become globals
 * and a "launch" runs every thread of every block one after another. Kernels never synchronize or
 * share memory between threads, so this sequential order computes what the GPU computes.
 * tests/test_involution_kernels_emulated.py builds it as a shared library and drives it with
 * ctypes.
 *
 *   g++ -std=c++17 -O1 -shared -fPIC host_emulation.cpp -o libinvolution_emulation.so
 */
#include <cstdint>

#define TRTBUILD_INVOLUTION_HOST_EMULATION 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)

struct EmulatedDim3
{
    unsigned int x{1};
    unsigned int y{1};
    unsigned int z{1};
};
static EmulatedDim3 blockIdx;
static EmulatedDim3 threadIdx;
static EmulatedDim3 blockDim;
static EmulatedDim3 gridDim;

#ifdef __FLT16_MAX__
#define EMULATION_HAS_HALF 1
//! IEEE binary16 storage with round-to-nearest-even conversion, as cuda_fp16's __half.
struct __half
{
    _Float16 value;
};
inline float __half2float(__half h)
{
    return static_cast<float>(h.value);
}
inline __half __float2half_rn(float f)
{
    return __half{static_cast<_Float16>(f)};
}
#else
#define EMULATION_HAS_HALF 0
struct __half
{
    unsigned short bits;
};
inline float __half2float(__half)
{
    return 0.0f;
}
inline __half __float2half_rn(float)
{
    return __half{0};
}
#endif

#include "../involution_kernels.cuh"

using trtbuild::involution::detail::KernelShape;

namespace
{

//! Run `body` once per (block, thread) of a 1-D launch, setting the index built-ins.
template <typename Body>
void emulateLaunch(unsigned int blocks, unsigned int threads, Body&& body)
{
    gridDim.x = blocks;
    blockDim.x = threads;
    for (unsigned int b = 0; b < blocks; ++b)
    {
        blockIdx.x = b;
        for (unsigned int t = 0; t < threads; ++t)
        {
            threadIdx.x = t;
            body();
        }
    }
}

KernelShape makeShape(int64_t const* dims)
{
    // dims: N, C, H, W, G, Ho, Wo, K, stride, pad, dil
    KernelShape s{};
    s.N = dims[0];
    s.C = dims[1];
    s.H = dims[2];
    s.W = dims[3];
    s.G = dims[4];
    s.Cg = dims[1] / dims[4];
    s.Ho = dims[5];
    s.Wo = dims[6];
    s.K = dims[7];
    s.stride = dims[8];
    s.pad = dims[9];
    s.dil = dims[10];
    return s;
}

template <typename T, int KS>
void forwardKs(KernelShape const& s, int64_t cpt, int64_t chunks, void const* x, void const* w, void* out,
    unsigned int blocks, unsigned int threads)
{
    emulateLaunch(blocks, threads, [&] {
        trtbuild::involution::detail::involutionForwardKernel<T, KS>(s, cpt, chunks, static_cast<T const*>(x),
            static_cast<T const*>(w), static_cast<T*>(out));
    });
}

template <typename T>
void forward(KernelShape const& s, int64_t cpt, int64_t chunks, int specialize, void const* x, void const* w,
    void* out, unsigned int blocks, unsigned int threads)
{
    // Same dispatch as launchForward in involution_kernels.cu, unless specialize == 0 forces the
    // generic path.
    int const k = specialize ? static_cast<int>(s.K) : 0;
    switch (k)
    {
    case 3: forwardKs<T, 3>(s, cpt, chunks, x, w, out, blocks, threads); break;
    case 5: forwardKs<T, 5>(s, cpt, chunks, x, w, out, blocks, threads); break;
    case 7: forwardKs<T, 7>(s, cpt, chunks, x, w, out, blocks, threads); break;
    default: forwardKs<T, 0>(s, cpt, chunks, x, w, out, blocks, threads); break;
    }
}

} // namespace

extern "C"
{

//! 1 when __half is emulated with a real binary16 type.
int emulation_has_half()
{
    return EMULATION_HAS_HALF;
}

//! dtype: 0 = float32, 1 = float16, 2 = float64. Returns 0 on success, 1 for an unknown dtype.
int emulated_forward(int dtype, int64_t const* dims, int64_t channelsPerThread, int specialize, void const* x,
    void const* w, void* out, unsigned int blocks, unsigned int threads)
{
    KernelShape const s = makeShape(dims);
    int64_t const chunks = (s.Cg + channelsPerThread - 1) / channelsPerThread;
    switch (dtype)
    {
    case 0: forward<float>(s, channelsPerThread, chunks, specialize, x, w, out, blocks, threads); return 0;
    case 1: forward<__half>(s, channelsPerThread, chunks, specialize, x, w, out, blocks, threads); return 0;
    case 2: forward<double>(s, channelsPerThread, chunks, specialize, x, w, out, blocks, threads); return 0;
    default: return 1;
    }
}

int emulated_backward_input(int dtype, int64_t const* dims, void const* gradOut, void const* w, void* gradX,
    unsigned int blocks, unsigned int threads)
{
    KernelShape const s = makeShape(dims);
    auto run = [&](auto tag) {
        using T = decltype(tag);
        emulateLaunch(blocks, threads, [&] {
            trtbuild::involution::detail::involutionBackwardInputKernel<T>(
                s, static_cast<T const*>(gradOut), static_cast<T const*>(w), static_cast<T*>(gradX));
        });
    };
    switch (dtype)
    {
    case 0: run(float{}); return 0;
    case 1: run(__half{}); return 0;
    case 2: run(double{}); return 0;
    default: return 1;
    }
}

int emulated_backward_weight(int dtype, int64_t const* dims, void const* gradOut, void const* x, void* gradW,
    unsigned int blocks, unsigned int threads)
{
    KernelShape const s = makeShape(dims);
    auto run = [&](auto tag) {
        using T = decltype(tag);
        emulateLaunch(blocks, threads, [&] {
            trtbuild::involution::detail::involutionBackwardWeightKernel<T>(
                s, static_cast<T const*>(gradOut), static_cast<T const*>(x), static_cast<T*>(gradW));
        });
    };
    switch (dtype)
    {
    case 0: run(float{}); return 0;
    case 1: run(__half{}); return 0;
    case 2: run(double{}); return 0;
    default: return 1;
    }
}

} // extern "C"
