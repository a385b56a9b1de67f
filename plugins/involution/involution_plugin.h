/*
 * TensorRT IPluginV3 plugin "Involution" (version "1", namespace "trtbuild").
 *
 * Inputs : x (N, C, H, W), w (N, G, K*K, Ho, Wo) or, same memory, (N, G*K*K, Ho, Wo) (the kernel
 *          generator's conv output, no reshape needed); both FP32 or both FP16, linear format.
 * Output : out (N, C, Ho, Wo), same type as the inputs.
 * Fields : kernel_size, stride, padding, dilation, groups (kINT32, one value each).
 *
 * Requires TensorRT >= 10.0 (IPluginV3 and IPluginCreatorV3One first appear there).
 */
#ifndef TRTBUILD_INVOLUTION_PLUGIN_H
#define TRTBUILD_INVOLUTION_PLUGIN_H

#include <NvInferRuntime.h>

#include <cstdint>
#include <string>
#include <vector>

namespace trtbuild
{
namespace plugin
{

constexpr char const* kINVOLUTION_PLUGIN_NAME = "Involution";
constexpr char const* kINVOLUTION_PLUGIN_VERSION = "1";
constexpr char const* kINVOLUTION_PLUGIN_NAMESPACE = "trtbuild";

//! The field names, in the order the creator advertises them.
constexpr char const* kFIELD_KERNEL_SIZE = "kernel_size";
constexpr char const* kFIELD_STRIDE = "stride";
constexpr char const* kFIELD_PADDING = "padding";
constexpr char const* kFIELD_DILATION = "dilation";
constexpr char const* kFIELD_GROUPS = "groups";

//! The plugin's creation-time attributes (its PluginFields).
struct InvolutionAttributes
{
    int32_t kernelSize{1};
    int32_t stride{1};
    int32_t padding{0};
    int32_t dilation{1};
    int32_t groups{1};
};

//! nullptr when the attributes are usable, else a message naming the bad field.
char const* validateInvolutionAttributes(InvolutionAttributes const& attrs) noexcept;

//! Route error messages to the logger TensorRT hands the library (setLoggerFinder), else stderr.
void setInvolutionLoggerFinder(nvinfer1::ILoggerFinder* finder) noexcept;
void logInvolutionError(std::string const& message) noexcept;

class InvolutionPlugin : public nvinfer1::IPluginV3,
                         public nvinfer1::IPluginV3OneCore,
                         public nvinfer1::IPluginV3OneBuild,
                         public nvinfer1::IPluginV3OneRuntime
{
public:
    explicit InvolutionPlugin(InvolutionAttributes const& attrs);
    ~InvolutionPlugin() override = default;

    // Copies would keep field pointers into the source object: clone() builds a fresh object instead.
    InvolutionPlugin(InvolutionPlugin const&) = delete;
    InvolutionPlugin& operator=(InvolutionPlugin const&) = delete;

    // IPluginV3
    nvinfer1::IPluginCapability* getCapabilityInterface(nvinfer1::PluginCapabilityType type) noexcept override;
    nvinfer1::IPluginV3* clone() noexcept override;

    // IPluginV3OneCore
    char const* getPluginName() const noexcept override;
    char const* getPluginVersion() const noexcept override;
    char const* getPluginNamespace() const noexcept override;

    // IPluginV3OneBuild
    int32_t configurePlugin(nvinfer1::DynamicPluginTensorDesc const* in, int32_t nbInputs,
        nvinfer1::DynamicPluginTensorDesc const* out, int32_t nbOutputs) noexcept override;
    int32_t getOutputDataTypes(nvinfer1::DataType* outputTypes, int32_t nbOutputs,
        nvinfer1::DataType const* inputTypes, int32_t nbInputs) const noexcept override;
    int32_t getOutputShapes(nvinfer1::DimsExprs const* inputs, int32_t nbInputs,
        nvinfer1::DimsExprs const* shapeInputs, int32_t nbShapeInputs, nvinfer1::DimsExprs* outputs,
        int32_t nbOutputs, nvinfer1::IExprBuilder& exprBuilder) noexcept override;
    bool supportsFormatCombination(int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut, int32_t nbInputs,
        int32_t nbOutputs) noexcept override;
    int32_t getNbOutputs() const noexcept override;
    size_t getWorkspaceSize(nvinfer1::DynamicPluginTensorDesc const* inputs, int32_t nbInputs,
        nvinfer1::DynamicPluginTensorDesc const* outputs, int32_t nbOutputs) const noexcept override;

    // IPluginV3OneRuntime
    int32_t onShapeChange(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs,
        nvinfer1::PluginTensorDesc const* out, int32_t nbOutputs) noexcept override;
    int32_t enqueue(nvinfer1::PluginTensorDesc const* inputDesc, nvinfer1::PluginTensorDesc const* outputDesc,
        void const* const* inputs, void* const* outputs, void* workspace, cudaStream_t stream) noexcept override;
    nvinfer1::IPluginV3* attachToContext(nvinfer1::IPluginResourceContext* context) noexcept override;
    nvinfer1::PluginFieldCollection const* getFieldsToSerialize() noexcept override;

    InvolutionAttributes const& attributes() const noexcept
    {
        return mAttrs;
    }

private:
    //! Checks x/w/out dims (entries < 0 are unknown and skipped); empty string when consistent.
    std::string checkDims(nvinfer1::Dims const& x, nvinfer1::Dims const& w, nvinfer1::Dims const* out) const;

    InvolutionAttributes mAttrs;
    std::vector<nvinfer1::PluginField> mSerializedFields;
    nvinfer1::PluginFieldCollection mSerializedCollection{};
};

class InvolutionPluginCreator : public nvinfer1::IPluginCreatorV3One
{
public:
    InvolutionPluginCreator();
    ~InvolutionPluginCreator() override = default;

    char const* getPluginName() const noexcept override;
    char const* getPluginVersion() const noexcept override;
    char const* getPluginNamespace() const noexcept override;
    nvinfer1::PluginFieldCollection const* getFieldNames() noexcept override;
    nvinfer1::IPluginV3* createPlugin(
        char const* name, nvinfer1::PluginFieldCollection const* fc, nvinfer1::TensorRTPhase phase) noexcept override;

private:
    std::vector<nvinfer1::PluginField> mFieldNames;
    nvinfer1::PluginFieldCollection mFieldCollection{};
};

} // namespace plugin
} // namespace trtbuild

#endif // TRTBUILD_INVOLUTION_PLUGIN_H
