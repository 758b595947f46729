#!/usr/bin/env bash
# Runs libFuzzer binaries side by side (one core each), each on a fresh copy of its seed corpus
# for SECONDS_EACH seconds: usage  run_fuzzers.sh FUZZ_DIR SECONDS_EACH binary:corpus...  runs
# <FUZZ_DIR>/<binary> seeded from tests/fuzz/corpus/<corpus>. Prints each one's executions; a
# crash prints the report, names the input to keep as a regression corpus file, and exits 1.
set -u
dir=$1 secs=$2
shift 2
root=$(pwd)
pids=()
for pair in "$@"; do
  bin=${pair%%:*} name=${pair#*:}
  rm -rf "$dir/$name-corpus" && mkdir -p "$dir/$name-corpus"
  cp "$root/tests/fuzz/corpus/$name"/* "$dir/$name-corpus/"
  (cd "$dir" && "./$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
     -print_final_stats=1 -artifact_prefix="$name-" "$name-corpus" >"${name}_fuzz.log" 2>&1) &
  pids+=($!)
done
failed=0
i=0
for pair in "$@"; do
  name=${pair#*:}
  if wait "${pids[$i]}"; then
    runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$dir/${name}_fuzz.log" | grep -oE '[0-9]+$')
    cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$dir/${name}_fuzz.log" | tail -1)
    echo "fuzz $name: $runs executions in ${secs} s ($cov), 0 crashes"
  else
    grep -A40 -E "ERROR: libFuzzer|ERROR: AddressSanitizer|runtime error|deadly signal" "$dir/${name}_fuzz.log" | head -60
    echo "fuzz $name: a crash; the input is $dir/$name-crash-*: add it to tests/fuzz/corpus/$name" \
         "(trace: regression_<what>.json; safetensors: bad_<what>), where a ctest replays it"
    failed=1
  fi
  i=$((i + 1))
done
exit $failed
