/*
 * Involution CUDA kernels: launchers and parameter helpers (see involution_kernels.h).
 */
#include "involution_kernels.cuh"
#include "involution_kernels.h"

#include <algorithm>
#include <limits>

namespace trtbuild
{
namespace involution
{
namespace
{

constexpr int kThreadsPerBlock = 256;
//! Grid-stride loops cover the rest; this keeps the grid well inside CUDA's limits.
constexpr int64_t kMaxBlocks = int64_t{1} << 20;
//! Forward: aim for at least this many threads before giving each thread more channels.
constexpr int64_t kForwardTargetThreads = int64_t{1} << 17;

dim3 gridFor(int64_t totalThreads)
{
    int64_t blocks = (totalThreads + kThreadsPerBlock - 1) / kThreadsPerBlock;
    blocks = std::max<int64_t>(1, std::min(blocks, kMaxBlocks));
    return dim3(static_cast<unsigned int>(blocks));
}

detail::KernelShape toKernelShape(InvolutionParams const& p)
{
    detail::KernelShape s{};
    s.N = p.batch;
    s.C = p.channels;
    s.H = p.height;
    s.W = p.width;
    s.G = p.groups;
    s.Cg = p.channels / p.groups;
    s.Ho = p.outHeight;
    s.Wo = p.outWidth;
    s.K = p.kernelSize;
    s.stride = p.stride;
    s.pad = p.padding;
    s.dil = p.dilation;
    return s;
}

template <typename T>
cudaError_t launchForward(InvolutionParams const& p, T const* x, T const* w, T* out, cudaStream_t stream)
{
    if (validateInvolutionParams(p) != nullptr)
    {
        return cudaErrorInvalidValue;
    }
    if (involutionOutputElements(p) == 0)
    {
        return cudaSuccess;
    }
    if (x == nullptr || w == nullptr || out == nullptr)
    {
        return cudaErrorInvalidValue;
    }
    detail::KernelShape const s = toKernelShape(p);
    // Split each group's channels into chunks only as far as needed to fill the GPU: fewer chunks
    // means each per-pixel kernel value is read from memory fewer times.
    int64_t const pixelsTimesGroups = s.N * s.G * s.Ho * s.Wo;
    int64_t numChunks = (kForwardTargetThreads + pixelsTimesGroups - 1) / pixelsTimesGroups;
    numChunks = std::max<int64_t>(1, std::min(numChunks, s.Cg));
    int64_t const channelsPerThread = (s.Cg + numChunks - 1) / numChunks;
    numChunks = (s.Cg + channelsPerThread - 1) / channelsPerThread;

    dim3 const grid = gridFor(pixelsTimesGroups * numChunks);
    dim3 const block(kThreadsPerBlock);
    switch (p.kernelSize)
    {
    case 3:
        detail::involutionForwardKernel<T, 3><<<grid, block, 0, stream>>>(s, channelsPerThread, numChunks, x, w, out);
        break;
    case 5:
        detail::involutionForwardKernel<T, 5><<<grid, block, 0, stream>>>(s, channelsPerThread, numChunks, x, w, out);
        break;
    case 7:
        detail::involutionForwardKernel<T, 7><<<grid, block, 0, stream>>>(s, channelsPerThread, numChunks, x, w, out);
        break;
    default:
        detail::involutionForwardKernel<T, 0><<<grid, block, 0, stream>>>(s, channelsPerThread, numChunks, x, w, out);
        break;
    }
    return cudaGetLastError();
}

template <typename T>
cudaError_t launchBackwardInput(
    InvolutionParams const& p, T const* gradOut, T const* w, T* gradX, cudaStream_t stream)
{
    if (validateInvolutionParams(p) != nullptr)
    {
        return cudaErrorInvalidValue;
    }
    int64_t const total = involutionInputElements(p);
    if (total == 0)
    {
        return cudaSuccess;
    }
    if (gradOut == nullptr || w == nullptr || gradX == nullptr)
    {
        return cudaErrorInvalidValue;
    }
    detail::involutionBackwardInputKernel<T>
        <<<gridFor(total), dim3(kThreadsPerBlock), 0, stream>>>(toKernelShape(p), gradOut, w, gradX);
    return cudaGetLastError();
}

template <typename T>
cudaError_t launchBackwardWeight(
    InvolutionParams const& p, T const* gradOut, T const* x, T* gradW, cudaStream_t stream)
{
    if (validateInvolutionParams(p) != nullptr)
    {
        return cudaErrorInvalidValue;
    }
    int64_t const total = involutionWeightElements(p);
    if (total == 0)
    {
        return cudaSuccess;
    }
    if (gradOut == nullptr || x == nullptr || gradW == nullptr)
    {
        return cudaErrorInvalidValue;
    }
    detail::involutionBackwardWeightKernel<T>
        <<<gridFor(total), dim3(kThreadsPerBlock), 0, stream>>>(toKernelShape(p), gradOut, x, gradW);
    return cudaGetLastError();
}

} // namespace

int64_t involutionOutputSize(
    int64_t inputSize, int32_t kernelSize, int32_t stride, int32_t padding, int32_t dilation) noexcept
{
    if (stride <= 0)
    {
        return 0;
    }
    int64_t const span = static_cast<int64_t>(dilation) * (kernelSize - 1) + 1;
    int64_t const numerator = inputSize + 2 * static_cast<int64_t>(padding) - span;
    if (numerator < 0)
    {
        return 0;
    }
    return numerator / stride + 1;
}

InvolutionParams makeInvolutionParams(int64_t batch, int64_t channels, int64_t height, int64_t width,
    int64_t groups, int32_t kernelSize, int32_t stride, int32_t padding, int32_t dilation) noexcept
{
    InvolutionParams p;
    p.batch = batch;
    p.channels = channels;
    p.height = height;
    p.width = width;
    p.groups = groups;
    p.kernelSize = kernelSize;
    p.stride = stride;
    p.padding = padding;
    p.dilation = dilation;
    p.outHeight = involutionOutputSize(height, kernelSize, stride, padding, dilation);
    p.outWidth = involutionOutputSize(width, kernelSize, stride, padding, dilation);
    return p;
}

char const* validateInvolutionParams(InvolutionParams const& p) noexcept
{
    if (p.kernelSize < 1)
    {
        return "involution: kernel_size must be >= 1";
    }
    if (p.stride < 1)
    {
        return "involution: stride must be >= 1";
    }
    if (p.dilation < 1)
    {
        return "involution: dilation must be >= 1";
    }
    if (p.padding < 0)
    {
        return "involution: padding must be >= 0";
    }
    if (p.groups < 1)
    {
        return "involution: groups must be >= 1";
    }
    if (p.batch < 0)
    {
        return "involution: batch must be >= 0";
    }
    if (p.channels < 1 || p.channels % p.groups != 0)
    {
        return "involution: channels must be >= 1 and divisible by groups";
    }
    if (p.height < 1 || p.width < 1)
    {
        return "involution: input height and width must be >= 1";
    }
    if (p.outHeight < 1 || p.outWidth < 1)
    {
        return "involution: the dilated kernel does not fit in the padded input (output would be empty)";
    }
    if (p.outHeight != involutionOutputSize(p.height, p.kernelSize, p.stride, p.padding, p.dilation)
        || p.outWidth != involutionOutputSize(p.width, p.kernelSize, p.stride, p.padding, p.dilation))
    {
        return "involution: outHeight/outWidth do not match (H + 2*pad - dil*(K-1) - 1) / stride + 1";
    }
    // All index arithmetic in the kernels is int64; reject sizes whose products could overflow it.
    int64_t const limit = std::numeric_limits<int64_t>::max() / 4;
    double const biggest = static_cast<double>(p.batch) * static_cast<double>(p.channels)
        * static_cast<double>(std::max(p.height * p.width, p.outHeight * p.outWidth))
        * static_cast<double>(p.kernelSize) * static_cast<double>(p.kernelSize);
    if (biggest > static_cast<double>(limit))
    {
        return "involution: tensor sizes overflow 64-bit indexing";
    }
    return nullptr;
}

int64_t involutionInputElements(InvolutionParams const& p) noexcept
{
    return p.batch * p.channels * p.height * p.width;
}

int64_t involutionWeightElements(InvolutionParams const& p) noexcept
{
    return p.batch * p.groups * static_cast<int64_t>(p.kernelSize) * p.kernelSize * p.outHeight * p.outWidth;
}

int64_t involutionOutputElements(InvolutionParams const& p) noexcept
{
    return p.batch * p.channels * p.outHeight * p.outWidth;
}

#define TRTBUILD_INVOLUTION_DEFINE_LAUNCHERS(T)                                                                        \
    cudaError_t involutionForward(InvolutionParams const& p, T const* x, T const* w, T* out,                        \
        cudaStream_t stream) noexcept                                                                                \
    {                                                                                                                  \
        return launchForward<T>(p, x, w, out, stream);                                                               \
    }                                                                                                                  \
    cudaError_t involutionBackwardInput(InvolutionParams const& p, T const* gradOut, T const* w, T* gradX,          \
        cudaStream_t stream) noexcept                                                                                \
    {                                                                                                                  \
        return launchBackwardInput<T>(p, gradOut, w, gradX, stream);                                                 \
    }                                                                                                                  \
    cudaError_t involutionBackwardWeight(InvolutionParams const& p, T const* gradOut, T const* x, T* gradW,         \
        cudaStream_t stream) noexcept                                                                                \
    {                                                                                                                  \
        return launchBackwardWeight<T>(p, gradOut, x, gradW, stream);                                                \
    }

TRTBUILD_INVOLUTION_DEFINE_LAUNCHERS(float)
TRTBUILD_INVOLUTION_DEFINE_LAUNCHERS(__half)
TRTBUILD_INVOLUTION_DEFINE_LAUNCHERS(double)

#undef TRTBUILD_INVOLUTION_DEFINE_LAUNCHERS

} // namespace involution
} // namespace trtbuild
