// gpt2_bandwidth: the native memory-bandwidth ceiling for tools/bench/bench.mjs. Streams a buffer of as many bytes
// as a model's weights (stream_read.h, the same loop as the wasm testing build's HeapBlock.streamRead) and prints
// one JSON line: {"bytes": N, "ms": [time of each pass]}.
//
//   gpt2_bandwidth --bytes N [--repeats R]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "stream_read.h"

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

}  // namespace

int main(int argc, char** argv) {
    long long bytes = 0, repeats = 10;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--bytes") == 0) bytes = parse_positive(argv[i], argv[i + 1]);
        else if (std::strcmp(argv[i], "--repeats") == 0) repeats = parse_positive(argv[i], argv[i + 1]);
        else die(std::string("unknown argument \"") + argv[i] + "\"; usage: gpt2_bandwidth --bytes N [--repeats R]");
    }
    if (bytes == 0 || argc % 2 == 0) die("usage: gpt2_bandwidth --bytes N [--repeats R]");

    // Filled with small values so the first pass also faults every page in and the sums stay finite.
    std::vector<float> buffer(size_t(bytes) / sizeof(float), 1.0f / 1024);
    float checksum = gpt2_bench::stream_sum(buffer.data(), buffer.size());
    std::string times;
    for (long long r = 0; r < repeats; r++) {
        const auto start = std::chrono::steady_clock::now();
        checksum += gpt2_bench::stream_sum(buffer.data(), buffer.size());
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        times += (r ? "," : "") + std::to_string(ms);
    }
    // Printing the checksum keeps the compiler from dropping the loops.
    std::printf("{\"bytes\": %zu, \"ms\": [%s], \"checksum\": %g}\n", buffer.size() * sizeof(float), times.c_str(),
                double(checksum));
    return 0;
}
