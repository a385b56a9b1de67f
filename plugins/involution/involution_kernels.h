/*
 * Involution (Li et al., "Involution: Inverting the Inherence of Convolution for Visual
 * Recognition", CVPR 2021) CUDA kernels: plain C++ launch API.
 *
 * This header is included by host C++ code (the TensorRT IPluginV3 plugin, the PyTorch
 * extension binding) and by the .cu file that implements it. It only needs the CUDA runtime
 * API and cuda_fp16.h, never nvcc.
 *
 * Semantics (match the official mmcv / d-li14 involution CUDA op):
 *   x   : (N, C, H, W)              contiguous, NCHW
 *   w   : (N, G, K*K, Ho, Wo)       contiguous (same memory as (N, G, K, K, Ho, Wo))
 *   out : (N, C, Ho, Wo)            contiguous
 *   g(c) = c / (C / G)
 *   out[n,c,ho,wo] = sum_{kh,kw} w[n, g(c), kh*K+kw, ho, wo]
 *                              * x[n, c, ho*stride - pad + kh*dil, wo*stride - pad + kw*dil]
 *   (taps that fall outside the input contribute zero)
 *   Ho = (H + 2*pad - dil*(K-1) - 1) / stride + 1, likewise Wo.
 *
 * fp16 kernels read and write __half and accumulate in fp32; fp64 kernels (used for gradient
 * checks) accumulate in fp64.
 */
#ifndef TRTBUILD_INVOLUTION_KERNELS_H
#define TRTBUILD_INVOLUTION_KERNELS_H

#include <cstdint>

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

namespace trtbuild
{
namespace involution
{

//! Shape and hyper-parameters of one involution call. All sizes are element counts.
struct InvolutionParams
{
    int64_t batch{0};    //!< N
    int64_t channels{0}; //!< C (divisible by groups)
    int64_t height{0};   //!< H (input)
    int64_t width{0};    //!< W (input)
    int64_t groups{1};   //!< G
    int32_t kernelSize{1};
    int32_t stride{1};
    int32_t padding{0};
    int32_t dilation{1};
    int64_t outHeight{0}; //!< Ho, see involutionOutputSize()
    int64_t outWidth{0};  //!< Wo
};

//! Ho (or Wo) for an input extent; returns a value <= 0 when the kernel does not fit.
int64_t involutionOutputSize(int64_t inputSize, int32_t kernelSize, int32_t stride, int32_t padding,
    int32_t dilation) noexcept;

//! Build an InvolutionParams with outHeight/outWidth computed from the input extents.
InvolutionParams makeInvolutionParams(int64_t batch, int64_t channels, int64_t height, int64_t width,
    int64_t groups, int32_t kernelSize, int32_t stride, int32_t padding, int32_t dilation) noexcept;

//! nullptr when p is valid, else a static English message saying what is wrong.
char const* validateInvolutionParams(InvolutionParams const& p) noexcept;

//! Element counts of the three tensors.
int64_t involutionInputElements(InvolutionParams const& p) noexcept;
int64_t involutionWeightElements(InvolutionParams const& p) noexcept;
int64_t involutionOutputElements(InvolutionParams const& p) noexcept;

// ---------------------------------------------------------------------------------------------
// Launchers. All pointers are device pointers to contiguous tensors of the shapes above. Each
// call enqueues kernels on `stream` and returns cudaErrorInvalidValue for invalid params (see
// validateInvolutionParams) or the launch error; it never synchronizes. Empty tensors are a no-op.
// ---------------------------------------------------------------------------------------------

//! out = involution(x, w)
cudaError_t involutionForward(InvolutionParams const& p, float const* x, float const* w, float* out,
    cudaStream_t stream) noexcept;
cudaError_t involutionForward(InvolutionParams const& p, __half const* x, __half const* w, __half* out,
    cudaStream_t stream) noexcept;
cudaError_t involutionForward(InvolutionParams const& p, double const* x, double const* w, double* out,
    cudaStream_t stream) noexcept;

//! gradX = d(loss)/dx given gradOut = d(loss)/d(out). gradX is fully overwritten.
cudaError_t involutionBackwardInput(InvolutionParams const& p, float const* gradOut, float const* w,
    float* gradX, cudaStream_t stream) noexcept;
cudaError_t involutionBackwardInput(InvolutionParams const& p, __half const* gradOut, __half const* w,
    __half* gradX, cudaStream_t stream) noexcept;
cudaError_t involutionBackwardInput(InvolutionParams const& p, double const* gradOut, double const* w,
    double* gradX, cudaStream_t stream) noexcept;

//! gradW = d(loss)/dw given gradOut and the forward input x. gradW is fully overwritten.
cudaError_t involutionBackwardWeight(InvolutionParams const& p, float const* gradOut, float const* x,
    float* gradW, cudaStream_t stream) noexcept;
cudaError_t involutionBackwardWeight(InvolutionParams const& p, __half const* gradOut, __half const* x,
    __half* gradW, cudaStream_t stream) noexcept;
cudaError_t involutionBackwardWeight(InvolutionParams const& p, double const* gradOut, double const* x,
    double* gradW, cudaStream_t stream) noexcept;

} // namespace involution
} // namespace trtbuild

#endif // TRTBUILD_INVOLUTION_KERNELS_H
