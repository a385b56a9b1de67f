#!/usr/bin/env bash
# Build the involution CUDA kernels (and optionally the self-test and the TensorRT plugin
# libraries) with nvcc directly: no CMake needed.
#
#   scripts/build_plugins.sh [--out DIR] [--arch "80 90"] [--selftest] [--plugin]
#
#   --out DIR     where to write the outputs (default: plugins/build)
#   --arch LIST   SM versions to generate SASS for (default: "80 90" = A100 and H100/H200)
#   --selftest    also link DIR/involution_selftest (runs the kernels against a CPU loop; needs a GPU)
#   --plugin      also build DIR/libtrtbuild_involution_plugin.so and, when libnvinfer is found,
#                 DIR/libtrtbuild_involution_plugin_static.so; needs TensorRT >= 10.0 headers in
#                 $TRT_ROOT/include (or /usr/include/x86_64-linux-gnu). Also builds
#                 DIR/involution_loader_check, which loads the plugin library the way
#                 IPluginRegistry::loadLibrary does (no GPU or libnvinfer needed to run it)
#
# Environment: NVCC (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc), CUDA_HOME (default:
# the toolkit nvcc belongs to), CXX (default g++), TRT_ROOT, EXTRA_NVCC_FLAGS (added to the
# kernels' nvcc command). Always writes DIR/involution_kernels.o.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$here/plugins/involution"
out="$here/plugins/build"
archs="80 90"
selftest=0
plugin=0

while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --arch) archs="$2"; shift 2 ;;
    --selftest) selftest=1; shift ;;
    --plugin) plugin=1; shift ;;
    -h|--help) sed -n '2,18p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "build_plugins.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

nvcc_bin="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
if [[ ! -x "$nvcc_bin" ]]; then
  echo "build_plugins.sh: nvcc not found (set NVCC=/path/to/nvcc)" >&2
  exit 3
fi
cxx="${CXX:-g++}"
# nvcc may be a wrapper script: ask it where its toolkit is (the "TOP" of its dry run).
cuda_top="$("$nvcc_bin" --dryrun -x cu -c /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ TOP=//p' | head -1)"
cuda_root="${CUDA_HOME:-$(cd "${cuda_top:-$(dirname "$nvcc_bin")/..}" && pwd)}"

gencode=()
for sm in $archs; do
  gencode+=("-gencode" "arch=compute_${sm},code=sm_${sm}")
done
# Also embed PTX for the newest listed arch so later GPUs can JIT-compile it.
last_sm="${archs##* }"
gencode+=("-gencode" "arch=compute_${last_sm},code=compute_${last_sm}")

mkdir -p "$out"
common_flags=(-std=c++17 -O3 -Xcompiler -fPIC -Xcompiler -fvisibility=hidden
              -Xcompiler -Wall -Xcompiler -Wextra -Werror all-warnings)
# Extra nvcc flags for the kernels object, e.g. EXTRA_NVCC_FLAGS="-Xptxas -v" to print register use.
read -r -a extra_nvcc_flags <<< "${EXTRA_NVCC_FLAGS:-}"

echo "[build_plugins] nvcc: $nvcc_bin ($("$nvcc_bin" --version | tail -1))"
echo "[build_plugins] archs: $archs -> $out/involution_kernels.o"
"$nvcc_bin" "${common_flags[@]}" "${extra_nvcc_flags[@]}" "${gencode[@]}" -c "$src/involution_kernels.cu" \
  -o "$out/involution_kernels.o"

if [[ $selftest -eq 1 ]]; then
  echo "[build_plugins] linking $out/involution_selftest"
  "$nvcc_bin" "${common_flags[@]}" "${gencode[@]}" "$src/tests/involution_selftest.cu" "$out/involution_kernels.o" \
    -o "$out/involution_selftest"
fi

if [[ $plugin -eq 1 ]]; then
  trt_inc=""
  for d in "${TRT_ROOT:-}/include" /usr/include/x86_64-linux-gnu /usr/include/aarch64-linux-gnu /usr/local/tensorrt/include; do
    if [[ -f "$d/NvInferRuntime.h" ]]; then trt_inc="$d"; break; fi
  done
  if [[ -z "$trt_inc" ]]; then
    echo "build_plugins.sh: --plugin needs TensorRT >= 10.0 headers (NvInferRuntime.h); set TRT_ROOT" >&2
    exit 4
  fi
  # -Wsuggest-override: every method that overrides a TensorRT interface must say so, so that a
  # signature that drifts from the headers is a compile error rather than a silent new overload.
  warn_flags=(-Wall -Wextra -Wsuggest-override -Wnon-virtual-dtor)
  cxx_flags=(-std=c++17 -O2 -fPIC -fvisibility=hidden -fvisibility-inlines-hidden "${warn_flags[@]}"
             -isystem "$trt_inc" -isystem "$cuda_root/include" -I"$src")
  plugin_sources=("$src/involution_plugin.cpp" "$src/involution_plugin_creator.cpp" "$src/involution_plugin_registration.cpp")
  cuda_libs=(-L"$cuda_root/lib64" -L"$cuda_root/lib" -lcudart)

  echo "[build_plugins] TensorRT headers: $trt_inc"
  "$cxx" "${cxx_flags[@]}" -DTRTBUILD_INVOLUTION_STATIC_REGISTRATION=0 -shared "${plugin_sources[@]}" \
    "$out/involution_kernels.o" "${cuda_libs[@]}" -Wl,--no-undefined -o "$out/libtrtbuild_involution_plugin.so"
  echo "[build_plugins] wrote $out/libtrtbuild_involution_plugin.so"

  "$cxx" -std=c++17 -O1 "${warn_flags[@]}" -isystem "$trt_inc" -isystem "$cuda_root/include" \
    "$src/tests/loader_check.cpp" -ldl -o "$out/involution_loader_check"
  echo "[build_plugins] wrote $out/involution_loader_check (run: $out/involution_loader_check $out/libtrtbuild_involution_plugin.so)"

  trt_lib=""
  for d in "${TRT_ROOT:-}/lib" "${TRT_ROOT:-}/lib64" /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/local/tensorrt/lib; do
    if [[ -e "$d/libnvinfer.so" ]]; then trt_lib="$d"; break; fi
  done
  if [[ -n "$trt_lib" ]]; then
    "$cxx" "${cxx_flags[@]}" -DTRTBUILD_INVOLUTION_STATIC_REGISTRATION=1 -shared "${plugin_sources[@]}" \
      "$out/involution_kernels.o" "${cuda_libs[@]}" -L"$trt_lib" -lnvinfer -Wl,-rpath,"$trt_lib" \
      -o "$out/libtrtbuild_involution_plugin_static.so"
    echo "[build_plugins] wrote $out/libtrtbuild_involution_plugin_static.so"
  else
    echo "[build_plugins] libnvinfer.so not found: skipped libtrtbuild_involution_plugin_static.so"
  fi
fi
echo "[build_plugins] done"
