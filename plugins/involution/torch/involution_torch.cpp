/*
 * PyTorch binding of the involution CUDA kernels (built lazily by trtbuild/ops/_involution_ext.py
 * with torch.utils.cpp_extension.load together with ../involution_kernels.cu).
 *
 * forward(x, w, kernel_size, stride, padding, dilation, groups) -> out
 * backward_input(grad_out, w, x_sizes, kernel_size, stride, padding, dilation, groups) -> grad_x
 * backward_weight(grad_out, x, kernel_size, stride, padding, dilation, groups) -> grad_w
 *
 * Tensors must be CUDA tensors of one dtype (float32, float16 or float64) on one device; they
 * are made contiguous here. Kernels run on the current CUDA stream of that device.
 */
#include <torch/extension.h>

#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>

#include "involution_kernels.h"

#include <string>
#include <vector>

namespace
{

using trtbuild::involution::InvolutionParams;

// Error messages format their numbers with std::to_string, never by streaming an integer (or an
// IntArrayRef) into c10::str: on a GPU machine with g++ 13 and PyTorch 2.11 the extension's
// inline std::ostream integer insertion crashed (SIGSEGV in basic_ostream::_M_insert<long>) while
// building the message, so a wrong shape killed the process instead of raising. Strings and c10
// types (devices, dtypes) stream through code in libc10 and are safe.

std::string text(int64_t value)
{
    return std::to_string(value);
}

std::string text(at::IntArrayRef sizes)
{
    std::string out = "[";
    for (size_t i = 0; i < sizes.size(); ++i)
    {
        out += (i ? ", " : "") + std::to_string(sizes[i]);
    }
    return out + "]";
}

InvolutionParams paramsFor(at::IntArrayRef xSizes, int64_t kernelSize, int64_t stride, int64_t padding,
    int64_t dilation, int64_t groups)
{
    TORCH_CHECK(xSizes.size() == 4, "involution: x must be 4-D (N, C, H, W), got sizes ", text(xSizes));
    TORCH_CHECK(kernelSize >= 1 && kernelSize <= 1024 && stride >= 1 && stride <= (1 << 20) && padding >= 0
            && padding <= (1 << 20) && dilation >= 1 && dilation <= (1 << 20),
        "involution: need 1 <= kernel_size <= 1024, stride >= 1, padding >= 0, dilation >= 1; got kernel_size=",
        text(kernelSize), " stride=", text(stride), " padding=", text(padding), " dilation=", text(dilation));
    InvolutionParams const p = trtbuild::involution::makeInvolutionParams(xSizes[0], xSizes[1], xSizes[2], xSizes[3],
        groups, static_cast<int32_t>(kernelSize), static_cast<int32_t>(stride), static_cast<int32_t>(padding),
        static_cast<int32_t>(dilation));
    char const* invalid = trtbuild::involution::validateInvolutionParams(p);
    TORCH_CHECK(invalid == nullptr, invalid, " (x sizes ", text(xSizes), ", groups=", text(groups), ")");
    return p;
}

std::vector<int64_t> weightSizes(InvolutionParams const& p)
{
    return {p.batch, p.groups, static_cast<int64_t>(p.kernelSize) * p.kernelSize, p.outHeight, p.outWidth};
}

std::vector<int64_t> outputSizes(InvolutionParams const& p)
{
    return {p.batch, p.channels, p.outHeight, p.outWidth};
}

void checkTensor(at::Tensor const& t, char const* name, at::Tensor const& reference)
{
    TORCH_CHECK(t.is_cuda(), "involution: ", name, " must be a CUDA tensor, got device ", t.device());
    TORCH_CHECK(t.device() == reference.device(), "involution: ", name, " is on ", t.device(), " but expected ",
        reference.device());
    TORCH_CHECK(t.scalar_type() == reference.scalar_type(), "involution: ", name, " has dtype ", t.scalar_type(),
        " but expected ", reference.scalar_type());
    TORCH_CHECK(t.scalar_type() == at::kFloat || t.scalar_type() == at::kHalf || t.scalar_type() == at::kDouble,
        "involution: CUDA kernels support float32, float16 and float64, got ", t.scalar_type());
}

void checkSizes(at::Tensor const& t, char const* name, std::vector<int64_t> const& expected)
{
    TORCH_CHECK(t.sizes() == at::IntArrayRef(expected), "involution: ", name, " must have sizes ",
        text(expected), ", got ", text(t.sizes()));
}

void checkLaunch(cudaError_t status, char const* what)
{
    TORCH_CHECK(status == cudaSuccess, "involution: ", what, " kernel launch failed: ", cudaGetErrorString(status));
}

//! Calls fn(pointer-type tag) with the element type of `type`.
template <typename Fn>
cudaError_t dispatchFloating(at::ScalarType type, Fn&& fn)
{
    switch (type)
    {
    case at::kFloat: return fn(static_cast<float*>(nullptr));
    case at::kHalf: return fn(static_cast<__half*>(nullptr));
    case at::kDouble: return fn(static_cast<double*>(nullptr));
    default: TORCH_CHECK(false, "involution: unsupported dtype ", type);
    }
    return cudaErrorInvalidValue;
}

template <typename T>
T const* constPtr(at::Tensor const& t)
{
    return reinterpret_cast<T const*>(t.const_data_ptr());
}

template <typename T>
T* mutablePtr(at::Tensor& t)
{
    return reinterpret_cast<T*>(t.mutable_data_ptr());
}

at::Tensor involutionForwardTorch(at::Tensor const& x, at::Tensor const& w, int64_t kernelSize, int64_t stride,
    int64_t padding, int64_t dilation, int64_t groups)
{
    checkTensor(x, "x", x);
    checkTensor(w, "w", x);
    InvolutionParams const p = paramsFor(x.sizes(), kernelSize, stride, padding, dilation, groups);
    checkSizes(w, "w", weightSizes(p));
    c10::cuda::CUDAGuard const guard(x.device());
    at::Tensor const xc = x.contiguous();
    at::Tensor const wc = w.contiguous();
    at::Tensor out = at::empty(outputSizes(p), x.options());
    cudaStream_t const stream = c10::cuda::getCurrentCUDAStream();
    checkLaunch(dispatchFloating(x.scalar_type(),
                    [&](auto tag) {
                        using T = std::remove_pointer_t<decltype(tag)>;
                        return trtbuild::involution::involutionForward(
                            p, constPtr<T>(xc), constPtr<T>(wc), mutablePtr<T>(out), stream);
                    }),
        "forward");
    return out;
}

at::Tensor involutionBackwardInputTorch(at::Tensor const& gradOut, at::Tensor const& w, std::vector<int64_t> xSizes,
    int64_t kernelSize, int64_t stride, int64_t padding, int64_t dilation, int64_t groups)
{
    checkTensor(gradOut, "grad_out", gradOut);
    checkTensor(w, "w", gradOut);
    InvolutionParams const p = paramsFor(xSizes, kernelSize, stride, padding, dilation, groups);
    checkSizes(gradOut, "grad_out", outputSizes(p));
    checkSizes(w, "w", weightSizes(p));
    c10::cuda::CUDAGuard const guard(gradOut.device());
    at::Tensor const gc = gradOut.contiguous();
    at::Tensor const wc = w.contiguous();
    at::Tensor gradX = at::empty(xSizes, gradOut.options());
    cudaStream_t const stream = c10::cuda::getCurrentCUDAStream();
    checkLaunch(dispatchFloating(gradOut.scalar_type(),
                    [&](auto tag) {
                        using T = std::remove_pointer_t<decltype(tag)>;
                        return trtbuild::involution::involutionBackwardInput(
                            p, constPtr<T>(gc), constPtr<T>(wc), mutablePtr<T>(gradX), stream);
                    }),
        "backward (input)");
    return gradX;
}

at::Tensor involutionBackwardWeightTorch(at::Tensor const& gradOut, at::Tensor const& x, int64_t kernelSize,
    int64_t stride, int64_t padding, int64_t dilation, int64_t groups)
{
    checkTensor(gradOut, "grad_out", x);
    checkTensor(x, "x", x);
    InvolutionParams const p = paramsFor(x.sizes(), kernelSize, stride, padding, dilation, groups);
    checkSizes(gradOut, "grad_out", outputSizes(p));
    c10::cuda::CUDAGuard const guard(x.device());
    at::Tensor const gc = gradOut.contiguous();
    at::Tensor const xc = x.contiguous();
    at::Tensor gradW = at::empty(weightSizes(p), x.options());
    cudaStream_t const stream = c10::cuda::getCurrentCUDAStream();
    checkLaunch(dispatchFloating(x.scalar_type(),
                    [&](auto tag) {
                        using T = std::remove_pointer_t<decltype(tag)>;
                        return trtbuild::involution::involutionBackwardWeight(
                            p, constPtr<T>(gc), constPtr<T>(xc), mutablePtr<T>(gradW), stream);
                    }),
        "backward (weight)");
    return gradW;
}

} // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)
{
    m.doc() = "trtbuild involution CUDA kernels";
    m.def("forward", &involutionForwardTorch, "involution forward", py::arg("x"), py::arg("w"),
        py::arg("kernel_size"), py::arg("stride"), py::arg("padding"), py::arg("dilation"), py::arg("groups"));
    m.def("backward_input", &involutionBackwardInputTorch, "gradient of involution w.r.t. x", py::arg("grad_out"),
        py::arg("w"), py::arg("x_sizes"), py::arg("kernel_size"), py::arg("stride"), py::arg("padding"),
        py::arg("dilation"), py::arg("groups"));
    m.def("backward_weight", &involutionBackwardWeightTorch, "gradient of involution w.r.t. w", py::arg("grad_out"),
        py::arg("x"), py::arg("kernel_size"), py::arg("stride"), py::arg("padding"), py::arg("dilation"),
        py::arg("groups"));
}
