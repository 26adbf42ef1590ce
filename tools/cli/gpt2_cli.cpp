// gpt2: native command-line front end of the engine (file I/O lives here, not in engine/).
//
//   gpt2 --model DIR|FILE.gguf --ids 464,3290 [-n N] [--temperature T] [--top-k K] [--top-p P]
//        [--repetition-penalty R] [--seed S] [--no-cache] [--no-stop] [--dump-logits FILE] [--int8] [--threads N]
//        [--kv-cache int8|fp32]
//   gpt2 --model DIR --eval FILE.u16 [--eval-tokens N] [--int8] [--threads N] [--kv-cache int8|fp32]
//   gpt2 --model DIR --score --ids 464,3290,... [--int8] [--threads N] [--kv-cache int8|fp32]
//   gpt2 --model DIR --bench [--int8] [--threads N] [--kv-cache int8|fp32]
//
// --int8 quantizes the weight matrices and the LM head to int8 on load (gpt2::WeightFormat::int8).
// --kv-cache sets the storage of the sessions' KV cache (gpt2::KvCacheFormat; default int8).
// --threads N runs the forward pass on N threads (default 1; results are bit-identical for any N); the timing
// line on stderr says how many it got.
//
// DIR holds config.json and model.safetensors; a path ending in .gguf is one GGUF file (its matrices run in the
// file's types, so --int8 is refused; read in pieces, never whole). Generated ids go to stdout comma-separated,
// timing to stderr. With stopping on (the default) generation ends when the end-of-text token is sampled
// (<|endoftext|> = 50256; a GGUF file's tokenizer.ggml.eos_token_id), which is not printed.
// Any error: one line on stderr and exit status 1.
//
// --eval prints the mean of -log p(token) over ids[1..] of a file of little-endian uint16 ids (--eval-tokens N: of
// its first N ids only, a shorter check of the same windows); --score prints, for
// each of ids[1..], "position<TAB>token<TAB>logprob<TAB>rank" (rank 1: the likeliest token), then
// "total <sum of logprobs> perplexity <exp(-mean logprob)>". Both score with gpt2::Scorer::score: windows of
// n_ctx tokens with a stride of n_ctx / 2 for longer texts.
//
// --bench is the native runtime of tools/bench/bench.mjs: one process (one model load) serves every measurement,
// timed here around the engine calls only. It prints "ready <weight bytes> <KV cache bytes> <threads>", then answers
// each stdin line with "<sampled next token> <ms>" (greedy sampling; cached and uncached sessions live side by side):
//   prefill cached|uncached 464,3290
//   step cached|uncached 464
// and "release uncached" with "released" after freeing the uncached session (the benchmark then reads the RSS
// of the model plus one cached session).
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "decoding/scorer.h"
#include "formats/gguf.h"
#include "gpt2.h"
#include "model/thread_pool.h"

namespace {

const int32_t kEndOfText = 50256;  // GPT-2's <|endoftext|>, the end of a safetensors model's text

struct Options {
    std::string model_dir;
    std::vector<int32_t> ids;
    bool have_ids = false;
    long n_generate = 32;
    gpt2::SamplingSettings sampling;
    bool use_cache = true;
    bool stop_at_eos = true;
    std::string dump_logits_path;
    std::string eval_path;
    long eval_tokens = 0;  // 0: the whole file
    bool bench = false;
    bool score = false;
    bool int8 = false;
    int n_threads = 1;
    gpt2::KvCacheFormat kv_cache = gpt2::KvCacheFormat::int8;
};

[[noreturn]] void die(const std::string& message) {
    std::fprintf(stderr, "gpt2: %s\n", message.c_str());
    std::exit(1);
}

const char* kUsage =
    "usage: gpt2 --model DIR (--ids 464,3290 [--score] | --eval FILE.u16 [--eval-tokens N] | --bench) [-n N] [--temperature T] [--top-k K] "
    "[--top-p P] [--repetition-penalty R] [--seed S] [--no-cache] [--no-stop] [--dump-logits FILE] [--int8] [--threads N] "
    "[--kv-cache int8|fp32]";

long parse_long(const std::string& flag, const char* text, long min, long max) {
    char* end = nullptr;
    errno = 0;
    long v = std::strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || errno != 0 || v < min || v > max)
        die(flag + ": expected an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "], got \"" +
            text + "\"");
    return v;
}

float parse_float(const std::string& flag, const char* text) {
    char* end = nullptr;
    float v = std::strtof(text, &end);
    if (*text == '\0' || *end != '\0' || !std::isfinite(v)) die(flag + ": expected a number, got \"" + text + "\"");
    return v;
}

std::vector<int32_t> parse_ids(const char* text) {
    std::vector<int32_t> ids;
    const char* p = text;
    while (*p) {
        char* end = nullptr;
        errno = 0;
        long v = std::strtol(p, &end, 10);
        if (end == p || errno != 0 || v < 0 || v > INT32_MAX || (*end != ',' && *end != '\0') || *p == '+' || *p == ' ')
            die(std::string("--ids: expected comma-separated non-negative integers, got \"") + text + "\"");
        ids.push_back(int32_t(v));
        p = *end == ',' ? end + 1 : end;
        if (*end == ',' && *p == '\0') die(std::string("--ids: trailing comma in \"") + text + "\"");
    }
    if (ids.empty()) die("--ids: no token ids given");
    return ids;
}

Options parse_args(int argc, char** argv) {
    Options o;
    o.sampling.temperature = 0.0f;  // greedy unless asked otherwise
    for (int i = 1; i < argc; i++) {
        const std::string flag = argv[i];
        auto value = [&]() -> const char* {
            if (i + 1 >= argc) die(flag + ": missing value");
            return argv[++i];
        };
        if (flag == "--model") o.model_dir = value();
        else if (flag == "--ids") {
            o.ids = parse_ids(value());
            o.have_ids = true;
        } else if (flag == "-n") o.n_generate = parse_long(flag, value(), 0, 1000000000L);
        else if (flag == "--temperature") o.sampling.temperature = parse_float(flag, value());
        else if (flag == "--top-k") o.sampling.top_k = int(parse_long(flag, value(), 0, INT32_MAX));
        else if (flag == "--top-p") o.sampling.top_p = parse_float(flag, value());
        else if (flag == "--repetition-penalty") o.sampling.repetition_penalty = parse_float(flag, value());
        else if (flag == "--seed") {
            const char* text = value();
            char* end = nullptr;
            errno = 0;
            unsigned long long v = std::strtoull(text, &end, 10);
            if (*text < '0' || *text > '9' || *end != '\0' || errno != 0)
                die(std::string("--seed: expected a non-negative integer, got \"") + text + "\"");
            o.sampling.seed = v;
        } else if (flag == "--no-cache") o.use_cache = false;
        else if (flag == "--no-stop") o.stop_at_eos = false;
        else if (flag == "--dump-logits") o.dump_logits_path = value();
        else if (flag == "--eval") o.eval_path = value();
        else if (flag == "--eval-tokens") o.eval_tokens = parse_long(flag, value(), 2, 1L << 40);
        else if (flag == "--bench") o.bench = true;
        else if (flag == "--score") o.score = true;
        else if (flag == "--int8") o.int8 = true;
        else if (flag == "--threads") o.n_threads = int(parse_long(flag, value(), 1, gpt2::ThreadPool::kMaxThreads));
        else if (flag == "--kv-cache") {
            const char* text = value();
            if (!gpt2::parse_kv_cache_format(text, &o.kv_cache))
                die(std::string("--kv-cache: expected int8 or fp32, got \"") + text + "\"");
        } else if (flag == "-h" || flag == "--help") {
            std::printf("%s\n", kUsage);
            std::exit(0);
        } else die("unknown argument \"" + flag + "\"; " + kUsage);
    }
    if (o.model_dir.empty()) die(std::string("--model is required; ") + kUsage);
    if (o.bench ? o.have_ids || !o.eval_path.empty() : o.have_ids == !o.eval_path.empty())
        die(std::string("give exactly one of --ids and --eval, or --bench alone; ") + kUsage);
    if (!o.eval_path.empty() && !o.dump_logits_path.empty()) die("--dump-logits cannot be combined with --eval");
    if (o.eval_tokens > 0 && o.eval_path.empty()) die("--eval-tokens needs --eval");
    if (o.score && (!o.have_ids || !o.dump_logits_path.empty()))
        die(std::string("--score needs --ids and no --dump-logits; ") + kUsage);
    return o;
}

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<uint8_t> read_file(const std::string& path) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) die(path + ": " + std::strerror(errno));
    std::vector<uint8_t> data;
    uint8_t buf[1 << 16];
    size_t got;
    while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) data.insert(data.end(), buf, buf + got);
    const bool failed = std::ferror(f) != 0;
    std::fclose(f);
    if (failed) die(path + ": read error");
    return data;
}

void write_file(const std::string& path, const void* data, size_t bytes) {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) die(path + ": " + std::strerror(errno));
    const bool ok = std::fwrite(data, 1, bytes, f) == bytes;
    if (std::fclose(f) != 0 || !ok) die(path + ": write error");
}

// A GGUF file streamed into the engine in 1 MiB pieces, as a download would arrive.
std::unique_ptr<gpt2::Model> load_gguf(const std::string& path, const gpt2::LoadOptions& options) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) die(path + ": " + std::strerror(errno));
    gpt2::ModelLoader loader(options);
    std::vector<uint8_t> piece(1 << 20);
    size_t got;
    while (!loader.failed() && (got = std::fread(piece.data(), 1, piece.size(), f)) > 0) loader.feed(piece.data(), got);
    const bool read_failed = std::ferror(f) != 0;
    std::fclose(f);
    if (read_failed) die(path + ": read error");
    std::unique_ptr<gpt2::Model> model = loader.finish();
    if (!model) die(loader.error());
    return model;
}

double elapsed_ms(std::chrono::steady_clock::time_point since) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since).count();
}

// Scores ids[1..] (gpt2::Scorer::score); exits with the session's error, prefixed by what, on failure.
std::vector<gpt2::TokenScore> score_ids(gpt2::Session& session, const std::vector<int32_t>& ids,
                                        const std::string& what) {
    if (ids.size() < 2) die(what + ": needs at least 2 token ids, got " + std::to_string(ids.size()));
    std::vector<gpt2::TokenScore> scores(ids.size() - 1);
    gpt2::Scorer scorer(session);
    if (!scorer.score(ids.data(), ids.size(), 0, scores.data(), nullptr)) die(what + ": " + session.error());
    return scores;
}

// Mean cross-entropy (nats/token) of ids[1..]: -logprob averaged, as --score computes it.
void run_eval(gpt2::Session& session, const std::string& path, long max_tokens) {
    const std::vector<uint8_t> bytes = read_file(path);
    if (bytes.size() % 2 != 0) die(path + ": odd size " + std::to_string(bytes.size()) + ", expected uint16 ids");
    std::vector<int32_t> ids(bytes.size() / 2);
    for (size_t i = 0; i < ids.size(); i++) ids[i] = int32_t(bytes[2 * i] | (bytes[2 * i + 1] << 8));
    if (max_tokens > 0 && ids.size() > size_t(max_tokens)) ids.resize(size_t(max_tokens));
    if (ids.size() < 2) die(path + ": fewer than 2 tokens, nothing to evaluate");
    double total = 0.0;
    for (const gpt2::TokenScore& s : score_ids(session, ids, path)) total -= s.logprob;
    std::printf("eval: %.6f nats/token over %zu predictions\n", total / double(ids.size() - 1), ids.size() - 1);
}

void run_score(gpt2::Session& session, const std::vector<int32_t>& ids) {
    double total = 0.0;
    const std::vector<gpt2::TokenScore> scores = score_ids(session, ids, "--score");
    for (size_t i = 0; i < scores.size(); i++) {
        std::printf("%zu\t%d\t%.6f\t%d\n", i + 1, scores[i].token, scores[i].logprob, scores[i].rank);
        total += scores[i].logprob;
    }
    std::printf("total %.6f perplexity %.6f\n", total, std::exp(-total / double(scores.size())));
}

void run_generate(gpt2::Session& session, const gpt2::Config& config, const Options& o, int n_threads,
                  int32_t end_of_text) {
    if (!session.set_sampling(o.sampling)) die(session.error());
    auto start = std::chrono::steady_clock::now();
    int next;
    if (!o.dump_logits_path.empty()) {
        if (o.ids.size() > size_t(config.n_ctx))
            die("--dump-logits: the prompt has " + std::to_string(o.ids.size()) + " tokens, more than n_ctx " +
                std::to_string(config.n_ctx));
        std::vector<float> logits(o.ids.size() * size_t(config.n_vocab));
        if (!session.prefill_logits(o.ids.data(), o.ids.size(), logits.data())) die(session.error());
        write_file(o.dump_logits_path, logits.data(), logits.size() * sizeof(float));
        next = session.sample();
    } else {
        next = session.prefill(o.ids.data(), o.ids.size());
    }
    const double prefill_ms = elapsed_ms(start);
    if (next < 0) die(session.error());

    std::vector<int32_t> generated;
    long n_steps = 0;
    start = std::chrono::steady_clock::now();
    while (long(generated.size()) < o.n_generate) {
        if (o.stop_at_eos && next == end_of_text) break;
        generated.push_back(next);
        if (long(generated.size()) == o.n_generate) break;
        next = session.step(next);
        n_steps++;
        if (next < 0) die(session.error());
    }
    const double decode_ms = elapsed_ms(start);

    std::string line;
    for (size_t i = 0; i < generated.size(); i++) line += (i ? "," : "") + std::to_string(generated[i]);
    std::printf("%s\n", line.c_str());
    std::fprintf(stderr, "prefill: %.3f ms (%zu tokens), decode: %.3f ms/token (%ld tokens), threads: %d\n", prefill_ms,
                 o.ids.size(), n_steps ? decode_ms / double(n_steps) : 0.0, n_steps, n_threads);
}

void run_bench(const gpt2::Model& model, gpt2::KvCacheFormat kv_cache) {
    std::string error;
    std::unique_ptr<gpt2::Session> cached = gpt2::Session::create(model, true, kv_cache, &error);
    std::unique_ptr<gpt2::Session> uncached = cached ? gpt2::Session::create(model, false, kv_cache, &error) : nullptr;
    if (!uncached) die(error);
    gpt2::SamplingSettings greedy;
    greedy.temperature = 0.0f;
    cached->set_sampling(greedy);
    uncached->set_sampling(greedy);
    std::printf("ready %zu %zu %d\n", gpt2::model_weight_bytes(model), cached->kv_cache_bytes(), model.n_threads());
    std::fflush(stdout);

    static char line[1 << 20];  // a prompt of n_ctx ids
    while (std::fgets(line, sizeof line, stdin)) {
        line[std::strcspn(line, "\n")] = '\0';
        if (std::strcmp(line, "release uncached") == 0) {
            uncached.reset();
            std::printf("released\n");
            std::fflush(stdout);
            continue;
        }
        const char* command = std::strtok(line, " ");
        const char* mode = std::strtok(nullptr, " ");
        const char* argument = std::strtok(nullptr, " ");
        if (!command || !mode || !argument || (std::strcmp(mode, "cached") != 0 && std::strcmp(mode, "uncached") != 0))
            die("--bench: expected \"prefill|step cached|uncached IDS\" or \"release uncached\"");
        if (std::strcmp(mode, "uncached") == 0 && !uncached) die("--bench: the uncached session was released");
        gpt2::Session& session = std::strcmp(mode, "cached") == 0 ? *cached : *uncached;
        const std::vector<int32_t> ids = parse_ids(argument);
        int next;
        const auto start = std::chrono::steady_clock::now();
        if (std::strcmp(command, "prefill") == 0) next = session.prefill(ids.data(), ids.size());
        else if (std::strcmp(command, "step") == 0 && ids.size() == 1) next = session.step(ids[0]);
        else die(std::string("--bench: unknown command \"") + command + "\" or more than one id for step");
        const double ms = elapsed_ms(start);
        if (next < 0) die(session.error());
        std::printf("%d %.6f\n", next, ms);
        std::fflush(stdout);
    }
}

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse_args(argc, argv);
    std::string error;
    std::unique_ptr<gpt2::Model> model;
    gpt2::LoadOptions options;
    options.format = o.int8 ? gpt2::WeightFormat::int8 : gpt2::WeightFormat::fp32;
    options.n_threads = o.n_threads;
    if (ends_with(o.model_dir, ".gguf")) {
        model = load_gguf(o.model_dir, options);
    } else {
        const std::vector<uint8_t> config = read_file(o.model_dir + "/config.json");
        const std::vector<uint8_t> weights = read_file(o.model_dir + "/model.safetensors");
        model = gpt2::load_model(config.data(), config.size(), weights.data(), weights.size(), options, &error);
        if (!model) die(error);
    }  // the file buffers are freed here: the model holds its own converted copy
    if (o.bench) {
        run_bench(*model, o.kv_cache);
        return 0;
    }
    std::unique_ptr<gpt2::Session> session = gpt2::Session::create(*model, o.use_cache, o.kv_cache, &error);
    if (!session) die(error);
    if (!o.eval_path.empty()) run_eval(*session, o.eval_path, o.eval_tokens);
    else if (o.score) run_score(*session, o.ids);
    else {
        const gpt2::Vocabulary* vocabulary = model->vocabulary();
        run_generate(*session, model_config(*model), o, model->n_threads(),
                     vocabulary ? int32_t(vocabulary->eos_token_id) : kEndOfText);
    }
    return 0;
}
