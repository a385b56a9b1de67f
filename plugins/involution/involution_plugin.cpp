/*
 * TensorRT IPluginV3 plugin "Involution": the plugin object. The creator, field parsing and error
 * logging are in involution_plugin_creator.cpp. See involution_plugin.h.
 */
#include "involution_plugin.h"

#include "involution_kernels.h"

#include <exception>
#include <sstream>

using nvinfer1::DataType;
using nvinfer1::Dims;
using nvinfer1::DimensionOperation;
using nvinfer1::DimsExprs;
using nvinfer1::DynamicPluginTensorDesc;
using nvinfer1::IDimensionExpr;
using nvinfer1::IExprBuilder;
using nvinfer1::IPluginCapability;
using nvinfer1::IPluginResourceContext;
using nvinfer1::IPluginV3;
using nvinfer1::PluginCapabilityType;
using nvinfer1::PluginField;
using nvinfer1::PluginFieldCollection;
using nvinfer1::PluginFieldType;
using nvinfer1::PluginTensorDesc;
using nvinfer1::TensorFormat;

namespace trtbuild
{
namespace plugin
{
namespace
{

constexpr int32_t kNB_INPUTS = 2;
constexpr int32_t kNB_OUTPUTS = 1;

bool isSupportedType(DataType type) noexcept
{
    return type == DataType::kFLOAT || type == DataType::kHALF;
}

std::string dimsToString(Dims const& d)
{
    std::ostringstream os;
    os << "(";
    for (int32_t i = 0; i < d.nbDims; ++i)
    {
        os << (i ? ", " : "") << d.d[i];
    }
    os << ")";
    return os.str();
}

//! floor((in + 2*pad - (dil*(K-1) + 1)) / stride) + 1, built only from non-negative constants.
IDimensionExpr const* outputExtentExpr(
    IExprBuilder& eb, IDimensionExpr const* in, InvolutionAttributes const& a) noexcept
{
    IDimensionExpr const* padTwice = eb.constant(2 * static_cast<int64_t>(a.padding));
    IDimensionExpr const* span = eb.constant(static_cast<int64_t>(a.dilation) * (a.kernelSize - 1) + 1);
    IDimensionExpr const* stride = eb.constant(a.stride);
    IDimensionExpr const* one = eb.constant(1);
    if (in == nullptr || padTwice == nullptr || span == nullptr || stride == nullptr || one == nullptr)
    {
        return nullptr;
    }
    IDimensionExpr const* padded = eb.operation(DimensionOperation::kSUM, *in, *padTwice);
    if (padded == nullptr)
    {
        return nullptr;
    }
    IDimensionExpr const* reduced = eb.operation(DimensionOperation::kSUB, *padded, *span);
    if (reduced == nullptr)
    {
        return nullptr;
    }
    IDimensionExpr const* steps = eb.operation(DimensionOperation::kFLOOR_DIV, *reduced, *stride);
    if (steps == nullptr)
    {
        return nullptr;
    }
    return eb.operation(DimensionOperation::kSUM, *steps, *one);
}

} // namespace

// ---------------------------------------------------------------------------------------------
// InvolutionPlugin
// ---------------------------------------------------------------------------------------------

InvolutionPlugin::InvolutionPlugin(InvolutionAttributes const& attrs)
    : mAttrs(attrs)
{
    mSerializedFields = {
        PluginField(kFIELD_KERNEL_SIZE, &mAttrs.kernelSize, PluginFieldType::kINT32, 1),
        PluginField(kFIELD_STRIDE, &mAttrs.stride, PluginFieldType::kINT32, 1),
        PluginField(kFIELD_PADDING, &mAttrs.padding, PluginFieldType::kINT32, 1),
        PluginField(kFIELD_DILATION, &mAttrs.dilation, PluginFieldType::kINT32, 1),
        PluginField(kFIELD_GROUPS, &mAttrs.groups, PluginFieldType::kINT32, 1),
    };
    mSerializedCollection.nbFields = static_cast<int32_t>(mSerializedFields.size());
    mSerializedCollection.fields = mSerializedFields.data();
}

IPluginCapability* InvolutionPlugin::getCapabilityInterface(PluginCapabilityType type) noexcept
{
    switch (type)
    {
    case PluginCapabilityType::kCORE: return static_cast<nvinfer1::IPluginV3OneCore*>(this);
    case PluginCapabilityType::kBUILD: return static_cast<nvinfer1::IPluginV3OneBuild*>(this);
    case PluginCapabilityType::kRUNTIME: return static_cast<nvinfer1::IPluginV3OneRuntime*>(this);
    }
    return nullptr;
}

IPluginV3* InvolutionPlugin::clone() noexcept
{
    try
    {
        return new InvolutionPlugin(mAttrs);
    }
    catch (std::exception const& e)
    {
        logInvolutionError(std::string("clone failed: ") + e.what());
    }
    return nullptr;
}

char const* InvolutionPlugin::getPluginName() const noexcept
{
    return kINVOLUTION_PLUGIN_NAME;
}

char const* InvolutionPlugin::getPluginVersion() const noexcept
{
    return kINVOLUTION_PLUGIN_VERSION;
}

char const* InvolutionPlugin::getPluginNamespace() const noexcept
{
    return kINVOLUTION_PLUGIN_NAMESPACE;
}

int32_t InvolutionPlugin::getNbOutputs() const noexcept
{
    return kNB_OUTPUTS;
}

std::string InvolutionPlugin::checkDims(Dims const& x, Dims const& w, Dims const* out) const
{
    std::ostringstream err;
    if (x.nbDims != 4)
    {
        err << "input x must be 4-D (N, C, H, W), got " << dimsToString(x);
        return err.str();
    }
    int64_t const kk = static_cast<int64_t>(mAttrs.kernelSize) * mAttrs.kernelSize;
    // w is (N, G, K*K, Ho, Wo) or, same memory, (N, G*K*K, Ho, Wo).
    bool const flatW = w.nbDims == 4;
    if (w.nbDims != 5 && !flatW)
    {
        err << "input w must be (N, G, K*K, Ho, Wo) = (N, " << mAttrs.groups << ", " << kk
            << ", Ho, Wo) or (N, G*K*K, Ho, Wo), got " << dimsToString(w);
        return err.str();
    }
    int64_t const n = x.d[0];
    int64_t const c = x.d[1];
    if (c >= 0 && c % mAttrs.groups != 0)
    {
        err << "channels of x (" << c << ") must be divisible by groups (" << mAttrs.groups << ")";
        return err.str();
    }
    if (n >= 0 && w.d[0] >= 0 && w.d[0] != n)
    {
        err << "batch of w " << dimsToString(w) << " differs from batch of x " << dimsToString(x);
        return err.str();
    }
    if (flatW && w.d[1] >= 0 && w.d[1] != mAttrs.groups * kk)
    {
        err << "4-D w must have groups*kernel_size^2 (" << mAttrs.groups * kk << ") channels, got " << dimsToString(w);
        return err.str();
    }
    if (!flatW && w.d[1] >= 0 && w.d[1] != mAttrs.groups)
    {
        err << "w dim 1 must equal groups (" << mAttrs.groups << "), got " << dimsToString(w);
        return err.str();
    }
    if (!flatW && w.d[2] >= 0 && w.d[2] != kk)
    {
        err << "w dim 2 must equal kernel_size^2 (" << kk << "), got " << dimsToString(w);
        return err.str();
    }
    for (int32_t axis = 2; axis < 4; ++axis)
    {
        if (x.d[axis] < 0)
        {
            continue;
        }
        int64_t const expected = trtbuild::involution::involutionOutputSize(
            x.d[axis], mAttrs.kernelSize, mAttrs.stride, mAttrs.padding, mAttrs.dilation);
        if (expected < 1)
        {
            err << "x " << dimsToString(x) << " is too small for kernel_size=" << mAttrs.kernelSize
                << ", dilation=" << mAttrs.dilation << ", padding=" << mAttrs.padding;
            return err.str();
        }
        int32_t const wAxis = flatW ? axis : axis + 1;
        if (w.d[wAxis] >= 0 && w.d[wAxis] != expected)
        {
            err << "w " << dimsToString(w) << " must have output extent " << expected << " on dim " << wAxis
                << " for x " << dimsToString(x);
            return err.str();
        }
        if (out != nullptr && out->nbDims == 4 && out->d[axis] >= 0 && out->d[axis] != expected)
        {
            err << "output " << dimsToString(*out) << " must have extent " << expected << " on dim " << axis;
            return err.str();
        }
    }
    if (out != nullptr && out->nbDims != 4)
    {
        err << "output must be 4-D, got " << dimsToString(*out);
        return err.str();
    }
    return std::string();
}

int32_t InvolutionPlugin::configurePlugin(
    DynamicPluginTensorDesc const* in, int32_t nbInputs, DynamicPluginTensorDesc const* out, int32_t nbOutputs) noexcept
{
    try
    {
        if (in == nullptr || out == nullptr || nbInputs != kNB_INPUTS || nbOutputs != kNB_OUTPUTS)
        {
            logInvolutionError("configurePlugin: expected 2 inputs (x, w) and 1 output");
            return 1;
        }
        std::string const err = checkDims(in[0].desc.dims, in[1].desc.dims, &out[0].desc.dims);
        if (!err.empty())
        {
            logInvolutionError("configurePlugin: " + err);
            return 1;
        }
        return 0;
    }
    catch (std::exception const& e)
    {
        logInvolutionError(std::string("configurePlugin: ") + e.what());
    }
    return 1;
}

int32_t InvolutionPlugin::getOutputDataTypes(
    DataType* outputTypes, int32_t nbOutputs, DataType const* inputTypes, int32_t nbInputs) const noexcept
{
    if (outputTypes == nullptr || inputTypes == nullptr || nbOutputs != kNB_OUTPUTS || nbInputs != kNB_INPUTS)
    {
        logInvolutionError("getOutputDataTypes: expected 2 inputs (x, w) and 1 output");
        return 1;
    }
    if (!isSupportedType(inputTypes[0]) || inputTypes[1] != inputTypes[0])
    {
        logInvolutionError("getOutputDataTypes: x and w must both be FP32 or both be FP16");
        return 1;
    }
    outputTypes[0] = inputTypes[0];
    return 0;
}

int32_t InvolutionPlugin::getOutputShapes(DimsExprs const* inputs, int32_t nbInputs, DimsExprs const* /*shapeInputs*/,
    int32_t nbShapeInputs, DimsExprs* outputs, int32_t nbOutputs, IExprBuilder& exprBuilder) noexcept
{
    try
    {
        if (inputs == nullptr || outputs == nullptr || nbInputs != kNB_INPUTS || nbOutputs != kNB_OUTPUTS
            || nbShapeInputs != 0)
        {
            logInvolutionError("getOutputShapes: expected 2 inputs (x, w), no shape inputs and 1 output");
            return 1;
        }
        DimsExprs const& x = inputs[0];
        DimsExprs const& w = inputs[1];
        if (x.nbDims != 4 || (w.nbDims != 5 && w.nbDims != 4))
        {
            std::ostringstream err;
            err << "getOutputShapes: x must be 4-D (N, C, H, W) and w (N, G, K*K, Ho, Wo) or (N, G*K*K, Ho, Wo); "
                   "got ranks "
                << x.nbDims << " and " << w.nbDims;
            logInvolutionError(err.str());
            return 1;
        }
        int64_t const kk = static_cast<int64_t>(mAttrs.kernelSize) * mAttrs.kernelSize;
        if (x.d[1]->isConstant() && x.d[1]->getConstantValue() % mAttrs.groups != 0)
        {
            logInvolutionError("getOutputShapes: channels of x must be divisible by groups");
            return 1;
        }
        bool const badW = w.nbDims == 5
            ? (w.d[1]->isConstant() && w.d[1]->getConstantValue() != mAttrs.groups)
                || (w.d[2]->isConstant() && w.d[2]->getConstantValue() != kk)
            : w.d[1]->isConstant() && w.d[1]->getConstantValue() != mAttrs.groups * kk;
        if (badW)
        {
            logInvolutionError(
                "getOutputShapes: w must have shape (N, groups, kernel_size^2, Ho, Wo) or (N, groups*kernel_size^2, "
                "Ho, Wo)");
            return 1;
        }
        DimsExprs& o = outputs[0];
        o.nbDims = 4;
        o.d[0] = x.d[0];
        o.d[1] = x.d[1];
        o.d[2] = outputExtentExpr(exprBuilder, x.d[2], mAttrs);
        o.d[3] = outputExtentExpr(exprBuilder, x.d[3], mAttrs);
        if (o.d[2] == nullptr || o.d[3] == nullptr)
        {
            logInvolutionError("getOutputShapes: could not build the output extent expressions");
            return 1;
        }
        return 0;
    }
    catch (std::exception const& e)
    {
        logInvolutionError(std::string("getOutputShapes: ") + e.what());
    }
    return 1;
}

bool InvolutionPlugin::supportsFormatCombination(
    int32_t pos, DynamicPluginTensorDesc const* inOut, int32_t nbInputs, int32_t nbOutputs) noexcept
{
    if (inOut == nullptr || nbInputs != kNB_INPUTS || nbOutputs != kNB_OUTPUTS || pos < 0
        || pos >= kNB_INPUTS + kNB_OUTPUTS)
    {
        return false;
    }
    PluginTensorDesc const& desc = inOut[pos].desc;
    if (desc.format != TensorFormat::kLINEAR)
    {
        return false;
    }
    if (pos == 0)
    {
        return isSupportedType(desc.type);
    }
    // w and out must match x's type (decided at pos 0).
    return desc.type == inOut[0].desc.type;
}

size_t InvolutionPlugin::getWorkspaceSize(DynamicPluginTensorDesc const* /*inputs*/, int32_t /*nbInputs*/,
    DynamicPluginTensorDesc const* /*outputs*/, int32_t /*nbOutputs*/) const noexcept
{
    return 0;
}

int32_t InvolutionPlugin::onShapeChange(
    PluginTensorDesc const* in, int32_t nbInputs, PluginTensorDesc const* out, int32_t nbOutputs) noexcept
{
    try
    {
        if (in == nullptr || out == nullptr || nbInputs != kNB_INPUTS || nbOutputs != kNB_OUTPUTS)
        {
            logInvolutionError("onShapeChange: expected 2 inputs (x, w) and 1 output");
            return 1;
        }
        std::string const err = checkDims(in[0].dims, in[1].dims, &out[0].dims);
        if (!err.empty())
        {
            logInvolutionError("onShapeChange: " + err);
            return 1;
        }
        return 0;
    }
    catch (std::exception const& e)
    {
        logInvolutionError(std::string("onShapeChange: ") + e.what());
    }
    return 1;
}

int32_t InvolutionPlugin::enqueue(PluginTensorDesc const* inputDesc, PluginTensorDesc const* outputDesc,
    void const* const* inputs, void* const* outputs, void* /*workspace*/, cudaStream_t stream) noexcept
{
    try
    {
        if (inputDesc == nullptr || outputDesc == nullptr || inputs == nullptr || outputs == nullptr)
        {
            logInvolutionError("enqueue: missing tensor descriptions or pointers");
            return 1;
        }
        Dims const& xd = inputDesc[0].dims;
        std::string const err = checkDims(xd, inputDesc[1].dims, &outputDesc[0].dims);
        if (!err.empty())
        {
            logInvolutionError("enqueue: " + err);
            return 1;
        }
        auto const p = trtbuild::involution::makeInvolutionParams(xd.d[0], xd.d[1], xd.d[2], xd.d[3], mAttrs.groups,
            mAttrs.kernelSize, mAttrs.stride, mAttrs.padding, mAttrs.dilation);
        if (char const* invalid = trtbuild::involution::validateInvolutionParams(p))
        {
            logInvolutionError(std::string("enqueue: ") + invalid);
            return 1;
        }
        DataType const type = inputDesc[0].type;
        if (inputDesc[1].type != type || outputDesc[0].type != type)
        {
            logInvolutionError("enqueue: x, w and out must have the same type");
            return 1;
        }
        cudaError_t status = cudaErrorInvalidValue;
        if (type == DataType::kFLOAT)
        {
            status = trtbuild::involution::involutionForward(p, static_cast<float const*>(inputs[0]),
                static_cast<float const*>(inputs[1]), static_cast<float*>(outputs[0]), stream);
        }
        else if (type == DataType::kHALF)
        {
            status = trtbuild::involution::involutionForward(p, static_cast<__half const*>(inputs[0]),
                static_cast<__half const*>(inputs[1]), static_cast<__half*>(outputs[0]), stream);
        }
        else
        {
            logInvolutionError("enqueue: only FP32 and FP16 are supported");
            return 1;
        }
        if (status != cudaSuccess)
        {
            logInvolutionError(std::string("enqueue: kernel launch failed: ") + cudaGetErrorString(status));
            return 1;
        }
        return 0;
    }
    catch (std::exception const& e)
    {
        logInvolutionError(std::string("enqueue: ") + e.what());
    }
    return 1;
}

IPluginV3* InvolutionPlugin::attachToContext(IPluginResourceContext* /*context*/) noexcept
{
    // No per-context resources: a plain clone is enough.
    return clone();
}

PluginFieldCollection const* InvolutionPlugin::getFieldsToSerialize() noexcept
{
    return &mSerializedCollection;
}

} // namespace plugin
} // namespace trtbuild
