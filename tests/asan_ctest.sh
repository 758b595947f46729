#!/usr/bin/env bash
# ctest under ASan + UBSan with leak checks (make test-asan), from the sanitizer build directory:
#
#   tests/asan_ctest.sh JOBS [EXCLUDE]
#
# EXCLUDE: a ctest -E regex of tests not run here (they run in make test-cpp's Release pass).
#
# LeakSanitizer's exit-time tracer sometimes crashes after a test has passed ("Tracer caught
# signal 11 ... LeakSanitizer has encountered a fatal error"; a known, intermittent fault of the
# sanitizer runtime: google/sanitizers#1353). Seen in 2 of 2 full runs under load, each time in one
# test of cuda_module_image_test (it compiles with NVRTC on a second thread, and NVRTC's dynamic
# TLS is a likely trigger), never in 30 runs of those tests alone until 2026-11-30, when
# FlashAttention.ModuleImageCarriesTheKernelsAfterThePlans crashed it in a clean clone's run and
# again alone. Only when every failure of the run is that crash, and the log holds no sanitizer
# report at all, are the failed tests run once more; if the tracer crashes again (seen
# 2026-11-27 in cuda_codegen_test, whose body had passed both times), they run a third time
# without the leak check, so AddressSanitizer and UBSan still check them, and the run names them.
# Any report, or any other failure, fails the run as before.
set -uo pipefail
jobs="${1:-2}"
exclude=()
[ -n "${2:-}" ] && exclude=(-E "$2")
# allocator_may_return_null: an allocation past ASan's 1 TiB cap returns null, as it would without
# ASan, so the tests of the "not enough memory" error (bad_input_test) see that error.
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1
log=Testing/Temporary/LastTest.log
# Whether every failure of the last ctest run was the tracer crash, with no sanitizer report.
only_tracer_crashes() {
  local crashes failed
  crashes=$(grep -c "LeakSanitizer has encountered a fatal error" "$log" 2>/dev/null || true)
  failed=$(grep -c . Testing/Temporary/LastTestsFailed.log 2>/dev/null || true)
  [ "${crashes:-0}" -ge 1 ] && [ "${crashes:-0}" -ge "${failed:-0}" ] &&
    ! grep -qE "ERROR: (AddressSanitizer|LeakSanitizer):|runtime error:" "$log"
}
ctest --output-on-failure -j "$jobs" "${exclude[@]}" && exit 0
only_tracer_crashes || exit 1
echo "asan_ctest: $(grep -c . Testing/Temporary/LastTestsFailed.log) test(s) failed only by LeakSanitizer's tracer crash; running them again"
# With the same -E as the first run: LastTestsFailed.log names tests by their number in the list
# that run saw, and -E shortens that list (without it the rerun of 2026-11-30 ran
# FlashAttention.NvrtcCompilesOneProgramPerKernel for the failed ModuleImageCarriesTheKernels...).
ctest --rerun-failed --output-on-failure "${exclude[@]}" && exit 0
only_tracer_crashes || exit 1
echo "asan_ctest: the tracer crashed again; without the leak check (ASan and UBSan still on):"
cat Testing/Temporary/LastTestsFailed.log
ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 ctest --rerun-failed --output-on-failure \
  "${exclude[@]}"
