#!/usr/bin/env bash
# ctest under ASan + UBSan with leak checks (make test-asan), from the sanitizer build directory:
#
#   tests/asan_ctest.sh JOBS
#
# LeakSanitizer's exit-time tracer sometimes crashes after a test has passed ("Tracer caught
# signal 11 ... LeakSanitizer has encountered a fatal error"; a known, intermittent fault of the
# sanitizer runtime: google/sanitizers#1353). Seen in 2 of 2 full runs under load, each time in one
# test of cuda_module_image_test (it compiles with NVRTC on a second thread, and NVRTC's dynamic
# TLS is a likely trigger), never in 30 runs of those tests alone. Only when every failure of the
# run is that crash, and the log holds no
# sanitizer report at all, are the failed tests run once more; any report, or any other failure,
# fails the run as before.
set -uo pipefail
jobs="${1:-2}"
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
ctest --output-on-failure -j "$jobs" && exit 0
log=Testing/Temporary/LastTest.log
crashes=$(grep -c "LeakSanitizer has encountered a fatal error" "$log" 2>/dev/null || true)
failed=$(grep -c . Testing/Temporary/LastTestsFailed.log 2>/dev/null || true)
if [ "${crashes:-0}" -ge 1 ] && [ "${crashes:-0}" -ge "${failed:-0}" ] &&
   ! grep -qE "ERROR: (AddressSanitizer|LeakSanitizer):|runtime error:" "$log"; then
  echo "asan_ctest: ${failed} test(s) failed only by LeakSanitizer's tracer crash; running them again"
  ctest --rerun-failed --output-on-failure
  exit $?
fi
exit 1
