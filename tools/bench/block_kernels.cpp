// gpt2_block_kernels: times one-token products (the decode GEMV) of every block format and of fp32's gemv against
// the int8 gemv_q8 on GPT-2 124M's matrix shapes, natively or in wasm. Weights are random valid blocks, the input a
// random row quantized as the formats expect. Each product reads the next of enough copies of the matrix to
// hold 64 Mi weights (--hot: one copy), as a decode step streams the whole model from memory instead of finding one
// matrix in cache. Prints one line per shape and format: the least time of a product over 40 runs taken in
// turns with the other formats (the machine is shared: the least is the least disturbed) and its ratio to
// int8's. --tokens N adds int8's batched product of N token rows (gemm_q8, as N sequences decode together),
// timed per token.
//
//   native: cmake --build build/native --target gpt2_block_kernels && build/native/gpt2_block_kernels
//   wasm:   NODE_PATH=/usr/share/nodejs em++ -O3 -DNDEBUG -msimd128 -ffp-contract=off -std=c++17 -Iengine
//             tools/bench/block_kernels.cpp engine/kernels/kernels.cpp engine/kernels/block_formats*.cpp
//             engine/kernels/linear.cpp -sALLOW_MEMORY_GROWTH=1 -sMAXIMUM_MEMORY=4GB -sENVIRONMENT=node
//             -sWASM_ASYNC_COMPILATION=0 -sBINARYEN_EXTRA_PASSES=--one-caller-inline-max-function-size=100
//             -o build/block_kernels.cjs
//           && node --no-liftoff build/block_kernels.cjs [--hot] [--tokens N]
//   (the shipped build's flags, wasm/CMakeLists.txt: without the inlining cap wasm-opt folds gemv_q8 into its one
//   caller here, and V8 then runs it at 0.6-0.7x the shipped engine's speed; --no-liftoff: V8's baseline code of
//   a kernel can stay in use for a whole run, a Q4_0 product then taking 2.8-3x its optimized time)
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/block_formats.h"
#include "kernels/kernels.h"
#include "kernels/linear.h"

namespace {

using Clock = std::chrono::steady_clock;

// About GPT-2 124M's weights: each timed product reads a matrix not read since copies of this many weights ago
// (--hot: 1, the matrix stays in cache if it fits).
size_t streamed_weights = size_t(64) << 20;

// Copies of a matrix of n_out x n_in that hold streamed_weights weights.
int copies(int n_out, int n_in) { return int((streamed_weights + size_t(n_out) * n_in - 1) / (size_t(n_out) * n_in)); }

// A product to time: f(copy) multiplies with copy `copy` of its matrix.
struct Candidate {
    std::string name;
    int n_copies;
    std::function<void(int)> f;
    double least_us = 1e300;  // the least time of one product so far
    int rounds = 1;           // calls of f on every copy per run
    int tokens = 1;           // token rows per product: its time is printed per token
};

// Times the candidates in turns (so that a busy spell of the shared machine hits all of them alike): 40 runs of
// each, every run calling f on every copy for about 10 ms, keeping each one's least time per product.
void time_in_turns(std::vector<Candidate>& candidates) {
    for (Candidate& c : candidates) {
        for (int copy = 0; copy < c.n_copies; copy++) c.f(copy);
        const auto start = Clock::now();
        for (int copy = 0; copy < c.n_copies; copy++) c.f(copy);
        const double once = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
        c.rounds = std::max(1, int(10000.0 / std::max(once, 1.0)));
    }
    for (int run = 0; run < 40; run++) {
        for (Candidate& c : candidates) {
            const auto t0 = Clock::now();
            for (int i = 0; i < c.rounds; i++)
                for (int copy = 0; copy < c.n_copies; copy++) c.f(copy);
            const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
            c.least_us = std::min(c.least_us, us / (double(c.rounds) * c.n_copies));
        }
    }
}

// Random file blocks of a format: random bytes, with every fp16 field (F16's values; the scales d, and m or dmin) a
// small normal number.
std::vector<uint8_t> random_blocks(const gpt2::BlockFormat& format, int n_out, int n_in, std::mt19937& rng) {
    const size_t n_blocks = size_t(n_out) * n_in / format.values_per_block;
    std::vector<uint8_t> bytes(n_blocks * format.bytes_per_block);
    for (uint8_t& b : bytes) b = uint8_t(rng());
    const std::string name = format.name;
    std::vector<size_t> halves = {0};                                                           // Q8_0, Q4_0, Q5_0, F16
    if (name == "Q4_1" || name == "Q5_1" || name == "Q4_K" || name == "Q5_K") halves = {0, 2};  // d, then m or dmin
    if (name == "Q6_K") halves = {208};                                                         // d last
    for (size_t b = 0; b < n_blocks; b++) {
        uint8_t* block = bytes.data() + b * format.bytes_per_block;
        for (size_t at : halves) {
            block[at] = uint8_t(rng());
            block[at + 1] = uint8_t((rng() & 0x80) | 0x10 | (rng() & 0x03));  // exponent 4..5: about 2^-11
        }
    }
    return bytes;
}

struct Input {
    std::vector<float> x;
    std::vector<int16_t> xq;
    std::vector<float> scale;  // one per 32 values
    std::vector<int32_t> sum;
};

// A random row, with room for its quantization per 32 values (prepare_block_activations).
Input block_input(int n_in, std::mt19937& rng) {
    Input in;
    std::normal_distribution<float> normal(0.0f, 1.0f);
    in.x.resize(size_t(n_in));
    for (float& v : in.x) v = normal(rng);
    in.xq.resize(in.x.size());
    in.scale.resize(size_t(n_in / gpt2::kActivationBlock));
    in.sum.resize(in.scale.size());
    return in;
}

// int8's product of `tokens` random rows: the GEMV for one, gemm_q8 for more.
Candidate int8_candidate(int n_out, int n_in, int tokens, std::mt19937& rng) {
    struct State {
        std::vector<int8_t> w;  // (copies, n_out, n_in) in panels
        std::vector<float> w_scale;
        std::vector<float> out;      // (tokens, n_out)
        std::vector<float> x;        // (tokens, n_in)
        std::vector<int16_t> xq;     // (tokens, n_in)
        std::vector<float> x_scale;  // (tokens)
    };
    auto s = std::make_shared<State>();
    const int n_copies = copies(n_out, n_in);
    const size_t n = size_t(n_out) * n_in;
    s->w.resize(n * n_copies);
    std::vector<int8_t> scratch(size_t(gpt2::kPanelRows) * n_in);
    for (int8_t& v : s->w) v = int8_t(int(rng() % 255) - 127);
    for (int c = 0; c < n_copies; c++) gpt2::pack_panels(s->w.data() + c * n, n_out, n_in, scratch.data());
    s->w_scale.assign(size_t(n_out), 0.01f);
    s->out.resize(size_t(tokens) * n_out);
    for (int t = 0; t < tokens; t++) {
        const std::vector<float> row = block_input(n_in, rng).x;
        s->x.insert(s->x.end(), row.begin(), row.end());
    }
    s->xq.resize(s->x.size());
    s->x_scale.resize(size_t(tokens));
    gpt2::quantize_linear_activations(s->xq.data(), s->x_scale.data(), s->x.data(), tokens, n_in);
    Candidate candidate{tokens == 1 ? "int8" : "int8 x" + std::to_string(tokens), n_copies,
                        [s, n, n_in, n_out, tokens](int c) {
                            if (tokens == 1)
                                gpt2::gemv_q8(s->out.data(), s->xq.data(), s->x_scale[0], s->w.data() + c * n,
                                              s->w_scale.data(), nullptr, nullptr, n_in, n_out);
                            else
                                gpt2::gemm_q8(s->out.data(), s->xq.data(), s->x_scale.data(), s->w.data() + c * n,
                                              s->w_scale.data(), nullptr, nullptr, tokens, n_in, n_out);
                        }};
    candidate.tokens = tokens;
    return candidate;
}

Candidate fp32_candidate(int n_out, int n_in, std::mt19937& rng) {
    struct State {
        std::vector<float> w, out;  // w: (copies, n_out, n_in) in panels
        Input in;
    };
    auto s = std::make_shared<State>();
    const int n_copies = copies(n_out, n_in);
    const size_t n = size_t(n_out) * n_in;
    s->w.resize(n * n_copies);
    std::vector<float> scratch(size_t(gpt2::kPanelRows) * n_in);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    for (float& v : s->w) v = normal(rng);
    for (int c = 0; c < n_copies; c++) gpt2::pack_panels(s->w.data() + c * n, n_out, n_in, scratch.data());
    s->out.resize(size_t(n_out));
    s->in = block_input(n_in, rng);
    return Candidate{"fp32", n_copies, [s, n, n_in, n_out](int c) {
                         gpt2::gemv(s->out.data(), s->in.x.data(), s->w.data() + c * n, nullptr, n_in, n_out);
                     }};
}

Candidate format_candidate(const gpt2::BlockFormat& format, gpt2::WeightFormat weight_format, int n_out, int n_in,
                           std::mt19937& rng) {
    struct State {
        std::vector<uint8_t> storage;  // copies of the matrix in the format's storage
        std::vector<float> out;
        Input in;
        gpt2::Linear linear;
    };
    auto s = std::make_shared<State>();
    const std::vector<uint8_t> file = random_blocks(format, n_out, n_in, rng);
    const int n_copies = copies(n_out, n_in);
    const size_t bytes = size_t(format.storage_bytes(n_out, n_in));
    s->storage.resize(bytes * n_copies);
    for (int c = 0; c < n_copies; c++)
        format.store_rows(s->storage.data() + c * bytes, n_out, n_in, 0, n_out, file.data());
    s->linear.format = weight_format;
    s->linear.n_out = n_out;
    s->linear.n_in = n_in;
    s->in = block_input(n_in, rng);
    s->out.resize(size_t(n_out));
    const gpt2::LinearInput input{s->in.x.data(), s->in.xq.data(), s->in.scale.data(), s->in.sum.data()};
    gpt2::prepare_block_activations(weight_format, input, 1, n_in);  // into the form the format's kernel reads
    const gpt2::BlockFormat* f = &format;
    return Candidate{format.name, n_copies, [s, f, input, bytes, n_out](int c) {
                         gpt2::Linear copy = s->linear;
                         copy.weight = s->storage.data() + c * bytes;
                         f->multiply(s->out.data(), copy, input, 0, 1, 0, n_out);
                     }};
}

}  // namespace

// gpt2_block_kernels [--hot] [--tokens N] [FORMAT ...]: FORMATs (ggml names, e.g. F16 Q4_0; fp32) restrict the
// formats timed beside int8.
int main(int argc, char** argv) {
    std::vector<std::string> only;
    int batch_tokens = 1;
    for (int i = 1; i < argc; i++) {
        if (std::string(argv[i]) == "--hot") streamed_weights = 1;
        else if (std::string(argv[i]) == "--tokens" && i + 1 < argc) batch_tokens = std::atoi(argv[++i]);
        else only.push_back(argv[i]);
    }
    const auto wanted = [&](const std::string& name) {
        return only.empty() || std::find(only.begin(), only.end(), name) != only.end();
    };
    using gpt2::WeightFormat;
    const WeightFormat block_formats[] = {WeightFormat::f16,  WeightFormat::q8_0, WeightFormat::q4_0,
                                          WeightFormat::q4_1, WeightFormat::q5_0, WeightFormat::q5_1,
                                          WeightFormat::q4_k, WeightFormat::q5_k, WeightFormat::q6_k};
    std::mt19937 rng(1);
    const int shapes[][2] = {{3072, 768}, {768, 3072}, {2304, 768}, {50257, 768}};
    for (const auto& shape : shapes) {
        std::vector<Candidate> candidates;
        candidates.push_back(int8_candidate(shape[0], shape[1], 1, rng));
        if (batch_tokens > 1) candidates.push_back(int8_candidate(shape[0], shape[1], batch_tokens, rng));
        if (wanted("fp32")) candidates.push_back(fp32_candidate(shape[0], shape[1], rng));
        for (WeightFormat format : block_formats)
            if (wanted(gpt2::block_format(format)->name))
                candidates.push_back(format_candidate(*gpt2::block_format(format), format, shape[0], shape[1], rng));
        time_in_turns(candidates);
        for (const Candidate& c : candidates)
            std::printf("%5d x %4d  %-7s %8.1f us%s  %.2fx int8\n", shape[0], shape[1], c.name.c_str(),
                        c.least_us / c.tokens, c.tokens > 1 ? " a token" : "",
                        c.least_us / c.tokens / candidates[0].least_us);
        std::fflush(stdout);
    }
    return 0;
}
