#!/usr/bin/env bash
# Builds the libFuzzer targets with clang + ASan + UBSan into build/fuzz and runs them on the committed seeds.
#   tools/dev/fuzz.sh [SECONDS | -runs=N] [TARGET]
#     SECONDS   run for this long (default 60)     -runs=N   run N inputs
#     TARGET    fuzz_loader (default: the input is model.safetensors), fuzz_config (the input is config.json) or
#               fuzz_gguf (the input is model.gguf, read by the GGUF reader) or fuzz_gguf_model (the same inputs
#               loaded as a model and run), or fuzz_tokenizer (vocab.json and merges.txt: the JS fuzzer
#               tests/fuzz/fuzz_tokenizer.mjs, run with node; no build), or fuzz_options (generate() and score()
#               options against the bundled model: tests/fuzz/fuzz_options.mjs, run with node on the built wasm)
# The committed corpus (tests/fuzz/corpus/{loader,config,gguf}) is copied to build/fuzz/corpus-TARGET, where the
# fuzzer adds what it finds, so the committed seeds stay as they are. A crash, hang (> 10 s), leak or
# sanitizer report stops the run with a non-zero status and leaves the input in build/fuzz/artifacts/.
# Uses one core (the machines are shared).
set -euo pipefail
cd "$(dirname "$0")/../.."

limit=${1:-60}
target=${2:-fuzz_loader}
case "$limit" in
  -runs=*) budget=("$limit") ;;
  *[!0-9]*|'') echo "usage: tools/dev/fuzz.sh [SECONDS | -runs=N] [fuzz_loader|fuzz_config|fuzz_gguf|fuzz_gguf_model|fuzz_tokenizer|fuzz_options]" >&2; exit 2 ;;
  *) budget=("-max_total_time=$limit") ;;
esac
if [ "$target" = fuzz_tokenizer ] || [ "$target" = fuzz_options ]; then
  case "$limit" in
    -runs=*) exec node "tests/fuzz/$target.mjs" --cases "${limit#-runs=}" ;;
    *) exec node "tests/fuzz/$target.mjs" --seconds "$limit" ;;
  esac
fi
case "$target" in
  fuzz_loader) seeds=tests/fuzz/corpus/loader dict=tests/fuzz/safetensors.dict ;;
  fuzz_config) seeds=tests/fuzz/corpus/config dict=tests/fuzz/json.dict ;;
  fuzz_gguf|fuzz_gguf_model) seeds=tests/fuzz/corpus/gguf dict=tests/fuzz/gguf.dict ;;
  *) echo "unknown target $target (fuzz_loader, fuzz_config, fuzz_gguf or fuzz_gguf_model)" >&2; exit 2 ;;
esac

cxx=$(command -v clang++ || command -v clang++-14 || true)
[ -n "$cxx" ] || { echo "tools/dev/fuzz.sh needs clang++ (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }
cmake -S . -B build/fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" -DGPT2_FUZZ=ON >/dev/null
cmake --build build/fuzz --target "$target" -j"${JOBS:-2}"

corpus=build/fuzz/corpus-$target
mkdir -p "$corpus" build/fuzz/artifacts
cp "$seeds"/* "$corpus"/
log=build/fuzz/$target.log
# libFuzzer stops at the first crash; the sanitizers must stop too (not recover) and leaks count as errors.
# A small quarantine keeps the per-input allocations in hot memory (2x the executions per second); one
# input allocates far less than 16 MB, so a use after free within it is still caught.
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:allocator_may_return_null=1:quarantine_size_mb=16
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
set +e  # the fuzzer's status is reported below, after the statistics
"build/fuzz/tests/fuzz/$target" "$corpus" -dict="$dict" -rss_limit_mb=2048 -timeout=10 \
  -artifact_prefix=build/fuzz/artifacts/ -print_final_stats=1 "${budget[@]}" 2>&1 | tee "$log" | grep -v '^#'
status=${PIPESTATUS[0]}
set -e
echo "fuzz: $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?') executions" \
     "($(grep -m1 -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')/s), status $status, log $log"
exit "$status"
