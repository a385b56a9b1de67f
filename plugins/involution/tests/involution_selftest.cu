/*
 * Stand-alone check of the involution kernels against a naive CPU loop (no TensorRT, no torch).
 * Built by CMake as `involution_selftest` and by scripts/build_plugins.sh --selftest; needs a
 * CUDA GPU to run. Exit code 0 = all cases pass, 1 = a mismatch, 2 = no usable GPU.
 */
#include "../involution_kernels.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

using trtbuild::involution::InvolutionParams;

namespace
{

#define CHECK_CUDA(expr)                                                                                               \
    do                                                                                                                 \
    {                                                                                                                  \
        cudaError_t const status_ = (expr);                                                                            \
        if (status_ != cudaSuccess)                                                                                    \
        {                                                                                                              \
            std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(status_));   \
            std::exit(1);                                                                                              \
        }                                                                                                              \
    } while (0)

//! An element as double without rounding it: fp64 outputs must not pass through float (that alone
//! is a 1e-7 error, far over the fp64 tolerance); fp16 goes through float, its only host conversion.
double toDouble(double v)
{
    return v;
}

double toDouble(float v)
{
    return static_cast<double>(v);
}

double toDouble(__half v)
{
    return static_cast<double>(__half2float(v));
}

double xAt(std::vector<double> const& x, InvolutionParams const& p, int64_t n, int64_t c, int64_t h, int64_t w)
{
    if (h < 0 || h >= p.height || w < 0 || w >= p.width)
    {
        return 0.0;
    }
    return x[((n * p.channels + c) * p.height + h) * p.width + w];
}

//! out[n,c,ho,wo] = sum_k w[n,g,k,ho,wo] * x[n,c,ho*s-p+kh*d, wo*s-p+kw*d]
std::vector<double> cpuForward(InvolutionParams const& p, std::vector<double> const& x, std::vector<double> const& w)
{
    int64_t const K = p.kernelSize;
    int64_t const cg = p.channels / p.groups;
    std::vector<double> out(trtbuild::involution::involutionOutputElements(p), 0.0);
    for (int64_t n = 0; n < p.batch; ++n)
        for (int64_t c = 0; c < p.channels; ++c)
            for (int64_t ho = 0; ho < p.outHeight; ++ho)
                for (int64_t wo = 0; wo < p.outWidth; ++wo)
                {
                    double acc = 0.0;
                    for (int64_t kh = 0; kh < K; ++kh)
                        for (int64_t kw = 0; kw < K; ++kw)
                        {
                            int64_t const wIdx
                                = (((n * p.groups + c / cg) * K * K + kh * K + kw) * p.outHeight + ho) * p.outWidth + wo;
                            acc += w[wIdx]
                                * xAt(x, p, n, c, ho * p.stride - p.padding + kh * p.dilation,
                                    wo * p.stride - p.padding + kw * p.dilation);
                        }
                    out[((n * p.channels + c) * p.outHeight + ho) * p.outWidth + wo] = acc;
                }
    return out;
}

template <typename T>
bool runCase(InvolutionParams const& p, double tol, char const* typeName)
{
    std::mt19937 rng(1234);
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    int64_t const nx = trtbuild::involution::involutionInputElements(p);
    int64_t const nw = trtbuild::involution::involutionWeightElements(p);
    int64_t const no = trtbuild::involution::involutionOutputElements(p);
    std::vector<double> x(nx), w(nw);
    std::vector<T> xT(nx), wT(nw), outT(no);
    for (int64_t i = 0; i < nx; ++i)
    {
        xT[i] = static_cast<T>(static_cast<float>(dist(rng)));
        x[i] = toDouble(xT[i]);
    }
    for (int64_t i = 0; i < nw; ++i)
    {
        wT[i] = static_cast<T>(static_cast<float>(dist(rng)));
        w[i] = toDouble(wT[i]);
    }
    T *dx = nullptr, *dw = nullptr, *dout = nullptr;
    CHECK_CUDA(cudaMalloc(&dx, nx * sizeof(T)));
    CHECK_CUDA(cudaMalloc(&dw, nw * sizeof(T)));
    CHECK_CUDA(cudaMalloc(&dout, no * sizeof(T)));
    CHECK_CUDA(cudaMemcpy(dx, xT.data(), nx * sizeof(T), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dw, wT.data(), nw * sizeof(T), cudaMemcpyHostToDevice));
    CHECK_CUDA(trtbuild::involution::involutionForward(p, dx, dw, dout, nullptr));
    CHECK_CUDA(cudaMemcpy(outT.data(), dout, no * sizeof(T), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaFree(dx));
    CHECK_CUDA(cudaFree(dw));
    CHECK_CUDA(cudaFree(dout));

    std::vector<double> const ref = cpuForward(p, x, w);
    double maxErr = 0.0;
    for (int64_t i = 0; i < no; ++i)
    {
        maxErr = std::fmax(maxErr, std::fabs(toDouble(outT[i]) - ref[i]));
    }
    bool const ok = maxErr <= tol;
    std::printf("%-4s %s N=%lld C=%lld H=%lld W=%lld G=%lld K=%d s=%d p=%d d=%d: max|err|=%.3g\n", ok ? "PASS" : "FAIL",
        typeName, static_cast<long long>(p.batch), static_cast<long long>(p.channels),
        static_cast<long long>(p.height), static_cast<long long>(p.width), static_cast<long long>(p.groups),
        p.kernelSize, p.stride, p.padding, p.dilation, maxErr);
    return ok;
}

} // namespace

int main()
{
    int deviceCount = 0;
    if (cudaGetDeviceCount(&deviceCount) != cudaSuccess || deviceCount == 0)
    {
        std::printf("SKIP: no CUDA device\n");
        return 2;
    }
    using trtbuild::involution::makeInvolutionParams;
    InvolutionParams const cases[] = {
        makeInvolutionParams(2, 8, 9, 11, 2, 3, 1, 1, 1),  // K=3 fast path
        makeInvolutionParams(1, 32, 14, 14, 2, 7, 1, 3, 1), // RedNet-like, K=7
        makeInvolutionParams(2, 6, 13, 10, 3, 5, 2, 2, 1),  // K=5, stride 2
        makeInvolutionParams(1, 4, 12, 12, 1, 3, 2, 2, 2),  // dilation 2
        makeInvolutionParams(2, 6, 8, 9, 3, 4, 3, 1, 1),    // generic K=4, stride 3
        makeInvolutionParams(1, 3, 5, 5, 3, 1, 1, 0, 1),    // K=1, one channel per group
    };
    bool ok = true;
    for (InvolutionParams const& p : cases)
    {
        ok = runCase<float>(p, 1e-4, "fp32") && ok;
        ok = runCase<__half>(p, 5e-2, "fp16") && ok;
        ok = runCase<double>(p, 1e-10, "fp64") && ok;
    }
    std::printf("%s\n", ok ? "ALL PASS" : "SOME FAILED");
    return ok ? 0 : 1;
}
