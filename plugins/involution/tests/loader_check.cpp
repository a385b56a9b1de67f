/*
 * Loads libtrtbuild_involution_plugin.so the way TensorRT's IPluginRegistry::loadLibrary() and
 * `trtexec --dynamicPlugins=` do (dlopen, then the C entry points setLoggerFinder / getCreators)
 * and drives the creator and the plugin through the TensorRT 10 interfaces, using only the
 * TensorRT headers: no libnvinfer and no GPU are needed.
 *
 *   involution_loader_check path/to/libtrtbuild_involution_plugin.so
 *
 * Built by scripts/build_plugins.sh --plugin and by CMake (ctest) when TensorRT headers are found.
 * Exit code 0 = every check passed, 1 = a check failed, 77 = the library could not be loaded
 * because a dependency (libcudart) is not on the loader path (reported as skipped).
 */
#include <NvInferRuntime.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <string>

using namespace nvinfer1;

namespace
{

int gFailures = 0;

void check(bool ok, char const* what, int line)
{
    if (!ok)
    {
        std::printf("FAIL (line %d): %s\n", line, what);
        ++gFailures;
    }
}

#define CHECK(cond) check((cond), #cond, __LINE__)

bool same(char const* a, char const* b)
{
    return a != nullptr && b != nullptr && std::strcmp(a, b) == 0;
}

//! Counts the errors the library reports through the ILoggerFinder it was handed.
class CountingLogger : public ILogger
{
public:
    void log(Severity severity, AsciiChar const* msg) noexcept override
    {
        if (severity <= Severity::kERROR)
        {
            ++errors;
        }
        std::printf("  [plugin log] %s\n", msg);
    }
    int errors{0};
};

class Finder : public ILoggerFinder
{
public:
    explicit Finder(ILogger* logger)
        : mLogger(logger)
    {
    }
    ILogger* findLogger() override
    {
        return mLogger;
    }

private:
    ILogger* mLogger;
};

DynamicPluginTensorDesc desc(Dims const& dims, DataType type)
{
    DynamicPluginTensorDesc d{};
    d.desc.dims = dims;
    d.desc.type = type;
    d.desc.format = TensorFormat::kLINEAR;
    d.desc.scale = -1.0F;
    d.min = dims;
    d.opt = dims;
    d.max = dims;
    return d;
}

Dims dims4(int64_t a, int64_t b, int64_t c, int64_t d)
{
    Dims r{};
    r.nbDims = 4;
    r.d[0] = a;
    r.d[1] = b;
    r.d[2] = c;
    r.d[3] = d;
    return r;
}

void checkPlugin(IPluginCreatorV3One& creator, CountingLogger& logger)
{
    // kernel_size 3, stride 2, padding 1, groups 4: x (2, 8, 9, 9) -> out (2, 8, 5, 5), w (2, 4*9, 5, 5).
    int32_t kernelSize = 3, stride = 2, padding = 1, dilation = 1, groups = 4;
    PluginField fields[] = {
        PluginField("kernel_size", &kernelSize, PluginFieldType::kINT32, 1),
        PluginField("stride", &stride, PluginFieldType::kINT32, 1),
        PluginField("padding", &padding, PluginFieldType::kINT32, 1),
        PluginField("dilation", &dilation, PluginFieldType::kINT32, 1),
        PluginField("groups", &groups, PluginFieldType::kINT32, 1),
    };
    PluginFieldCollection fc{5, fields};
    IPluginV3* plugin = creator.createPlugin("inv", &fc, TensorRTPhase::kBUILD);
    CHECK(plugin != nullptr);
    if (plugin == nullptr)
    {
        return;
    }
    CHECK(same(plugin->getInterfaceInfo().kind, "PLUGIN"));

    // TensorRT casts the capability pointers to the interface it asked for.
    auto* core = static_cast<IPluginV3OneCore*>(plugin->getCapabilityInterface(PluginCapabilityType::kCORE));
    auto* build = static_cast<IPluginV3OneBuild*>(plugin->getCapabilityInterface(PluginCapabilityType::kBUILD));
    auto* runtime = static_cast<IPluginV3OneRuntime*>(plugin->getCapabilityInterface(PluginCapabilityType::kRUNTIME));
    CHECK(core != nullptr && build != nullptr && runtime != nullptr);
    if (core == nullptr || build == nullptr || runtime == nullptr)
    {
        delete plugin;
        return;
    }
    CHECK(same(core->getInterfaceInfo().kind, "PLUGIN_V3ONE_CORE"));
    CHECK(same(build->getInterfaceInfo().kind, "PLUGIN_V3ONE_BUILD"));
    CHECK(same(runtime->getInterfaceInfo().kind, "PLUGIN_V3ONE_RUNTIME"));
    CHECK(same(core->getPluginName(), "Involution"));
    CHECK(same(core->getPluginVersion(), "1"));
    CHECK(same(core->getPluginNamespace(), "trtbuild"));

    CHECK(build->getNbOutputs() == 1);
    DataType inTypes[2] = {DataType::kHALF, DataType::kHALF};
    DataType outTypes[1] = {DataType::kFLOAT};
    CHECK(build->getOutputDataTypes(outTypes, 1, inTypes, 2) == 0);
    CHECK(outTypes[0] == DataType::kHALF);
    int errorsBefore = logger.errors;
    DataType mixed[2] = {DataType::kFLOAT, DataType::kHALF};
    CHECK(build->getOutputDataTypes(outTypes, 1, mixed, 2) != 0);
    CHECK(logger.errors == errorsBefore + 1);

    DynamicPluginTensorDesc io[3] = {desc(dims4(2, 8, 9, 9), DataType::kFLOAT),
        desc(dims4(2, 36, 5, 5), DataType::kFLOAT), desc(dims4(2, 8, 5, 5), DataType::kFLOAT)};
    CHECK(build->supportsFormatCombination(0, io, 2, 1));
    CHECK(build->supportsFormatCombination(1, io, 2, 1));
    CHECK(build->supportsFormatCombination(2, io, 2, 1));
    io[2].desc.type = DataType::kHALF;
    CHECK(!build->supportsFormatCombination(2, io, 2, 1));
    io[2].desc.type = DataType::kFLOAT;
    io[1].desc.format = TensorFormat::kHWC8;
    CHECK(!build->supportsFormatCombination(1, io, 2, 1));
    io[1].desc.format = TensorFormat::kLINEAR;
    io[0].desc.type = DataType::kINT8;
    CHECK(!build->supportsFormatCombination(0, io, 2, 1));
    io[0].desc.type = DataType::kFLOAT;

    CHECK(build->configurePlugin(io, 2, io + 2, 1) == 0);
    CHECK(build->getWorkspaceSize(io, 2, io + 2, 1) == 0);
    errorsBefore = logger.errors;
    io[2].desc.dims = dims4(2, 8, 4, 5); // wrong output height
    CHECK(build->configurePlugin(io, 2, io + 2, 1) != 0);
    CHECK(logger.errors == errorsBefore + 1);
    io[2].desc.dims = dims4(2, 8, 5, 5);

    PluginTensorDesc runtimeIo[3] = {io[0].desc, io[1].desc, io[2].desc};
    CHECK(runtime->onShapeChange(runtimeIo, 2, runtimeIo + 2, 1) == 0);

    // Serialization round trip: TensorRT hands getFieldsToSerialize() back to createPlugin(kRUNTIME).
    PluginFieldCollection const* serialized = runtime->getFieldsToSerialize();
    CHECK(serialized != nullptr && serialized->nbFields == 5);
    IPluginV3* restored = creator.createPlugin("inv", serialized, TensorRTPhase::kRUNTIME);
    CHECK(restored != nullptr);
    if (restored != nullptr)
    {
        auto* restoredRuntime
            = static_cast<IPluginV3OneRuntime*>(restored->getCapabilityInterface(PluginCapabilityType::kRUNTIME));
        CHECK(restoredRuntime != nullptr && restoredRuntime->onShapeChange(runtimeIo, 2, runtimeIo + 2, 1) == 0);
    }

    IPluginV3* cloned = plugin->clone();
    CHECK(cloned != nullptr);
    IPluginV3* attached = runtime->attachToContext(nullptr);
    CHECK(attached != nullptr);

    delete attached;
    delete cloned;
    delete restored;
    delete plugin;
}

} // namespace

int main(int argc, char** argv)
{
    if (argc != 2)
    {
        std::fprintf(stderr, "usage: %s path/to/libtrtbuild_involution_plugin.so\n", argv[0]);
        return 1;
    }
    void* handle = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr)
    {
        std::string const error = dlerror();
        std::printf("dlopen(%s) failed: %s\n", argv[1], error.c_str());
        return error.find("libcudart") != std::string::npos ? 77 : 1;
    }

    // The two C entry points TensorRT 10 looks up in a plugin library.
    using GetCreatorsFn = IPluginCreatorInterface* const* (*) (int32_t&);
    using SetLoggerFinderFn = void (*)(ILoggerFinder*);
    auto getCreators = reinterpret_cast<GetCreatorsFn>(dlsym(handle, "getCreators"));
    auto setLoggerFinder = reinterpret_cast<SetLoggerFinderFn>(dlsym(handle, "setLoggerFinder"));
    CHECK(getCreators != nullptr);
    CHECK(setLoggerFinder != nullptr);
    // No IPluginV2 creators, so no legacy getPluginCreators() entry point either.
    CHECK(dlsym(handle, "getPluginCreators") == nullptr);
    if (getCreators == nullptr || setLoggerFinder == nullptr)
    {
        std::printf("LOADER CHECK FAILED (%d failures)\n", gFailures);
        return 1;
    }

    CountingLogger logger;
    Finder finder(&logger);
    setLoggerFinder(&finder);

    int32_t nbCreators = -1;
    IPluginCreatorInterface* const* creators = getCreators(nbCreators);
    CHECK(nbCreators == 1 && creators != nullptr && creators[0] != nullptr);
    if (nbCreators == 1 && creators != nullptr && creators[0] != nullptr)
    {
        // TensorRT tells V1 and V3 creators apart by their interface kind.
        InterfaceInfo const info = creators[0]->getInterfaceInfo();
        CHECK(same(info.kind, "PLUGIN CREATOR_V3ONE") && info.major == 1);
        auto* creator = static_cast<IPluginCreatorV3One*>(creators[0]);
        CHECK(same(creator->getPluginName(), "Involution"));
        CHECK(same(creator->getPluginVersion(), "1"));
        CHECK(same(creator->getPluginNamespace(), "trtbuild"));
        PluginFieldCollection const* names = creator->getFieldNames();
        CHECK(names != nullptr && names->nbFields == 5);

        checkPlugin(*creator, logger);

        // A bad field is refused, and the refusal goes to the logger TensorRT handed the library.
        int const errorsBefore = logger.errors;
        int32_t zero = 0, groups = 1;
        PluginField bad[] = {PluginField("kernel_size", &zero, PluginFieldType::kINT32, 1),
            PluginField("groups", &groups, PluginFieldType::kINT32, 1)};
        PluginFieldCollection badFc{2, bad};
        CHECK(creator->createPlugin("bad", &badFc, TensorRTPhase::kBUILD) == nullptr);
        CHECK(logger.errors == errorsBefore + 1);
    }
    setLoggerFinder(nullptr);

    std::printf("%s (%d failures)\n", gFailures == 0 ? "LOADER CHECK PASSED" : "LOADER CHECK FAILED", gFailures);
    return gFailures == 0 ? 0 : 1;
}
