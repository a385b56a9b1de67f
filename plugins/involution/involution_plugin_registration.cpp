/*
 * How TensorRT finds the Involution plugin creator in the shared library.
 *
 * Built twice (see CMakeLists.txt and README.md):
 *
 * - libtrtbuild_involution_plugin.so (TRTBUILD_INVOLUTION_STATIC_REGISTRATION=0): a "dynamic"
 *   plugin library. It exports the TensorRT 10 plugin-library entry points getCreators() and
 *   setLoggerFinder() and registers nothing when it is loaded. IPluginRegistry::loadLibrary()
 *   (Python: trt.get_plugin_registry().load_library(path)), `trtexec --dynamicPlugins=` and
 *   `--setPluginsToSerialize=` call those entry points and register the creator themselves. It
 *   does not link libnvinfer, as TensorRT asks of libraries serialized into version-compatible
 *   engines.
 *
 * - libtrtbuild_involution_plugin_static.so (TRTBUILD_INVOLUTION_STATIC_REGISTRATION=1): a
 *   "static" plugin library. A static object registers the creator in the global registry
 *   (getPluginRegistry()) as soon as the library is loaded, which is what `trtexec
 *   --staticPlugins=`, LD_PRELOAD and Triton's `--backend-config=tensorrt,plugins=` (a plain
 *   dlopen) rely on. It exports no getCreators(): a loader that calls it would try to register
 *   the same creator a second time, which TensorRT rejects.
 */
#include "involution_plugin.h"

#include <cstdint>

#if defined(_MSC_VER)
#define TRTBUILD_PLUGIN_EXPORT __declspec(dllexport)
#else
#define TRTBUILD_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

#ifndef TRTBUILD_INVOLUTION_STATIC_REGISTRATION
#define TRTBUILD_INVOLUTION_STATIC_REGISTRATION 0
#endif

namespace
{

trtbuild::plugin::InvolutionPluginCreator& involutionCreator() noexcept
{
    // Constructed on first use; lives until the library is unloaded.
    static trtbuild::plugin::InvolutionPluginCreator creator;
    return creator;
}

} // namespace

#if TRTBUILD_INVOLUTION_STATIC_REGISTRATION

namespace
{

//! Registers the creator under namespace "trtbuild" when the library is loaded, unless a creator
//! with the same name, version and namespace is already there (e.g. the library was loaded twice).
class InvolutionStaticRegistrar
{
public:
    InvolutionStaticRegistrar()
    {
        nvinfer1::IPluginRegistry* registry = getPluginRegistry();
        if (registry == nullptr)
        {
            trtbuild::plugin::logInvolutionError("getPluginRegistry() returned null; Involution not registered");
            return;
        }
        auto& creator = involutionCreator();
        if (registry->getCreator(creator.getPluginName(), creator.getPluginVersion(), creator.getPluginNamespace())
            != nullptr)
        {
            return;
        }
        if (!registry->registerCreator(creator, creator.getPluginNamespace()))
        {
            trtbuild::plugin::logInvolutionError("IPluginRegistry::registerCreator refused the Involution creator");
        }
    }
};

InvolutionStaticRegistrar const gInvolutionStaticRegistrar{};

} // namespace

#else // dynamic plugin library

extern "C" TRTBUILD_PLUGIN_EXPORT void setLoggerFinder(nvinfer1::ILoggerFinder* finder)
{
    trtbuild::plugin::setInvolutionLoggerFinder(finder);
}

extern "C" TRTBUILD_PLUGIN_EXPORT nvinfer1::IPluginCreatorInterface* const* getCreators(int32_t& nbCreators)
{
    static nvinfer1::IPluginCreatorInterface* const creators[] = {&involutionCreator()};
    nbCreators = static_cast<int32_t>(sizeof(creators) / sizeof(creators[0]));
    return creators;
}

#endif
