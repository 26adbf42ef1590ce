// gpt2_bandwidth: the native memory-bandwidth ceiling for tools/bench/bench.mjs. Streams a buffer of as many bytes
// as a model's weights (engine/kernels/stream_read.h, the same loop as the wasm testing build's HeapBlock.streamRead)
// and prints one JSON line: {"bytes": N, "ms": [time of each pass]}. With --threads T, T threads each read their own
// contiguous T-th of the buffer in every pass: the ceiling of a decode step split over T threads.
//
//   gpt2_bandwidth --bytes N [--repeats R] [--threads T]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kernels/stream_read.h"

namespace {

[[noreturn]] void die(const std::string& message) {
    std::fprintf(stderr, "gpt2_bandwidth: %s\n", message.c_str());
    std::exit(1);
}

long long parse_positive(const char* flag, const char* text) {
    char* end = nullptr;
    const long long v = std::strtoll(text, &end, 10);
    if (*text == '\0' || *end != '\0' || v <= 0)
        die(std::string(flag) + ": expected a positive integer, got \"" + text + "\"");
    return v;
}

// The sum of the buffer, read by `threads` threads (each its own contiguous part; the calling thread takes the first).
float stream_sum_threads(const std::vector<float>& buffer, int threads) {
    const size_t part = buffer.size() / size_t(threads);
    std::vector<float> sums(static_cast<size_t>(threads));
    std::vector<std::thread> workers;
    for (int t = 1; t < threads; t++) {
        const size_t end = t + 1 == threads ? buffer.size() : part * size_t(t + 1);
        workers.emplace_back([&, t, end] {
            sums[size_t(t)] = gpt2::stream_sum(buffer.data() + part * size_t(t), end - part * size_t(t));
        });
    }
    sums[0] = gpt2::stream_sum(buffer.data(), threads > 1 ? part : buffer.size());
    for (std::thread& worker : workers) worker.join();
    float sum = 0;
    for (float s : sums) sum += s;
    return sum;
}

}  // namespace

int main(int argc, char** argv) {
    const char* usage = "usage: gpt2_bandwidth --bytes N [--repeats R] [--threads T]";
    long long bytes = 0, repeats = 10, threads = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--bytes") == 0) bytes = parse_positive(argv[i], argv[i + 1]);
        else if (std::strcmp(argv[i], "--repeats") == 0) repeats = parse_positive(argv[i], argv[i + 1]);
        else if (std::strcmp(argv[i], "--threads") == 0) threads = parse_positive(argv[i], argv[i + 1]);
        else die(std::string("unknown argument \"") + argv[i] + "\"; " + usage);
    }
    if (bytes == 0 || argc % 2 == 0) die(usage);

    // Filled with small values so the first pass also faults every page in and the sums stay finite.
    std::vector<float> buffer(size_t(bytes) / sizeof(float), 1.0f / 1024);
    float checksum = gpt2::stream_sum(buffer.data(), buffer.size());
    std::string times;
    for (long long r = 0; r < repeats; r++) {
        const auto start = std::chrono::steady_clock::now();
        checksum += stream_sum_threads(buffer, int(threads));
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        times += (r ? "," : "") + std::to_string(ms);
    }
    // Printing the checksum keeps the compiler from dropping the loops.
    std::printf("{\"bytes\": %zu, \"ms\": [%s], \"checksum\": %g}\n", buffer.size() * sizeof(float), times.c_str(),
                double(checksum));
    return 0;
}
