#!/usr/bin/env bash
# Builds the native tool and C++ tests with AddressSanitizer + UndefinedBehaviorSanitizer into build/asan
# (clang++ when installed, else the default compiler) and runs them, then the multi-threaded tests (the thread
# pool and the threaded forward pass) under ThreadSanitizer from build/tsan; any sanitizer report fails the run.
# JOBS (default 2) sets the parallel build jobs: the machines are shared.
set -euo pipefail
cd "$(dirname "$0")/../.."

compiler=()
if cxx=$(command -v clang++ || command -v clang++-14); then compiler=(-DCMAKE_CXX_COMPILER="$cxx"); fi
cmake -S . -B build/asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPT2_SANITIZE=ON "${compiler[@]}"
# the C++ tests and the CLI they run (the benchmark's tools are not tested here)
cmake --build build/asan -j"${JOBS:-2}" --target gpt2_tests gpt2

# Stop at the first report (UBSan is also built with -fno-sanitize-recover) and count leaks as errors. ctest
# sets the same options on each test (tests/cpp/CMakeLists.txt, plus allocator_may_return_null=1 for the
# out-of-memory test).
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# The bundled model's held-out loss checks (fp32, int8 weights, the int8 cache, the GGUF file) are skipped here:
# minutes each of the same arithmetic that the other tests run on the same code paths; so are the two sweeps over
# thread counts with the fp32 cache (half a minute each), whose code runs here in the int8 cache's sweep, the
# speculation test (both caches on two threads) and the other thread tests; and the Python tools' checks, which
# run no C++.
skipped='held_out_loss|python_check|Threads\.BundledModelIsBitIdenticalAtTwoToFourThreads$|Threads\.AnyThreadCountIsBitIdenticalToOneThread$'
ctest --test-dir build/asan --output-on-failure -j"${JOBS:-2}" -E "$skipped"

# ThreadSanitizer: the pool's tests, the threaded forward pass with two sessions on two threads sharing the
# workers, and the int8 KV cache's sweep, whose prefills split attention across heads (about a minute and a
# half). The other bit-identity sweeps over thread counts add nothing racy and take five more minutes under TSan;
# GPT2_TSAN_ALL=1 runs them too.
cmake -S . -B build/tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPT2_TSAN=ON "${compiler[@]}"
cmake --build build/tsan -j"${JOBS:-2}" --target gpt2_thread_tests
filter='ThreadPool.*:Threads.SessionsOnTwoThreadsShareOneModel:Threads.LoadRejectsThreadCountsOutOfRange:Threads.AnyThreadCountIsBitIdenticalToOneThreadWithTheInt8KvCache'
if [ "${GPT2_TSAN_ALL:-0}" = 1 ]; then filter='*'; fi
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 build/tsan/tests/cpp/gpt2_thread_tests --gtest_filter="$filter"
