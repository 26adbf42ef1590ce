// embind bindings of the GPT-2 engine for JavaScript (web/engine.js wraps them in friendlier classes).
// The only file that includes Emscripten headers. Nothing here throws (C++ exceptions are off in wasm):
// constructors that can fail leave ok() false, methods return -1 / false, and error() then says
// { kind, message } with the engine's kind (config, file, memory, input); the objects stay usable.
//
// The contract is typed: Config and SamplingSettings cross as value objects, and JS writes the model file into
// a staging block the loader owns (no raw pointers, no malloc from JS). Built with GPT2_WASM_TESTING (the
// testing build, wasm/CMakeLists.txt), it adds the hooks only tests and tools/bench use.
#include <emscripten/bind.h>
#include <emscripten/em_asm.h>
#include <emscripten/val.h>
#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "gpt2.h"
#include "model/thread_pool.h"
#ifdef GPT2_WASM_TESTING
#include "../tools/bench/stream_read.h"
#endif

using emscripten::val;

namespace {

// What a failed call returns from error(). kind: "config", "file", "memory" or "input" (gpt2::ErrorKind).
struct BindingError {
    std::string kind;
    std::string message;
};

BindingError binding_error(gpt2::ErrorKind kind, const std::string& message) {
    switch (kind) {
        case gpt2::ErrorKind::config: return {"config", message};
        case gpt2::ErrorKind::file: return {"file", message};
        case gpt2::ErrorKind::memory: return {"memory", message};
        case gpt2::ErrorKind::input: return {"input", message};
        case gpt2::ErrorKind::none: break;
    }
    return {"", message};
}

// gpt2::SamplingSettings with JS's types: the seed arrives as a double (exact for integers below 2^53, which
// the JS side enforces; a uint64_t would need WASM_BIGINT), converted here, in one place.
struct Sampling {
    float temperature;
    int top_k;
    float top_p;
    float repetition_penalty;
    double seed;

    gpt2::SamplingSettings settings() const {
        gpt2::SamplingSettings s;
        s.temperature = temperature;
        s.top_k = top_k;
        s.top_p = top_p;
        s.repetition_penalty = repetition_penalty;
        s.seed = uint64_t(seed);
        return s;
    }
};

// model.safetensors or a GGUF file arriving in chunks (gpt2::ModelLoader): JS copies each piece of a download into the
// loader's staging block (staging(), a view of the heap) and calls feed(length), so the file is never held
// whole, in JS or in the heap.
class WasmModelLoader {
   public:
    // file_size: the file's length in bytes, or -1 when unknown (no Content-Length). int8: quantize the weight
    // matrices and the LM head on load (gpt2::WeightFormat::int8). n_threads: threads of the forward pass
    // (gpt2::LoadOptions::n_threads); above 1 it needs the -pthread build (gpt2-mt), elsewhere the model gets
    // one thread. staging_bytes: the size of the staging block, the largest piece feed() takes.
    WasmModelLoader(const std::string& config_json, bool int8, double file_size, int n_threads, double staging_bytes)
        : loader_(reinterpret_cast<const uint8_t*>(config_json.data()), config_json.size(), options(int8, n_threads),
                  file_size < 0 ? gpt2::ModelLoader::kUnknownFileSize : uint64_t(file_size)) {
        allocate_staging(staging_bytes);
    }

    // A GGUF file (model.gguf), which carries its own config and tokenizer; its matrices keep the file's types.
    WasmModelLoader(double file_size, int n_threads, double staging_bytes)
        : loader_(options(false, n_threads),
                  file_size < 0 ? gpt2::ModelLoader::kUnknownFileSize : uint64_t(file_size)) {
        allocate_staging(staging_bytes);
    }

    bool ok() const { return !loader_.failed() && staging_; }
    BindingError error() const {
        return loader_.failed() ? binding_error(loader_.error_kind(), loader_.error()) : error_;
    }

    // Uint8Array over the staging block: valid until the next call into the module (memory growth detaches it).
    val staging() const { return val(emscripten::typed_memory_view(staging_size_, staging_.get())); }

    // The next length bytes of the file, written at the start of staging().
    bool feed(double length) {
        if (!ok()) return false;
        if (!(length >= 0 && length <= double(staging_size_))) {
            error_ = {"input", "feed: " + std::to_string(length) + " bytes do not fit the " +
                                   std::to_string(staging_size_) + "-byte staging block"};
            return false;
        }
        return loader_.feed(staging_.get(), size_t(length));
    }

    gpt2::ModelLoader& loader() { return loader_; }

   private:
    void allocate_staging(double staging_bytes) {
        if (loader_.failed()) return;
        // malloc takes a 32-bit size: a larger request would wrap around to a small one.
        staging_.reset(staging_bytes >= 1 && staging_bytes < 4294967296.0
                           ? static_cast<uint8_t*>(std::malloc(size_t(staging_bytes)))
                           : nullptr);
        if (staging_) staging_size_ = size_t(staging_bytes);
        else
            error_ = {"memory", "out of memory: need " + std::to_string(uint64_t(staging_bytes)) +
                                    " bytes for the loader's staging block"};
    }
    static gpt2::LoadOptions options(bool int8, int n_threads) {
        gpt2::LoadOptions options;
        options.format = int8 ? gpt2::WeightFormat::int8 : gpt2::WeightFormat::fp32;
        options.n_threads = n_threads;
        return options;
    }
    gpt2::ModelLoader loader_;
    std::unique_ptr<uint8_t, decltype(&std::free)> staging_{nullptr, &std::free};  // (staging_size_)
    size_t staging_size_ = 0;
    BindingError error_;
};

// Weights of one model, made by the loader once the whole file has been fed.
class WasmModel {
   public:
    explicit WasmModel(WasmModelLoader& loader) : model_(loader.loader().finish()) {
        if (!model_) error_ = loader.error();
    }

    bool ok() const { return model_ != nullptr; }
    BindingError error() const { return error_; }
    gpt2::Config config() const { return model_ ? gpt2::model_config(*model_) : gpt2::Config{}; }
    double weight_bytes() const { return model_ ? double(gpt2::model_weight_bytes(*model_)) : 0.0; }
    int threads() const { return model_ ? model_->n_threads() : 0; }  // threads it got, the caller's included
    std::string weight_types() const { return model_ ? gpt2::model_weight_types(*model_) : std::string(); }

    // A GGUF model's tokenizer: { tokens, merges, eosTokenId, bosTokenId (null when the file has none) }, the
    // strings in id / priority order; null for a safetensors model (its tokenizer files are separate).
    val vocabulary() const {
        const gpt2::Vocabulary* vocabulary = model_ ? model_->vocabulary() : nullptr;
        if (!vocabulary) return val::null();
        val out = val::object();
        out.set("tokens", strings(vocabulary->tokens));
        out.set("merges", strings(vocabulary->merges));
        out.set("eosTokenId", vocabulary->eos_token_id);
        out.set("bosTokenId", vocabulary->has_bos_token_id ? val(vocabulary->bos_token_id) : val::null());
        return out;
    }

    // Sessions share ownership, so JS may delete the model and its sessions in any order.
    std::shared_ptr<const gpt2::Model> shared() const { return model_; }

   private:
    static val strings(const gpt2::GgufStringList& list) {
        val out = val::array();
        for (size_t i = 0; i < list.size(); i++) out.call<void>("push", val(std::string(list[i])));
        return out;
    }

    std::shared_ptr<const gpt2::Model> model_;
    BindingError error_;
};

class WasmSession {
   public:
    // kv_cache: "int8" or "fp32" (gpt2::KvCacheFormat)
    WasmSession(const WasmModel& model, bool use_kv_cache, const std::string& kv_cache) : model_(model.shared()) {
        if (!model_) {
            error_ = {"input", "the model failed to load: " + model.error().message};
            return;
        }
        gpt2::KvCacheFormat format;
        if (!gpt2::parse_kv_cache_format(kv_cache, &format)) {
            error_ = {"input", "kvCache must be \"int8\" or \"fp32\", got \"" + kv_cache + "\""};
            return;
        }
        std::string error;
        session_ = gpt2::Session::create(*model_, use_kv_cache, format, &error);
        if (!session_) {
            error_ = {"memory", error};  // creating a session fails only for lack of memory
            return;
        }
        // Not a std::vector: its failed allocation would abort the instance.
        const size_t n_vocab = size_t(model_->config().n_vocab);
        order_.reset(new (std::nothrow) int32_t[n_vocab]);
        if (order_) n_vocab_ = n_vocab;
        else {
            session_.reset();
            error_ = {"memory", "out of memory: need " + std::to_string(n_vocab * sizeof(int32_t)) +
                                    " bytes for the session's token order"};
        }
    }

    bool ok() const { return session_ != nullptr; }
    BindingError error() const {
        return session_ && !failed_locally_ ? binding_error(session_->error_kind(), session_->error()) : error_;
    }

    void set_sampling(const Sampling& sampling) {
        if (session_) session_->set_sampling(sampling.settings());
    }

    // ids: a JS Array or typed array of token ids.
    int prefill(const val& ids) {
        if (!session_) return -1;
        failed_locally_ = false;
        const std::vector<int32_t> tokens = emscripten::convertJSArrayToNumberVector<int32_t>(ids);
        return session_->prefill(tokens.data(), tokens.size());
    }

    // prefill() keeping the window's common prefix with ids in the cache (gpt2::Session::prefill_reusing).
    int prefill_reusing(const val& ids) {
        if (!session_) return -1;
        failed_locally_ = false;
        const std::vector<int32_t> tokens = emscripten::convertJSArrayToNumberVector<int32_t>(ids);
        return session_->prefill_reusing(tokens.data(), tokens.size());
    }
    int reused_tokens() const { return session_ ? session_->reused_tokens() : 0; }

    int step(int32_t id) {
        failed_locally_ = false;
        return session_ ? session_->step(id) : -1;
    }

    // gpt2::Session::score of ids[1..]: { logprobs: [..], ranks: [..], alternatives: [[token, logprob, token,
    // logprob, ...] per scored token, top_k pairs likeliest first] }, or null (error() says why).
    val score(const val& ids, int top_k) {
        if (!session_) return val::null();
        const std::vector<int32_t> tokens = emscripten::convertJSArrayToNumberVector<int32_t>(ids);
        const size_t n_scored = tokens.size() > 1 ? tokens.size() - 1 : 0;
        // The engine refuses a top_k outside [0, n_vocab]; bounded here too, so that the size cannot overflow
        // (new[] of an overflowing count aborts instead of returning null).
        const size_t n_alternatives = n_scored * size_t(std::clamp(top_k, 0, int(n_vocab_)));
        // Not std::vectors: their failed allocation would abort the instance.
        std::unique_ptr<gpt2::TokenScore[]> scores(new (std::nothrow) gpt2::TokenScore[n_scored + 1]);
        std::unique_ptr<gpt2::TokenScore[]> alternatives(new (std::nothrow) gpt2::TokenScore[n_alternatives + 1]);
        if (!scores || !alternatives) {
            error_ = {"memory", "out of memory: need " +
                                    std::to_string((n_scored + n_alternatives) * sizeof(gpt2::TokenScore)) +
                                    " bytes for the scores"};
            failed_locally_ = true;
            return val::null();
        }
        failed_locally_ = false;
        if (!session_->score(tokens.data(), tokens.size(), top_k, scores.get(), alternatives.get())) return val::null();
        val logprobs = val::array(), ranks = val::array(), alternative_rows = val::array();
        for (size_t i = 0; i < n_scored; i++) {
            logprobs.set(i, scores[i].logprob);
            ranks.set(i, scores[i].rank);
            val row = val::array();
            for (int k = 0; k < top_k; k++) {
                const gpt2::TokenScore& alternative = alternatives[i * size_t(top_k) + size_t(k)];
                row.set(2 * k, alternative.token);
                row.set(2 * k + 1, alternative.logprob);
            }
            alternative_rows.set(i, row);
        }
        val out = val::object();
        out.set("logprobs", logprobs);
        out.set("ranks", ranks);
        out.set("alternatives", alternative_rows);
        return out;
    }

#ifdef GPT2_WASM_TESTING
    // Float32Array over the heap: valid until the next call into the module (memory growth detaches it).
    val logits() const {
        if (!session_ || session_->n_cached() == 0) return val::null();
        return val(emscripten::typed_memory_view(n_vocab_, session_->logits()));
    }
#endif

    // Softmax of the raw logits (temperature 1, no penalty: the model's own distribution) of the last fed
    // position: { probability: p(token), alternatives: [{ token, probability }] } with the top_k most likely
    // tokens, most likely first. Computed here because JS would need to loop over all n_vocab logits.
    val distribution(int32_t token, int top_k) {
        if (!session_ || session_->n_cached() == 0) return val::null();
        const float* logits = session_->logits();
        const int n_vocab = int(n_vocab_);
        const float max_logit = *std::max_element(logits, logits + n_vocab);
        double sum = 0.0;
        for (int i = 0; i < n_vocab; i++) sum += std::exp(double(logits[i] - max_logit));
        auto probability = [&](int id) { return std::exp(double(logits[id] - max_logit)) / sum; };

        val out = val::object();
        out.set("probability", token >= 0 && token < n_vocab ? probability(token) : 0.0);
        val alternatives = val::array();
        const int k = std::max(0, std::min(top_k, n_vocab));
        for (int i = 0; i < n_vocab; i++) order_[size_t(i)] = i;
        auto more_likely = [&](int32_t a, int32_t b) {
            return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
        };
        std::partial_sort(order_.get(), order_.get() + k, order_.get() + n_vocab, more_likely);
        for (int i = 0; i < k; i++) {
            val alternative = val::object();
            alternative.set("token", order_[size_t(i)]);
            alternative.set("probability", probability(order_[size_t(i)]));
            alternatives.call<void>("push", alternative);
        }
        out.set("alternatives", alternatives);
        return out;
    }

    void reset() {
        if (session_) session_->reset();
    }
    int n_cached() const { return session_ ? session_->n_cached() : 0; }
    double kv_cache_bytes() const { return session_ ? double(session_->kv_cache_bytes()) : 0.0; }
    std::string kv_cache() const { return session_ ? gpt2::kv_cache_format_name(session_->kv_cache_format()) : ""; }

   private:
    std::shared_ptr<const gpt2::Model> model_;
    std::unique_ptr<gpt2::Session> session_;
    std::unique_ptr<int32_t[]> order_;  // (n_vocab_) scratch for distribution(), allocated once
    size_t n_vocab_ = 0;
    BindingError error_;
    bool failed_locally_ = false;  // the last score() failed here, not in the session: error_ says why
};

// Bytes currently allocated by malloc: lets tests check that create/dispose cycles leak nothing, and the
// benchmark measure a model (the wasm memory itself never shrinks, so its size cannot tell). mallinfo's fields
// are int: read as unsigned, they stay right up to the 4 GB heap (GPT-2 1.5B as int8 with its KV cache uses
// over 2 GB).
double heap_used_bytes() { return double(static_cast<unsigned>(mallinfo().uordblks)); }

// The wasm memory's size, which never shrinks, so also its peak so far (the benchmark's peak memory, measured on
// the shipped build).
double heap_bytes() { return double(__builtin_wasm_memory_size(0)) * 65536.0; }

#ifdef GPT2_WASM_TESTING

// A block of the heap of any requested size (the benchmark's bandwidth probe reads one as large as a model's
// weights): ok() false with an out-of-memory error when it cannot be allocated, never a wrapped-around size.
class HeapBlock {
   public:
    explicit HeapBlock(double bytes)
        : data_(bytes >= 1 && bytes < 4294967296.0 ? static_cast<uint8_t*>(std::malloc(size_t(bytes))) : nullptr,
                &std::free),
          size_(data_ ? size_t(bytes) : 0),
          requested_(bytes) {}

    bool ok() const { return data_ != nullptr; }
    BindingError error() const {
        char bytes[32];
        std::snprintf(bytes, sizeof bytes, "%.0f", requested_);
        return {"memory", std::string("out of memory: cannot allocate ") + bytes +
                              " bytes in the WebAssembly heap (4 GB at most)"};
    }
    // Uint8Array over the block: valid until the next call into the module (memory growth detaches it).
    val view() const { return val(emscripten::typed_memory_view(size_, data_.get())); }

    // One streaming read of the block's floats: tools/bench.mjs times it over as many bytes as the model's
    // weights as the memory-bandwidth ceiling of a decode step, in the same engine build. Returns the sum so the
    // read cannot be optimized away.
    double stream_read() const {
        return gpt2_bench::stream_sum(reinterpret_cast<const float*>(data_.get()), size_ / sizeof(float));
    }

   private:
    std::unique_ptr<uint8_t, decltype(&std::free)> data_;
    size_t size_;
    double requested_;
};
#endif

}  // namespace

EMSCRIPTEN_BINDINGS(gpt2_wasm) {
#ifdef __EMSCRIPTEN_PTHREADS__
    // Threads start only on the Web Workers started with the module (Module.gpt2Workers, wasm/CMakeLists.txt):
    // the engine's thread pools never ask for more (gpt2::ThreadPool::limit_workers says why).
    gpt2::ThreadPool::limit_workers(EM_ASM_INT({ return Module['gpt2Workers'] | 0; }));
#endif
    emscripten::value_object<BindingError>("EngineError")
        .field("kind", &BindingError::kind)
        .field("message", &BindingError::message);

    emscripten::value_object<gpt2::Config>("Config")
        .field("n_vocab", &gpt2::Config::n_vocab)
        .field("n_ctx", &gpt2::Config::n_ctx)
        .field("n_embd", &gpt2::Config::n_embd)
        .field("n_head", &gpt2::Config::n_head)
        .field("n_layer", &gpt2::Config::n_layer)
        .field("layer_norm_epsilon", &gpt2::Config::layer_norm_epsilon);

    emscripten::value_object<Sampling>("SamplingSettings")
        .field("temperature", &Sampling::temperature)
        .field("topK", &Sampling::top_k)
        .field("topP", &Sampling::top_p)
        .field("repetitionPenalty", &Sampling::repetition_penalty)
        .field("seed", &Sampling::seed);

    emscripten::class_<WasmModelLoader>("ModelLoader")
        .constructor<const std::string&, bool, double, int, double>()
        .constructor<double, int, double>()
        .function("ok", &WasmModelLoader::ok)
        .function("error", &WasmModelLoader::error)
        .function("staging", &WasmModelLoader::staging)
        .function("feed", &WasmModelLoader::feed);

    emscripten::class_<WasmModel>("Model")
        .constructor<WasmModelLoader&>()
        .function("ok", &WasmModel::ok)
        .function("error", &WasmModel::error)
        .function("config", &WasmModel::config)
        .function("weightBytes", &WasmModel::weight_bytes)
        .function("threads", &WasmModel::threads)
        .function("weightTypes", &WasmModel::weight_types)
        .function("vocabulary", &WasmModel::vocabulary);

    emscripten::class_<WasmSession> session("Session");
    session.constructor<const WasmModel&, bool, const std::string&>()
        .function("ok", &WasmSession::ok)
        .function("error", &WasmSession::error)
        .function("setSampling", &WasmSession::set_sampling)
        .function("prefill", &WasmSession::prefill)
        .function("prefillReusing", &WasmSession::prefill_reusing)
        .function("reusedTokens", &WasmSession::reused_tokens)
        .function("step", &WasmSession::step)
        .function("score", &WasmSession::score)
        .function("distribution", &WasmSession::distribution)
        .function("reset", &WasmSession::reset)
        .function("nCached", &WasmSession::n_cached)
        .function("kvCacheBytes", &WasmSession::kv_cache_bytes)
        .function("kvCache", &WasmSession::kv_cache);

    emscripten::function("heapUsedBytes", &heap_used_bytes);
    emscripten::function("heapBytes", &heap_bytes);

#ifdef GPT2_WASM_TESTING
    session.function("logits", &WasmSession::logits);
    emscripten::class_<HeapBlock>("HeapBlock")
        .constructor<double>()
        .function("ok", &HeapBlock::ok)
        .function("error", &HeapBlock::error)
        .function("view", &HeapBlock::view)
        .function("streamRead", &HeapBlock::stream_read);
#endif
}
