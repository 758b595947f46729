#!/usr/bin/env bash
# The GPU run, for the machine with the accelerator (Ubuntu 24.04, gcc 13, cmake, ninja, nvcc 13,
# Python 3.12 with pybind11, numpy and PyTorch; no LLVM, no oneDNN, nothing reachable on the
# network). One script, from the repository root:
#
#   OUT=/some/dir tests/gpu/run.sh
#
# 1. configures (LLVM and oneDNN off: the host side runs on the reference interpreter) and builds
#    the library, the Python module and the C++ GPU tests;
# 2. runs the C++ GPU tests (tests/gpu/*_test.cc): the CUDA backend against host oracles and
#    against the reference interpreter;
# 3. runs tests/gpu/check_ops_vs_torch.py: ops and fused graphs on `lazy:cuda` and `cuda` against
#    PyTorch CUDA; check_dlpack_cuda.py (sharing memory with PyTorch); check_devices_cuda.py (each
#    GPU its own device); check_attention_cuda.py; check_trig_cuda.py
#    (float32 sin/cos in ulps); check_torch_compile_cuda.py (torch.compile(backend="lazytensor") on
#    CUDA models against eager CUDA); check_lazy_device_cuda.py (torch code with device="lazy" on
#    lazytensor's CUDA backend against the same code on "cuda"); check_compile_training_cuda.py
#    (lt.compile(module) training on lazy:cuda, eager cuda views); check_conv_cudnn.py (cuDNN
#    convolutions in four dtypes, the cudnn.allow_tf32 switch); cuDNN's headers against
#    backends/cuda/cudnn_api.h (tests/gpu/cudnn_abi_check.cc, compiled only), and NCCL's against
#    backends/cuda/nccl_api.h (tests/gpu/nccl_abi_check.cc);
# 4. runs the benchmarks: bench/gpu.py (stage "bench") and bench/torch_compile.py --device cuda
#    (stage "tcbench"; TORCH_BENCH_ARGS overrides its "--steps 10 --rounds 3"). Each needs most of
#    one call's 10 minutes: run STAGES="build cpp py", STAGES="bench" and STAGES="tcbench" as three
#    calls on one machine (it goes back after 30 s idle: make the calls back to back).
# Everything goes to $OUT: summary.txt, build.log, gpu_cpp_tests.log, one log per Python stage,
# ops_vs_torch.json, bench_gpu.json. Exit 0 only when every stage passed. Nothing is downloaded. Dependencies the image may lack:
#   nlohmann_json  a CMake package, else a json.hpp found in $LT_DEPS/include, /usr/include,
#                  /usr/local/include or a Python package's include dir (wrapped in a generated
#                  CMake config); else the build FAILS (bring the header in $LT_DEPS/include).
#   GoogleTest     a CMake package, else built from $GTEST_SRC (default /usr/src/googletest,
#                  then $LT_DEPS/googletest); else the C++ GPU tests are skipped with a FAIL line.
#   pybind11       a CMake package, else the pip package's (python3 -m pybind11 --cmakedir).
# Environment: OUT (default ./gpu-out), BUILD (default ./build-gpu), LT_DEPS (default ./.deps),
# JOBS (default nproc), BENCH_ARGS (extra arguments to bench/gpu.py, e.g. --quick), STAGES (default
# "build cpp py bench tcbench"; a later call on the same machine may run e.g. STAGES="bench" alone, reusing
# the build, to stay within a command's time limit; "profile" adds tests/gpu/profile_gpt.py, the
# per-kernel GPU time of the GPT rows, under $OUT/profile; "profile_gpt2" adds
# tests/gpu/profile_gpt2.py, the GPT-2 124M bf16 row's kernels against torch.compile's, under
# $OUT/profile_gpt2; "profile_resnet" the same for the ResNet-18 row; "ddp" the data-parallel
# checks over NCCL and "ddpbench" the 1-GPU vs all-GPU GPT-2 training benchmark (2+ GPUs; DDP_CHECK_ARGS
# and DDP_BENCH_ARGS, default "--peer", pass arguments on, e.g. DDP_CHECK_ARGS="--only ddp,ddp_bucket"
# DDP_BENCH_ARGS="--reduce-modes bucket --variants NCCL_PROTO=Simple"); "rows" adds tests/gpu/profile_rows.py,
# kernel vs host time of the one-graph rows under codegen variants; "gap" tests/gpu/nccl_launch_gap.py,
# the kernel launch gaps an NCCL communicator leaves, under GAP_VARIANTS), GPU_TESTS (default all: the
# C++ GPU test binaries the cpp stage runs, by name, e.g. "cuda_symbolic_gpu_test"), TARGETS
# (default all: the build stage builds only these CMake targets, e.g. "cuda_symbolic_gpu_test";
# the Python stages then need an earlier full build).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT" || exit 2
OUT="${OUT:-$ROOT/gpu-out}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
BUILD="${BUILD:-$ROOT/build-gpu}"
# The image's default compiler (/opt/gcc) links libstdc++ statically into shared libraries; in a
# Python process that also loads the system libstdc++ (numpy, torch) the two copies' locale state
# clash and ostream calls crash. Build with the system compiler, whose libstdc++ is shared.
if [ -x /usr/bin/g++ ] && [ -x /usr/bin/gcc ]; then
  export CXX=/usr/bin/g++ CC=/usr/bin/gcc CUDAHOSTCXX=/usr/bin/g++
fi
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
DEPS="${LT_DEPS:-$ROOT/.deps}"
JOBS="${JOBS:-$(nproc)}"
PY="$(command -v python3)"
SUMMARY="$OUT/summary.txt"
BUILD_LOG="$OUT/build.log"
: >"$SUMMARY"
: >"$BUILD_LOG"
failures=0
STAGES=" ${STAGES:-build cpp py bench tcbench} "
stage() { case "$STAGES" in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
export PYTHONUNBUFFERED=1 LT_CACHE_DIR=off
# NVLink multicast stays off on the shared GPU hosts (the device tool's KINDS.md: a program that
# uses it can put the host's GPUs out of service); every process this script starts inherits these.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

say() { echo "== $*" | tee -a "$SUMMARY"; }
record() {  # record NAME EXIT_STATUS
  if [ "$2" -eq 0 ]; then say "$1: PASS"; else say "$1: FAIL (exit $2)"; failures=$((failures + 1)); fi
}

# ---- the machine ----
{
  echo "date: $(date -u)"
  echo "repo: $ROOT ($(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo 'no git'))"
  uname -a
  nvidia-smi || echo "nvidia-smi: not available"
  command -v nvcc >/dev/null && nvcc --version | tail -2 || echo "nvcc: not on PATH"
  cmake --version | head -1
  echo "ninja $(ninja --version 2>/dev/null || echo 'not found')"
  ${CXX:-c++} --version | head -1
  "$PY" -c 'import sys, numpy, torch; print("python", sys.version.split()[0], sys.executable, "numpy", numpy.__version__, "torch", torch.__version__, "cuda available", torch.cuda.is_available())'
} >>"$BUILD_LOG" 2>&1
tail -n 20 "$BUILD_LOG"

CMAKE_ARGS=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DLT_WITH_LLVM=OFF -DLT_WITH_ONEDNN=OFF
            -DLT_WITH_CUDA=ON -DLT_BUILD_TESTS=OFF "-DPython3_EXECUTABLE=$PY")
# tests/cpp is off: CI runs it, and its CPU codegen test needs LLVM. tests/gpu is built below.
PREFIXES=()
[ -d "$DEPS" ] && PREFIXES+=("$DEPS")

# ---- nlohmann_json: a CMake package, else a bare json.hpp wrapped in a generated config ----
have_cmake_pkg() {  # have_cmake_pkg NAME: a <NAME>Config.cmake in the usual places or $DEPS
  find /usr/lib /usr/share /usr/local "$DEPS" -maxdepth 6 \( -name "$1Config.cmake" -o -name "$(echo "$1" | tr 'A-Z' 'a-z')-config.cmake" \) 2>/dev/null | grep -q .
}
if have_cmake_pkg nlohmann_json; then
  say "nlohmann_json: CMake package found"
else
  site="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null)"
  hdr=""
  for d in "$DEPS/include" /usr/include /usr/local/include; do
    [ -f "$d/nlohmann/json.hpp" ] && { hdr="$d"; break; }
  done
  if [ -z "$hdr" ] && [ -n "$site" ]; then
    found="$(find "$site" -maxdepth 5 -path '*include/nlohmann/json.hpp' 2>/dev/null | head -1)"
    [ -n "$found" ] && hdr="$(dirname "$(dirname "$found")")"
  fi
  if [ -n "$hdr" ] && grep -rqs 'NLOHMANN_JSON_VERSION_MAJOR 3' "$hdr/nlohmann/"; then
    cfg="$BUILD/_deps/nlohmann_json"
    mkdir -p "$cfg"
    cat >"$cfg/nlohmann_jsonConfig.cmake" <<EOF
# Generated by tests/gpu/run.sh around the header found in $hdr.
if(NOT TARGET nlohmann_json::nlohmann_json)
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  set_target_properties(nlohmann_json::nlohmann_json PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "$hdr")
endif()
EOF
    printf 'set(PACKAGE_VERSION 3.11.0)\nset(PACKAGE_VERSION_COMPATIBLE TRUE)\n' >"$cfg/nlohmann_jsonConfigVersion.cmake"
    CMAKE_ARGS+=("-Dnlohmann_json_DIR=$cfg")
    say "nlohmann_json: no CMake package; using the header in $hdr"
  else
    say "nlohmann_json: FAIL: not found (no CMake package, no nlohmann/json.hpp); put the header in $DEPS/include/nlohmann/"
  fi
fi

# ---- GoogleTest: installed, else built from sources; without it the C++ GPU tests are skipped ----
have_gtest=0
if have_cmake_pkg GTest; then
  have_gtest=1
else
  src=""
  for d in "${GTEST_SRC:-/usr/src/googletest}" "$DEPS/googletest"; do
    [ -f "$d/CMakeLists.txt" ] && { src="$d"; break; }
  done
  if [ -n "$src" ]; then
    gt="$BUILD/_deps/gtest-install"
    if [ ! -d "$gt" ]; then
      { cmake -S "$src" -B "$BUILD/_deps/gtest-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
          -DCMAKE_INSTALL_PREFIX="$gt" -DBUILD_GMOCK=OFF -DINSTALL_GTEST=ON \
          -DCMAKE_POSITION_INDEPENDENT_CODE=ON &&
        cmake --build "$BUILD/_deps/gtest-build" -j "$JOBS" &&
        cmake --install "$BUILD/_deps/gtest-build"; } >>"$BUILD_LOG" 2>&1 || rm -rf "$gt"
    fi
    if [ -d "$gt" ]; then
      have_gtest=1
      PREFIXES+=("$gt")
      say "GoogleTest: built from $src"
    fi
  fi
fi
if [ "$have_gtest" -eq 1 ]; then
  CMAKE_ARGS+=(-DLT_BUILD_GPU_TESTS=ON)
else
  say "GoogleTest: FAIL: not installed and no sources (/usr/src/googletest or $DEPS/googletest): C++ GPU tests NOT RUN"
  failures=$((failures + 1))
  CMAKE_ARGS+=(-DLT_BUILD_GPU_TESTS=OFF)
fi

# ---- pybind11: a CMake package, else the pip package's ----
if ! have_cmake_pkg pybind11; then
  pbdir="$("$PY" -m pybind11 --cmakedir 2>/dev/null)"
  if [ -n "$pbdir" ]; then
    CMAKE_ARGS+=("-Dpybind11_DIR=$pbdir")
    say "pybind11: using the pip package ($pbdir)"
  else
    say "pybind11: not found: the Python module will not be built"
  fi
fi
[ "${#PREFIXES[@]}" -gt 0 ] && CMAKE_ARGS+=("-DCMAKE_PREFIX_PATH=$(IFS=';'; echo "${PREFIXES[*]}")")

# ---- configure and build ----
built=0
if stage build; then
  echo "cmake -S . -B $BUILD ${CMAKE_ARGS[*]}" >>"$BUILD_LOG"
  cmake -S . -B "$BUILD" "${CMAKE_ARGS[@]}" >>"$BUILD_LOG" 2>&1
  rc=$?
  record "configure" "$rc"
  if [ "$rc" -eq 0 ]; then
    if [ -n "${TARGETS:-}" ]; then
      # shellcheck disable=SC2086  # a list of target names
      cmake --build "$BUILD" -j "$JOBS" --target ${TARGETS} >>"$BUILD_LOG" 2>&1
    else
      cmake --build "$BUILD" -j "$JOBS" >>"$BUILD_LOG" 2>&1
    fi
    rc=$?
    record "build" "$rc"
    [ "$rc" -eq 0 ] && built=1
  fi
  [ "$built" -eq 1 ] || tail -n 40 "$BUILD_LOG"
elif [ -f "$BUILD/lib/liblazytensor.so" ]; then
  built=1  # an earlier call built it
else
  say "build: FAIL: stage 'build' not selected and $BUILD holds no build"
  failures=$((failures + 1))
fi

# ---- the real headers of the dlopen'ed libraries (PyTorch's nvidia-* wheels) against our
# declarations of their ABI: tests/gpu/<lib>_abi_check.cc compiles only where they match ----
abi_check() {  # abi_check NAME WHEEL_MODULE HEADER LIB (e.g. cuDNN cudnn cudnn.h cudnn)
  local inc
  inc="$("$PY" -c "import nvidia.$2, os; print(os.path.join(list(nvidia.$2.__path__)[0], 'include'))" 2>/dev/null)"
  if [ -z "$inc" ] || [ ! -f "$inc/$3" ]; then
    say "$1 ABI check: FAIL: no $3 in PyTorch's nvidia-$2 wheel ($inc)"
    failures=$((failures + 1))
    return
  fi
  echo "$1 header: $inc/$3 ($(grep -h -m1 -E 'define (NCCL_VERSION_CODE|CUDNN_MAJOR) ' "$inc"/*.h 2>/dev/null | head -n 1))" >>"$SUMMARY"
  ${CXX:-c++} -std=c++20 -fsyntax-only -I"$ROOT" -I"$inc" -I/usr/local/cuda/include "tests/gpu/$4_abi_check.cc" >>"$BUILD_LOG" 2>&1
  local rc=$?
  [ "$rc" -eq 0 ] || tail -n 20 "$BUILD_LOG"
  record "$1 ABI of backends/cuda/$4_api.h (tests/gpu/$4_abi_check.cc)" "$rc"
}
if stage cpp; then
  abi_check cuDNN cudnn cudnn.h cudnn
  abi_check NCCL nccl nccl.h nccl
fi

# ---- C++ GPU tests: a skip means no device was seen, which on this machine is a failure ----
if stage cpp && [ "$built" -eq 1 ] && [ "$have_gtest" -eq 1 ]; then
  LOG="$OUT/gpu_cpp_tests.log"
  : >"$LOG"
  for t in "$BUILD"/tests/gpu/*_test; do
    name="$(basename "$t")"
    [ -x "$t" ] || continue
    case " ${GPU_TESTS:-$name} " in *" $name "*) ;; *) continue ;; esac
    one="$BUILD/$name.log"
    timeout 300 "$t" >"$one" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ] && grep -q "^\[  SKIPPED \]" "$one"; then
      echo "$name: tests were SKIPPED (no CUDA device seen)" >>"$one"
      rc=3
    fi
    cat "$one" >>"$LOG"
    grep -E "^\[  FAILED  \]|^\[  PASSED  \]|^\[  SKIPPED \]" "$one" | tail -n 12
    record "C++ GPU test $name" "$rc"
  done
fi

# ---- Python: ops on lazy:cuda / cuda against PyTorch CUDA, then the benchmark ----
if [ "$built" -eq 1 ] && [ -d "$BUILD/python/lazytensor" ]; then
  export PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"
  # A native backtrace if a Python stage crashes (the machine has no gdb): tests/gpu/segv_trace.c.
  TRACE_SO="$BUILD/segv_trace.so"
  ${CC:-cc} -shared -fPIC -o "$TRACE_SO" tests/gpu/segv_trace.c 2>>"$BUILD_LOG" || TRACE_SO=""
  if stage py; then
    LD_PRELOAD="$TRACE_SO" timeout 400 "$PY" -u -X faulthandler tests/gpu/check_ops_vs_torch.py --json "$OUT/ops_vs_torch.json" >"$OUT/ops_vs_torch.log" 2>&1
    rc=$?
    tail -n 25 "$OUT/ops_vs_torch.log"
    record "ops vs PyTorch CUDA (check_ops_vs_torch.py)" "$rc"
    LD_PRELOAD="$TRACE_SO" timeout 120 "$PY" -u -X faulthandler tests/gpu/check_dlpack_cuda.py >"$OUT/dlpack_cuda.log" 2>&1
    rc=$?
    tail -n 12 "$OUT/dlpack_cuda.log"
    record "DLPack with PyTorch CUDA (check_dlpack_cuda.py)" "$rc"
    LD_PRELOAD="$TRACE_SO" timeout 120 "$PY" -u -X faulthandler tests/gpu/check_devices_cuda.py >"$OUT/devices_cuda.log" 2>&1
    rc=$?
    tail -n 12 "$OUT/devices_cuda.log"
    record "each GPU its own device (check_devices_cuda.py)" "$rc"
    LD_PRELOAD="$TRACE_SO" timeout 120 "$PY" -u -X faulthandler tests/gpu/check_trig_cuda.py >"$OUT/trig_cuda.log" 2>&1
    rc=$?
    tail -n 8 "$OUT/trig_cuda.log"
    record "float32 sin/cos in ulps (check_trig_cuda.py)" "$rc"
    LD_PRELOAD="$TRACE_SO" timeout 240 "$PY" -u -X faulthandler tests/gpu/check_attention_cuda.py >"$OUT/attention_cuda.log" 2>&1
    rc=$?
    tail -n 22 "$OUT/attention_cuda.log"
    record "flash attention vs PyTorch CUDA (check_attention_cuda.py)" "$rc"
    LD_PRELOAD="$TRACE_SO" timeout 400 "$PY" -u -X faulthandler tests/gpu/check_torch_compile_cuda.py >"$OUT/torch_compile_cuda.log" 2>&1
    rc=$?
    tail -n 8 "$OUT/torch_compile_cuda.log"
    record "torch.compile(backend=\"lazytensor\") models vs eager CUDA (check_torch_compile_cuda.py)" "$rc"
    LD_PRELOAD="$TRACE_SO" timeout 300 "$PY" -u -X faulthandler tests/gpu/check_lazy_device_cuda.py >"$OUT/lazy_device_cuda.log" 2>&1
    rc=$?
    tail -n 6 "$OUT/lazy_device_cuda.log"
    record "torch device \"lazy\" models vs eager CUDA (check_lazy_device_cuda.py)" "$rc"
    LD_PRELOAD="$TRACE_SO" timeout 200 "$PY" -u -X faulthandler tests/gpu/check_conv_cudnn.py >"$OUT/conv_cudnn.log" 2>&1
    rc=$?
    tail -n 8 "$OUT/conv_cudnn.log"
    record "cuDNN convolutions vs PyTorch CUDA (check_conv_cudnn.py)" "$rc"
    LD_PRELOAD="$TRACE_SO" timeout 200 "$PY" -u -X faulthandler tests/gpu/check_compile_training_cuda.py >"$OUT/compile_training_cuda.log" 2>&1
    rc=$?
    tail -n 6 "$OUT/compile_training_cuda.log"
    record "lt.compile training and eager views on CUDA (check_compile_training_cuda.py)" "$rc"
  fi
  if stage bench; then
    # CUDA_CACHE_DISABLE=1: NVRTC (CUDA 13) keeps compiled kernels in ~/.nv/ComputeCache, which the
    # test stages fill; the first-call columns must be cold compiles (a warm cache halved them).
    # shellcheck disable=SC2086
    CUDA_CACHE_DISABLE=1 LD_PRELOAD="$TRACE_SO" timeout 500 "$PY" -u -X faulthandler bench/gpu.py --json "$OUT/bench_gpu.json" ${BENCH_ARGS:-} >"$OUT/bench_gpu.log" 2>&1
    rc=$?
    tail -n 30 "$OUT/bench_gpu.log"
    record "benchmark (bench/gpu.py)" "$rc"
  fi
  if stage tcbench; then
    # torch.compile backends side by side (eager, Inductor, lazytensor) on whole models: a stage of
    # its own, as bench/gpu.py alone needs most of one call's 10 minutes.
    # shellcheck disable=SC2086
    CUDA_CACHE_DISABLE=1 LD_PRELOAD="$TRACE_SO" timeout 560 "$PY" -u -X faulthandler bench/torch_compile.py --device cuda --json "$OUT/bench_torch_compile_cuda.json" ${TORCH_BENCH_ARGS:---steps 10 --rounds 3} >"$OUT/bench_torch_compile_cuda.log" 2>&1
    rc=$?
    tail -n 8 "$OUT/bench_torch_compile_cuda.log"
    record "torch.compile backends (bench/torch_compile.py --device cuda)" "$rc"
  fi
  if stage ddp; then
    # Not in the default stages (needs 2 or more GPUs: nvidia-h200-x2): data parallel over this
    # machine's GPUs through NCCL (issue 31): collectives against numpy, DDP training equal to one
    # process, a rank that dies, ranks whose graphs differ (tests/gpu/check_ddp_cuda.py).
    LD_PRELOAD="$TRACE_SO" timeout 500 "$PY" -u -X faulthandler tests/gpu/check_ddp_cuda.py ${DDP_CHECK_ARGS:-} >"$OUT/ddp_cuda.log" 2>&1
    rc=$?
    tail -n 20 "$OUT/ddp_cuda.log"
    record "data parallel over NCCL (check_ddp_cuda.py)" "$rc"
  fi
  if stage ddpbench; then
    # Not in the default stages: GPT-2 124M bf16 training tokens/s on 1 GPU and on all of them.
    LD_PRELOAD="$TRACE_SO" timeout 560 "$PY" -u -X faulthandler bench/ddp_gpu.py --out "$OUT/bench_ddp_gpu.json" ${DDP_BENCH_ARGS:---peer} >"$OUT/bench_ddp_gpu.log" 2>&1
    rc=$?
    tail -n 20 "$OUT/bench_ddp_gpu.log"
    record "data-parallel GPT-2 benchmark (bench/ddp_gpu.py)" "$rc"
  fi
  if stage gap; then
    # Not in the default stages: whether an NCCL communicator slows every later kernel launch
    # (tests/gpu/nccl_launch_gap.py; bench/README.md, thirty-third session): PyTorch's and
    # lazytensor's communicators under GAP_VARIANTS (NCCL settings to try).
    GAP_VARIANTS="${GAP_VARIANTS:-NCCL_CGA_CLUSTER_SIZE=0;NCCL_CGA_CLUSTER_SIZE=1}"
    {
      timeout 120 "$PY" -u tests/gpu/nccl_launch_gap.py --replays 5 --out-of-place --variants "$GAP_VARIANTS" &&
        timeout 120 "$PY" -u tests/gpu/nccl_launch_gap.py --replays 5 --ours --variants "$GAP_VARIANTS"
    } >"$OUT/nccl_launch_gap.log" 2>&1
    rc=$?
    cat "$OUT/nccl_launch_gap.log"
    record "launch gaps after an NCCL communicator (nccl_launch_gap.py)" "$rc"
  fi
  if stage rows; then
    # Not in the default stages: kernel vs host time of the one-graph rows, and codegen variants.
    LD_PRELOAD="$TRACE_SO" timeout 300 "$PY" -u -X faulthandler tests/gpu/profile_rows.py --out "$OUT/profile_rows.txt" >"$OUT/profile_rows.log" 2>&1
    rc=$?
    tail -n 40 "$OUT/profile_rows.log"
    record "profile of the one-graph rows (tests/gpu/profile_rows.py)" "$rc"
  fi
  if stage profile; then
    # Not in the default stages: per-kernel GPU time of the GPT rows (tests/gpu/profile_gpt.py).
    LD_PRELOAD="$TRACE_SO" timeout 300 "$PY" -u -X faulthandler tests/gpu/profile_gpt.py --out "$OUT/profile" >"$OUT/profile_gpt.log" 2>&1
    rc=$?
    tail -n 5 "$OUT/profile_gpt.log"
    record "profile (tests/gpu/profile_gpt.py)" "$rc"
  fi
  if stage profile_gpt2; then
    # Not in the default stages: per-kernel GPU time of the GPT-2 124M bf16 training row, ours
    # against torch.compile's, with our host breakdown and kernel grouping (profile_gpt2.py).
    LD_PRELOAD="$TRACE_SO" timeout 420 "$PY" -u -X faulthandler tests/gpu/profile_gpt2.py --out "$OUT/profile_gpt2" >"$OUT/profile_gpt2.log" 2>&1
    rc=$?
    tail -n 5 "$OUT/profile_gpt2.log"
    record "profile (tests/gpu/profile_gpt2.py)" "$rc"
  fi
  if stage profile_resnet; then
    # Not in the default stages: the ResNet-18 row's kernels, ours against torch.compile's.
    LD_PRELOAD="$TRACE_SO" timeout 300 "$PY" -u -X faulthandler tests/gpu/profile_resnet.py --out "$OUT/profile_resnet" >"$OUT/profile_resnet.log" 2>&1
    rc=$?
    tail -n 5 "$OUT/profile_resnet.log"
    record "profile (tests/gpu/profile_resnet.py)" "$rc"
  fi
elif [ "$built" -eq 1 ]; then
  say "Python module: FAIL: not built (pybind11 missing?): ops check and benchmark NOT RUN"
  failures=$((failures + 1))
fi

if [ "$failures" -ne 0 ]; then
  say "FAILED: $failures stage(s); logs in $OUT"
  exit 1
fi
say "all stages passed; logs in $OUT"
