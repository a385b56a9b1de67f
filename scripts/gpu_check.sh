#!/usr/bin/env bash
# Check trtbuild on a GPU machine in one go, in under 8 minutes, and write ONE Markdown report.
#
#   scripts/gpu_check.sh [--dry-run] [--report FILE] [--logs FILE] [--wheels DIR] [--python PY]
#                        [--budget SECONDS] [--arch "90"] [--zoo-precisions fp32,fp16] [--steps REGEX]
#                        [--tail LINES] [--keep-work]
#
# Steps (each time-boxed and logged; one failing stops no other, except a step that needs another's output):
#   env                GPU properties, torch/CUDA versions, a measured device-to-device copy bandwidth
#   kernels            scripts/build_plugins.sh --selftest: the involution CUDA kernels with nvcc
#   kernels_selftest   the kernels against a CPU loop (the binary the kernels step linked)
#   trt_plugin         the TensorRT plugin library; skipped where the TensorRT headers are absent
#   torch_extension    the involution PyTorch extension (torch.utils.cpp_extension), checked once
#   pytest_gpu         pytest -m gpu over the test files that use the gpu mark, TF32 off
#   bench_fp32/_fp16   scripts/bench_involution.py: the kernel against the unfold op, % of peak bandwidth
#   rtx_install        TensorRT-RTX from local files (--wheels), into a temporary folder
#   rtx_current        a tiny TensorRT-RTX engine for ComputeCapability.CURRENT, built and run: its exact answer
#   zoo_<model>_<p>    trtbuild parity <model> --small --backend reference (the reference runs on CUDA)
#   rtx_parity         trtbuild parity resnet18 --small --backend tensorrt-rtx --target current (skipped on
#                      Hopper, sm90, where TensorRT-RTX 1.7 runs no engine; rtx_current records its refusal)
#   rtx_strip          trtbuild build resnet18 and repvgg_a0 (full size) --backend tensorrt-rtx --target sm86:
#                      plain, --refit, --refit any, --refit --strip-weights; a table of each build's result (or
#                      exact error), plan bytes, build seconds, refit-record names, and whether TensorRT-RTX
#                      deserializes the refittable plans and creates a Refitter (last: select it with --steps)
#
# Options:
#   --dry-run          check the prerequisites, print every step's command, write the report; run no step
#   --report FILE      the report (default: $OUT/gpu_check_report.md where $OUT is set,
#                      else ./gpu_check_report.md)
#   --logs FILE        also write every step's whole log as a .tar.gz (default: $OUT/gpu_check_logs.tar.gz
#                      where $OUT is set, else none)
#   --wheels DIR       local TensorRT-RTX files: tensorrt_rtx*.whl and/or a tensorrt_rtx*.tar.xz (or its .partN
#                      files) made by `scripts/gpu_check_steps.py pack-rtx` (default: $TRTBUILD_WHEELS, else the
#                      repository's .whl)
#   --python PY        the Python holding PyTorch (default: $PYTHON, else python3)
#   --budget SECONDS   stop starting steps after this long (default 450); each step's time-out is cut to fit
#   --arch LIST        SM numbers for nvcc (default: the GPU's, e.g. "90"; "80 90" without a GPU)
#   --zoo-precisions   precisions of the zoo parity runs (default fp32,fp16; fp32 ones first)
#   --steps REGEX      run only the steps whose name matches this extended regex, e.g. 'rtx|zoo_resnet18'
#                      (the others are reported as not selected); a step's inputs must be selected too
#   --tail LINES       lines of each step's output in the report (default 40)
#   --keep-work        keep the temporary work folder (builds, weights, logs) and print where it is
#
# Environment: TF32 is turned off for every step (NVIDIA_TF32_OVERRIDE=0, and in pytest by the plugin in
# scripts/gpu_check_steps.py). Builds, weights and logs go to a temporary folder under $TMPDIR, removed at
# the end; nothing is written into the repository. Exit code: 0 when no step failed (or --dry-run),
# 1 when a step failed or timed out, 2 for bad arguments or a report that cannot be written.
#
# Bringing TensorRT-RTX (the GPU machines have no TensorRT and no package index): the libs wheel is 95 MB
# (libtensorrt_rtx.so.1 is 234 MB unpacked), over the 64 MiB a device call carries, working tree included.
# Repack both wheels (the GPU machine's Python is 3.12) into one xz archive of about 61 MiB, on a machine with pip:
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 -d /tmp/rtx tensorrt-rtx-cu13-bindings==1.7.1.116 \
#       tensorrt-rtx-cu13-libs==1.7.1.116
#   echo /.whl/ >> .git/info/exclude
#   python3 scripts/gpu_check_steps.py pack-rtx /tmp/rtx/*.whl --out .whl/tensorrt_rtx_site.tar.xz
# (several minutes; it prints whether archive and working tree fit in one call) and name ".whl" in the call's
# carry. If they do not fit, add --split-mib 40, carry the parts in two calls made back to back (the machine
# stays warm only briefly): the first copies its part to a folder outside the tree (mkdir -p /tmp/rtx &&
# cp .whl/* /tmp/rtx/), the second copies the other part there too and runs this script with --wheels /tmp/rtx.
# Without TensorRT-RTX files the rtx steps are skipped, saying so.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prog="gpu_check.sh"

dry_run=0
report=""
logs=""
wheels="${TRTBUILD_WHEELS:-$here/.whl}"
py="${PYTHON:-python3}"
budget=450
arch=""
zoo_precisions="fp32,fp16"
tail_lines=40
keep_work=0
steps_re=""

usage_error() { echo "$prog: $1 (see --help)" >&2; exit 2; }
need_value() { [[ $# -ge 2 && -n "$2" ]] || usage_error "$1 needs a value"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dry-run) dry_run=1; shift ;;
    --report) need_value "$@"; report="$2"; shift 2 ;;
    --logs) need_value "$@"; logs="$2"; shift 2 ;;
    --wheels) need_value "$@"; wheels="$2"; shift 2 ;;
    --python) need_value "$@"; py="$2"; shift 2 ;;
    --budget) need_value "$@"; budget="$2"; shift 2 ;;
    --arch) need_value "$@"; arch="$2"; shift 2 ;;
    --zoo-precisions) need_value "$@"; zoo_precisions="$2"; shift 2 ;;
    --tail) need_value "$@"; tail_lines="$2"; shift 2 ;;
    --steps) need_value "$@"; steps_re="$2"; shift 2 ;;
    --keep-work) keep_work=1; shift ;;
    -h|--help) sed -n '2,/^set -uo pipefail/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) usage_error "unknown argument '$1'" ;;
  esac
done
[[ "$budget" =~ ^[0-9]+$ ]] || usage_error "--budget must be a whole number of seconds, not '$budget'"
[[ "$tail_lines" =~ ^[0-9]+$ ]] || usage_error "--tail must be a whole number of lines, not '$tail_lines'"

if [[ -z "$report" ]]; then
  if [[ -n "${OUT:-}" ]]; then report="$OUT/gpu_check_report.md"; else report="$PWD/gpu_check_report.md"; fi
fi
if [[ -z "$logs" && -n "${OUT:-}" && $dry_run -eq 0 ]]; then logs="$OUT/gpu_check_logs.tar.gz"; fi

# The report must be writable before anything runs: one sentence and exit 2 otherwise.
report_error() { echo "$prog: cannot write the report to '$report': $1" >&2; exit 2; }
[[ -d "$report" || "$report" == */ ]] && report_error "it is a directory"
report_dir="$(dirname -- "$report")"
if [[ ! -d "$report_dir" ]]; then
  err="$(mkdir -p -- "$report_dir" 2>&1)" || report_error "its folder '$report_dir' cannot be created (${err##*: })"
fi
if ! err="$( { : > "$report"; } 2>&1 )"; then
  report_error "${err##*: }"
fi
report="$(cd "$report_dir" && pwd)/$(basename -- "$report")"

export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 MPLBACKEND=Agg
export NVIDIA_TF32_OVERRIDE=0

work=""
if [[ $dry_run -eq 0 ]]; then
  work="$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")" || {
    echo "$prog: cannot create a work folder under ${TMPDIR:-/tmp}" >&2; exit 2; }
  mkdir -p "$work/logs" "$work/zoo" "$work/rtx"
  export TORCH_EXTENSIONS_DIR="$work/torch_extensions"
  export MAX_JOBS="${MAX_JOBS:-$(nproc 2>/dev/null || echo 4)}"
fi
cleanup() {
  if [[ -n "$work" && $keep_work -eq 0 ]]; then rm -rf -- "$work"; fi
  if [[ -n "$work" && $keep_work -eq 1 ]]; then echo "[gpu_check] work folder kept: $work"; fi
}
trap cleanup EXIT
trap 'echo "[gpu_check] interrupted" >&2; exit 130' INT TERM

# ------------------------------------------------------------------ what the machine has
started="$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
t0=$SECONDS
q() { printf '%q' "$1"; }
probe_out="$(timeout -k 5 120 "$py" "$here/scripts/gpu_check_steps.py" probe 2>&1)"
py_ok=$?
field() { sed -n "s/^$1: //p" <<< "$probe_out" | head -1; }
has_gpu=0
if [[ $py_ok -eq 0 && "$(field gpu)" == True ]]; then has_gpu=1; fi
if [[ -z "$arch" ]]; then arch="$(field sm)"; arch="${arch:-80 90}"; fi
read -r -a models <<< "$(field models)"
nvcc_bin="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
[[ -x "$nvcc_bin" ]] || nvcc_bin=""
trt_inc=""
for d in "${TRT_ROOT:-}/include" /usr/include/x86_64-linux-gnu /usr/include/aarch64-linux-gnu \
         /usr/local/tensorrt/include; do
  if [[ -f "$d/NvInferRuntime.h" ]]; then trt_inc="$d"; break; fi
done
shopt -s nullglob
rtx_files=("$wheels"/tensorrt_rtx*.whl "$wheels"/tensorrt_rtx*.tar.xz "$wheels"/tensorrt_rtx*.tar.xz.part*)
shopt -u nullglob
mapfile -t gpu_test_files < <(cd "$here" && grep -rlE 'mark\.gpu\b' tests --include='*.py' 2>/dev/null | sort)

prereq=()
check() {  # check DESCRIPTION OK(0/1) DETAIL
  if [[ $2 -eq 0 ]]; then prereq+=("- [x] $1: $3"); else prereq+=("- [ ] $1: $3"); fi
}
check "bash ${BASH_VERSINFO[0]}.${BASH_VERSINFO[1]}" 0 "$(command -v bash)"
if [[ $py_ok -eq 0 ]]; then
  check "Python with PyTorch ($py)" 0 "Python $(field python), torch $(field torch) built for CUDA $(field cuda), \
torch.cuda.is_available() $(field gpu)"
else
  check "Python with PyTorch ($py)" 1 "it failed: $(tail -1 <<< "$probe_out")"
fi
if [[ $has_gpu -eq 1 ]]; then
  check "a CUDA GPU" 0 "visible to PyTorch; SM $arch"
else
  check "a CUDA GPU" 1 "none visible to PyTorch"
fi
if [[ -n "$nvcc_bin" ]]; then
  check "nvcc" 0 "$nvcc_bin ($("$nvcc_bin" --version 2>&1 | tail -1))"
else
  check "nvcc" 1 "not found (set NVCC or put the CUDA toolkit on PATH)"
fi
if command -v nvidia-smi > /dev/null; then
  check "nvidia-smi" 0 "$(command -v nvidia-smi)"
else
  check "nvidia-smi" 1 "not found"
fi
if [[ ${#models[@]} -gt 0 ]]; then
  check "trtbuild imports (PYTHONPATH=$here)" 0 "zoo: ${models[*]}"
else
  check "trtbuild imports (PYTHONPATH=$here)" 1 "$(field models-error)"
fi
if [[ -n "$(field pytest)" ]]; then
  check "pytest" 0 "$(field pytest)"
else
  check "pytest" 1 "$(field pytest-error)"
fi
check "tests using the gpu mark" $(( ${#gpu_test_files[@]} == 0 )) "${gpu_test_files[*]:-none found under tests/}"
if [[ ${#rtx_files[@]} -gt 0 ]]; then
  check "TensorRT-RTX files in $wheels" 0 "$(for f in "${rtx_files[@]}"; do
    printf '%s (%s) ' "$(basename "$f")" "$(du -h "$f" | cut -f1)"; done)"
else
  check "TensorRT-RTX files in $wheels" 1 "none (tensorrt_rtx*.whl, tensorrt_rtx*.tar.xz[.partN]; see --help)"
fi
if [[ -n "$trt_inc" ]]; then
  check "TensorRT headers" 0 "$trt_inc"
else
  check "TensorRT headers" 1 "NvInferRuntime.h not found (TRT_ROOT unset or no TensorRT)"
fi

nvsmi="$(timeout -k 5 30 nvidia-smi 2>&1)" || nvsmi="nvidia-smi failed or is missing: ${nvsmi:-no output}"
if [[ -n "$nvcc_bin" ]]; then nvcc_v="$("$nvcc_bin" --version 2>&1 | tail -2)"; else nvcc_v="nvcc not found"; fi
commit="$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo "no git metadata in this copy")"

# ------------------------------------------------------------------ steps and the report
names=(); cmds=(); statuses=(); rcs=(); durations=(); keys=(); tails=()
failed=0

write_report() {
  local i tmp="$report.tmp.$$"
  {
    echo "# trtbuild GPU check"
    echo
    echo "- started: $started; host $(hostname 2>/dev/null || echo '?'); repository $here at $commit"
    if [[ $dry_run -eq 1 ]]; then
      echo "- mode: dry run (--dry-run): commands printed, no step run"
    else
      echo "- mode: run"
    fi
    echo "- budget: $budget s; elapsed when written: $((SECONDS - t0)) s"
    echo "- TF32: off. NVIDIA_TF32_OVERRIDE=0 for every step (cuBLAS and cuDNN); in pytest, -p gpu_check_steps sets"
    echo "  torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32 to False before each test"
    echo "- Python: PYTHONPATH=$PYTHONPATH, PYTHONDONTWRITEBYTECODE=1, TORCH_CUDA_ARCH_LIST=$TORCH_CUDA_ARCH_LIST"
    if [[ -n "$work" ]]; then
      echo "- work folder: $work (TORCH_EXTENSIONS_DIR=$TORCH_EXTENSIONS_DIR, MAX_JOBS=$MAX_JOBS)"
    fi
    echo
    echo "## Prerequisites"
    echo
    printf '%s\n' "${prereq[@]}"
    echo
    echo "## Versions"
    echo
    echo '```text'
    grep -v '^models' <<< "$probe_out"
    echo "$nvcc_v"
    echo '```'
    echo
    echo "## nvidia-smi"
    echo
    echo '```text'
    echo "$nvsmi"
    echo '```'
    echo
    echo "## Summary"
    echo
    echo "| step | status | exit code | seconds |"
    echo "| --- | --- | --- | --- |"
    for i in "${!names[@]}"; do
      echo "| ${names[$i]} | ${statuses[$i]//|/\\|} | ${rcs[$i]} | ${durations[$i]} |"
    done
    for i in "${!names[@]}"; do
      echo
      echo "## ${names[$i]}"
      echo
      echo "- status: ${statuses[$i]}"
      echo "- command: \`${cmds[$i]}\`"
      if [[ "${rcs[$i]}" != - ]]; then echo "- exit code: ${rcs[$i]}; duration: ${durations[$i]} s"; fi
      if [[ -n "${keys[$i]}" ]]; then
        echo "- key figures:"
        sed 's/^key: //; s/^/  - /' <<< "${keys[$i]}"
      fi
      if [[ -n "${tails[$i]}" ]]; then
        echo
        echo "Last lines of its output (at most $tail_lines):"
        echo
        echo '```text'
        echo "${tails[$i]}"
        echo '```'
      fi
    done
  } > "$tmp" && mv -f -- "$tmp" "$report"
}

record() {  # record NAME COMMAND STATUS RC SECONDS KEYS TAIL
  names+=("$1"); cmds+=("$2"); statuses+=("$3"); rcs+=("$4"); durations+=("$5"); keys+=("$6"); tails+=("$7")
  if [[ "$5" == - ]]; then echo "[gpu_check] $1: $3"; else echo "[gpu_check] $1: $3 ($5 s)"; fi
  write_report
}

selected() { [[ -z "$steps_re" || "$1" =~ $steps_re ]]; }

dry_status() {
  if [[ $has_gpu -eq 0 ]]; then echo "not run: no GPU (dry run: command printed only)"; else echo "not run: dry run"; fi
}

# step NAME TIMEOUT NEEDS KEY_REGEX COMMAND: run COMMAND with bash -c, at most TIMEOUT seconds (less when the
# budget is nearly spent); NEEDS is gpu, nvcc or -; the log lines matching KEY_REGEX are its key figures.
step() {
  local name="$1" limit="$2" needs="$3" keyre="$4" cmd="$5" log left rc start secs status
  echo "[gpu_check] $name: $cmd"
  if ! selected "$name"; then
    record "$name" "$cmd" "not run: not selected (--steps '$steps_re')" - - "" ""
    return
  fi
  if [[ $dry_run -eq 1 ]]; then
    record "$name" "$cmd" "$(dry_status)" - - "" ""
    return
  fi
  if [[ "$needs" == gpu && $has_gpu -eq 0 ]]; then
    record "$name" "$cmd" "not run: no GPU visible to PyTorch" - - "" ""
    return
  fi
  if [[ "$needs" == nvcc && -z "$nvcc_bin" ]]; then
    record "$name" "$cmd" "skipped: nvcc not found (set NVCC)" - - "" ""
    return
  fi
  left=$(( budget - (SECONDS - t0) - 10 ))
  if [[ $left -lt 20 ]]; then
    record "$name" "$cmd" "not run: time budget spent (--budget $budget s)" - - "" ""
    return
  fi
  [[ $limit -gt $left ]] && limit=$left
  log="$work/logs/$name.log"
  start=$SECONDS
  timeout -k 10 "$limit" bash -c "$cmd" > "$log" 2>&1 < /dev/null
  rc=$?
  secs=$(( SECONDS - start ))
  if [[ $rc -eq 0 ]]; then
    status="passed"
  elif [[ $rc -eq 124 || $rc -eq 137 ]]; then
    status="timed out after $limit s"; failed=1
  else
    status="failed (exit $rc)"; failed=1
  fi
  record "$name" "$cmd" "$status" "$rc" "$secs" "$(grep -E -- "$keyre" "$log" | head -40)" \
    "$(tail -n "$tail_lines" "$log")"
}

# skip NAME NEEDS COMMAND REASON: a step that cannot run, for REASON (NEEDS as in step)
skip() {
  echo "[gpu_check] $1: $3"
  if ! selected "$1"; then
    record "$1" "$3" "not run: not selected (--steps '$steps_re')" - - "" ""
  elif [[ $dry_run -eq 1 ]]; then
    record "$1" "$3" "$(dry_status); would be skipped: $4" - - "" ""
  elif [[ "$2" == gpu && $has_gpu -eq 0 ]]; then
    record "$1" "$3" "not run: no GPU visible to PyTorch" - - "" ""
  else
    record "$1" "$3" "skipped: $4" - - "" ""
  fi
}

# where the work folder is (a dry run names it without creating it)
work_path="${work:-${TMPDIR:-/tmp}/gpu_check.XXXXXX}"
steps_py="$(q "$py") $(q "$here/scripts/gpu_check_steps.py")"
plugins_out="$work_path/plugins"
rtx_site="$work_path/rtx_site"
sm_list="$(for s in $arch; do printf '%s.%s;' "${s%?}" "${s: -1}"; done)"
export TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-${sm_list%;}}"

step env 90 gpu '^key: ' "$steps_py env"

build="bash $(q "$here/scripts/build_plugins.sh") --out $(q "$plugins_out") --arch $(q "$arch")"
step kernels 240 nvcc '^\[build_plugins\]|error' "$build --selftest"
selftest="$(q "$plugins_out/involution_selftest")"
if [[ $dry_run -eq 1 || -x "$plugins_out/involution_selftest" ]]; then
  step kernels_selftest 60 gpu '^(ALL PASS|SOME FAILED|FAIL|SKIP)' "$selftest"
else
  skip kernels_selftest gpu "$selftest" "the kernels step did not link it"
fi
plugin_cmd="$build --plugin && $(q "$plugins_out/involution_loader_check") \
$(q "$plugins_out/libtrtbuild_involution_plugin.so")"
if [[ -n "$trt_inc" ]]; then
  step trt_plugin 180 nvcc '^\[build_plugins\]|error' "$plugin_cmd"
else
  skip trt_plugin nvcc "$plugin_cmd" "the TensorRT plugin library needs TensorRT >= 10 headers (NvInferRuntime.h), \
absent here (no TensorRT on this machine; set TRT_ROOT where it is installed)"
fi

step torch_extension 300 gpu '^key: ' "$steps_py extension"

pytest_cmd="cd $(q "$here") && PYTHONPATH=$(q "$here/scripts"):\$PYTHONPATH $(q "$py") -m pytest -m gpu \
-p gpu_check_steps -p no:cacheprovider -rfEs --continue-on-collection-errors -o faulthandler_timeout=120"
if [[ ${#gpu_test_files[@]} -gt 0 ]]; then
  step pytest_gpu 300 gpu '^=+ .* in [0-9.]+s|^[0-9]+ (passed|failed|error)|^TF32 off|^(FAILED|ERROR) ' \
    "$pytest_cmd ${gpu_test_files[*]}"
else
  skip pytest_gpu gpu "$pytest_cmd tests" "no test file under tests/ uses the gpu mark"
fi

bench="$(q "$py") $(q "$here/scripts/bench_involution.py")"
bench_keys='^device: |^ *[0-9]+ +[0-9]+x[0-9]+ |^ +C +HxW'
step bench_fp32 120 gpu "$bench_keys" "$bench --dtype fp32 --json $(q "$work_path/bench_fp32.json")"
step bench_fp16 120 gpu "$bench_keys" "$bench --dtype fp16 --json $(q "$work_path/bench_fp16.json")"

rtx_env="PYTHONPATH=$(q "$rtx_site"):\$PYTHONPATH"
install_cmd="$steps_py rtx-install --wheels $(q "$wheels") --target $(q "$rtx_site")"
if [[ ${#rtx_files[@]} -gt 0 ]]; then
  step rtx_install 150 - '^key: ' "$install_cmd"
else
  skip rtx_install - "$install_cmd" "no TensorRT-RTX files (tensorrt_rtx*.whl, \
tensorrt_rtx*.tar.xz[.partN]) in $wheels; see --help for how to bring them"
fi
rtx_ready=0
if [[ "${statuses[-1]}" == passed ]]; then rtx_ready=1; fi
rtx_step() {  # rtx_step NAME TIMEOUT KEY_REGEX COMMAND: a step that needs TensorRT-RTX installed
  if [[ $dry_run -eq 1 || $rtx_ready -eq 1 ]]; then
    step "$1" "$2" gpu "$3" "$4"
  else
    skip "$1" gpu "$4" "TensorRT-RTX is not installed (see rtx_install)"
  fi
}
rtx_step rtx_current 180 '^key: |^\[TensorRT-RTX (ERROR|INTERNAL_ERROR|WARNING)\]' "$rtx_env $steps_py rtx-current"

zoo_step() {  # zoo_step MODEL PRECISION
  step "zoo_$1_$2" 150 gpu '^backend: |^result: |^[a-z_0-9]+ +[0-9]+x' "cd $(q "$work_path/zoo") && \
$(q "$py") -m trtbuild parity $(q "$1") --small --backend reference --precision $(q "$2") \
--json $(q "$work_path/zoo/$1-$2.json")"
}
IFS=',' read -r -a precisions <<< "$zoo_precisions"
if [[ ${#models[@]} -eq 0 ]]; then
  skip zoo gpu "$(q "$py") -m trtbuild models" "the zoo's model list could not be read (see Prerequisites)"
fi
for m in "${models[@]}"; do zoo_step "$m" "${precisions[0]}"; done
rtx_parity_cmd="cd $(q "$work_path/rtx") && $rtx_env $(q "$py") -m trtbuild parity resnet18 --small \
--backend tensorrt-rtx --target current"
if [[ "$(field sm)" == 90 ]]; then  # TensorRT-RTX 1.7 has no Hopper target: its engines cannot run there
  skip rtx_parity gpu "$rtx_parity_cmd" "TensorRT-RTX 1.7 runs no engine on a Hopper GPU (sm90; see rtx_current)"
else
  rtx_step rtx_parity 180 '^backend: |^parity: |^result: |^logits |^trtbuild: error' "$rtx_parity_cmd"
fi
for p in "${precisions[@]:1}"; do
  for m in "${models[@]}"; do zoo_step "$m" "$p"; done
done

# Without a CUDA driver TensorRT-RTX 1.7 builds no refittable or weight-stripped plan (Myelin needs the driver):
# what it builds on a GPU machine, for a target that is not this GPU, through trtbuild's own CLI.
rtx_strip_cmd="$rtx_env $steps_py rtx-strip --target sm86 --timeout 90 --work $(q "$work_path/rtx_strip") \
--json $(q "$work_path/rtx_strip.json")"
rtx_step rtx_strip 420 '^key: ' "$rtx_strip_cmd"

if [[ -n "$logs" && -n "$work" ]] && compgen -G "$work/logs/*" > /dev/null; then
  kept=(logs)
  for f in "$work"/*.json "$work"/zoo/*.json; do [[ -f "$f" ]] && kept+=("${f#"$work"/}"); done
  mkdir -p -- "$(dirname -- "$logs")" && tar -C "$work" -czf "$logs" "${kept[@]}" && echo "[gpu_check] logs: $logs"
fi
write_report
echo "[gpu_check] report: $report ($((SECONDS - t0)) s)"
if [[ $dry_run -eq 1 ]]; then exit 0; fi
exit "$failed"
