/*
 * TensorRT plugin "Involution": the creator (field parsing), attribute validation and error
 * logging. See involution_plugin.h.
 */
#include "involution_plugin.h"

#include <atomic>
#include <cstdio>
#include <exception>
#include <limits>
#include <string>

using nvinfer1::ILogger;
using nvinfer1::ILoggerFinder;
using nvinfer1::IPluginV3;
using nvinfer1::PluginField;
using nvinfer1::PluginFieldCollection;
using nvinfer1::PluginFieldType;
using nvinfer1::TensorRTPhase;

namespace trtbuild
{
namespace plugin
{
namespace
{

std::atomic<ILoggerFinder*> gLoggerFinder{nullptr};

} // namespace

char const* validateInvolutionAttributes(InvolutionAttributes const& a) noexcept
{
    if (a.kernelSize < 1)
    {
        return "field kernel_size must be >= 1";
    }
    if (a.stride < 1)
    {
        return "field stride must be >= 1";
    }
    if (a.padding < 0)
    {
        return "field padding must be >= 0";
    }
    if (a.dilation < 1)
    {
        return "field dilation must be >= 1";
    }
    if (a.groups < 1)
    {
        return "field groups must be >= 1";
    }
    return nullptr;
}

void setInvolutionLoggerFinder(ILoggerFinder* finder) noexcept
{
    gLoggerFinder.store(finder);
}

void logInvolutionError(std::string const& message) noexcept
{
    try
    {
        std::string const text = std::string("[trtbuild::Involution plugin] ") + message;
        ILoggerFinder* finder = gLoggerFinder.load();
        ILogger* logger = finder != nullptr ? finder->findLogger() : nullptr;
        if (logger != nullptr)
        {
            logger->log(ILogger::Severity::kERROR, text.c_str());
        }
        else
        {
            std::fprintf(stderr, "%s\n", text.c_str());
        }
    }
    catch (...)
    {
        // Logging must never throw out of a noexcept TensorRT callback; nothing else can be done.
        std::fputs("[trtbuild::Involution plugin] failed to format an error message\n", stderr);
    }
}

InvolutionPluginCreator::InvolutionPluginCreator()
{
    mFieldNames = {
        PluginField(kFIELD_KERNEL_SIZE, nullptr, PluginFieldType::kINT32, 1),
        PluginField(kFIELD_STRIDE, nullptr, PluginFieldType::kINT32, 1),
        PluginField(kFIELD_PADDING, nullptr, PluginFieldType::kINT32, 1),
        PluginField(kFIELD_DILATION, nullptr, PluginFieldType::kINT32, 1),
        PluginField(kFIELD_GROUPS, nullptr, PluginFieldType::kINT32, 1),
    };
    mFieldCollection.nbFields = static_cast<int32_t>(mFieldNames.size());
    mFieldCollection.fields = mFieldNames.data();
}

char const* InvolutionPluginCreator::getPluginName() const noexcept
{
    return kINVOLUTION_PLUGIN_NAME;
}

char const* InvolutionPluginCreator::getPluginVersion() const noexcept
{
    return kINVOLUTION_PLUGIN_VERSION;
}

char const* InvolutionPluginCreator::getPluginNamespace() const noexcept
{
    return kINVOLUTION_PLUGIN_NAMESPACE;
}

PluginFieldCollection const* InvolutionPluginCreator::getFieldNames() noexcept
{
    return &mFieldCollection;
}

IPluginV3* InvolutionPluginCreator::createPlugin(
    char const* name, PluginFieldCollection const* fc, TensorRTPhase /*phase*/) noexcept
{
    try
    {
        std::string const layer = name != nullptr ? name : "<unnamed>";
        if (fc == nullptr || (fc->nbFields > 0 && fc->fields == nullptr))
        {
            logInvolutionError("createPlugin(" + layer + "): no plugin fields given");
            return nullptr;
        }
        InvolutionAttributes attrs;
        bool haveKernelSize = false;
        bool haveGroups = false;
        for (int32_t i = 0; i < fc->nbFields; ++i)
        {
            PluginField const& field = fc->fields[i];
            std::string const fieldName = field.name != nullptr ? field.name : "";
            if (fieldName == "plugin_version" || fieldName == "plugin_namespace")
            {
                continue; // ONNX node attributes that select the plugin; the ONNX parser may pass them on
            }
            int32_t* target = nullptr;
            if (fieldName == kFIELD_KERNEL_SIZE)
            {
                target = &attrs.kernelSize;
                haveKernelSize = true;
            }
            else if (fieldName == kFIELD_STRIDE)
            {
                target = &attrs.stride;
            }
            else if (fieldName == kFIELD_PADDING)
            {
                target = &attrs.padding;
            }
            else if (fieldName == kFIELD_DILATION)
            {
                target = &attrs.dilation;
            }
            else if (fieldName == kFIELD_GROUPS)
            {
                target = &attrs.groups;
                haveGroups = true;
            }
            else
            {
                logInvolutionError("createPlugin(" + layer + "): unknown field '" + fieldName
                    + "' (expected kernel_size, stride, padding, dilation, groups)");
                return nullptr;
            }
            if (field.data == nullptr || field.length != 1)
            {
                logInvolutionError("createPlugin(" + layer + "): field '" + fieldName + "' must hold one value");
                return nullptr;
            }
            if (field.type == PluginFieldType::kINT32)
            {
                *target = *static_cast<int32_t const*>(field.data);
            }
            else if (field.type == PluginFieldType::kINT64)
            {
                int64_t const value = *static_cast<int64_t const*>(field.data);
                if (value < std::numeric_limits<int32_t>::min() || value > std::numeric_limits<int32_t>::max())
                {
                    logInvolutionError("createPlugin(" + layer + "): field '" + fieldName + "' is out of int32 range");
                    return nullptr;
                }
                *target = static_cast<int32_t>(value);
            }
            else
            {
                logInvolutionError("createPlugin(" + layer + "): field '" + fieldName + "' must be of type kINT32");
                return nullptr;
            }
        }
        if (!haveKernelSize || !haveGroups)
        {
            logInvolutionError("createPlugin(" + layer + "): fields kernel_size and groups are required");
            return nullptr;
        }
        if (char const* invalid = validateInvolutionAttributes(attrs))
        {
            logInvolutionError("createPlugin(" + layer + "): " + invalid);
            return nullptr;
        }
        return new InvolutionPlugin(attrs);
    }
    catch (std::exception const& e)
    {
        logInvolutionError(std::string("createPlugin: ") + e.what());
    }
    return nullptr;
}

} // namespace plugin
} // namespace trtbuild
