// embind bindings of the GPT-2 engine for JavaScript (web/engine.js wraps them in friendlier classes).
// The only file that includes Emscripten headers. Nothing here throws (C++ exceptions are off in wasm):
// constructors that can fail leave ok() false with error() set, and methods return -1 with error() set,
// so the objects stay usable after an error.
#include <emscripten/bind.h>
#include <emscripten/val.h>
#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../tools/bench/stream_read.h"
#include "gpt2.h"

using emscripten::val;

namespace {

// model.safetensors arriving in chunks (gpt2::ModelLoader): JS copies each piece of a download into a small
// staging block of the heap and calls feed(ptr, len), so the file is never held whole, in JS or in the heap.
class WasmModelLoader {
   public:
    // file_size: the file's length in bytes, or -1 when unknown (no Content-Length). int8: quantize the weight
    // matrices and the LM head on load (gpt2::WeightFormat::int8). n_threads: threads of the forward pass
    // (gpt2::LoadOptions::n_threads); above 1 it needs the -pthread build (gpt2-mt), elsewhere the model gets
    // one thread. Out of 1..256 the loader fails with the engine's message.
    WasmModelLoader(const std::string& config_json, bool int8, double file_size, int n_threads)
        : loader_(reinterpret_cast<const uint8_t*>(config_json.data()), config_json.size(), options(int8, n_threads),
                  file_size < 0 ? gpt2::ModelLoader::kUnknownFileSize : uint64_t(file_size)) {}

    bool ok() const { return !loader_.failed(); }
    const std::string& error() const { return loader_.error(); }
    bool feed(uintptr_t ptr, size_t len) { return loader_.feed(reinterpret_cast<const uint8_t*>(ptr), len); }
    gpt2::ModelLoader& loader() { return loader_; }

   private:
    static gpt2::LoadOptions options(bool int8, int n_threads) {
        gpt2::LoadOptions options;
        options.format = int8 ? gpt2::WeightFormat::int8 : gpt2::WeightFormat::fp32;
        options.n_threads = n_threads;
        return options;
    }
    gpt2::ModelLoader loader_;
};

// Weights of one model, made by the loader once the whole file has been fed.
class WasmModel {
   public:
    explicit WasmModel(WasmModelLoader& loader) : model_(loader.loader().finish()) {
        if (!model_) error_ = loader.error();
    }

    bool ok() const { return model_ != nullptr; }
    const std::string& error() const { return error_; }

    val config() const {
        val out = val::object();
        if (!model_) return out;
        const gpt2::Config& c = gpt2::model_config(*model_);
        out.set("n_vocab", c.n_vocab);
        out.set("n_ctx", c.n_ctx);
        out.set("n_embd", c.n_embd);
        out.set("n_head", c.n_head);
        out.set("n_layer", c.n_layer);
        return out;
    }

    double weight_bytes() const { return model_ ? double(gpt2::model_weight_bytes(*model_)) : 0.0; }
    int threads() const { return model_ ? model_->n_threads() : 0; }  // threads it got, the caller's included

    // Sessions share ownership, so JS may delete the model and its sessions in any order.
    std::shared_ptr<const gpt2::Model> shared() const { return model_; }

   private:
    std::shared_ptr<const gpt2::Model> model_;
    std::string error_;
};

class WasmSession {
   public:
    WasmSession(const WasmModel& model, bool use_kv_cache) : model_(model.shared()) {
        if (!model_) {
            error_ = "the model failed to load: " + model.error();
            return;
        }
        session_ = gpt2::Session::create(*model_, use_kv_cache, &error_);
        if (session_) order_.resize(size_t(model_->config().n_vocab));
    }

    bool ok() const { return session_ != nullptr; }
    const std::string& error() const { return session_ ? session_->error() : error_; }

    // The seed arrives as a double (exact for integers below 2^53, which the JS side enforces).
    void set_sampling(float temperature, int top_k, float top_p, float repetition_penalty, double seed) {
        if (!session_) return;
        gpt2::SamplingSettings s;
        s.temperature = temperature;
        s.top_k = top_k;
        s.top_p = top_p;
        s.repetition_penalty = repetition_penalty;
        s.seed = uint64_t(seed);
        session_->set_sampling(s);
    }

    // ids: a JS Array or typed array of token ids.
    int prefill(const val& ids) {
        if (!session_) return -1;
        const std::vector<int32_t> tokens = emscripten::convertJSArrayToNumberVector<int32_t>(ids);
        return session_->prefill(tokens.data(), tokens.size());
    }

    int step(int32_t id) { return session_ ? session_->step(id) : -1; }

    // Float32Array over the heap: valid until the next call into the module (memory growth detaches it).
    val logits() const {
        if (!session_ || session_->n_cached() == 0) return val::null();
        return val(emscripten::typed_memory_view(order_.size(), session_->logits()));
    }

    // Softmax of the raw logits (temperature 1, no penalty: the model's own distribution) of the last fed
    // position: { probability: p(token), alternatives: [{ token, probability }] } with the top_k most likely
    // tokens, most likely first. Computed here because JS would need to loop over all n_vocab logits.
    val distribution(int32_t token, int top_k) {
        if (!session_ || session_->n_cached() == 0) return val::null();
        const float* logits = session_->logits();
        const int n_vocab = int(order_.size());
        const float max_logit = *std::max_element(logits, logits + n_vocab);
        double sum = 0.0;
        for (int i = 0; i < n_vocab; i++) sum += std::exp(double(logits[i] - max_logit));
        auto probability = [&](int id) { return std::exp(double(logits[id] - max_logit)) / sum; };

        val out = val::object();
        out.set("probability", token >= 0 && token < n_vocab ? probability(token) : 0.0);
        val alternatives = val::array();
        const int k = std::max(0, std::min(top_k, n_vocab));
        for (int i = 0; i < n_vocab; i++) order_[size_t(i)] = i;
        auto more_likely = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
        std::partial_sort(order_.begin(), order_.begin() + k, order_.end(), more_likely);
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

   private:
    std::shared_ptr<const gpt2::Model> model_;
    std::unique_ptr<gpt2::Session> session_;
    std::vector<int32_t> order_;  // scratch for distribution(), allocated once
    std::string error_;
};

// Bytes currently allocated by malloc: lets tests check that create/dispose cycles leak nothing
// (the wasm memory itself never shrinks, so its size cannot tell). mallinfo's fields are int: read as unsigned,
// they stay right up to the 4 GB heap (GPT-2 1.5B as int8 with its KV cache uses over 2 GB).
double heap_used_bytes() { return double(static_cast<unsigned>(mallinfo().uordblks)); }

// One streaming read of the floats in a malloc'ed block: tools/bench.mjs times it over as many bytes as the
// model's weights as the memory-bandwidth ceiling of a decode step, in the same binary as the engine.
// Returns the sum so the read cannot be optimized away.
double stream_read(uintptr_t ptr, size_t bytes) {
    return gpt2_bench::stream_sum(reinterpret_cast<const float*>(ptr), bytes / sizeof(float));
}

}  // namespace

EMSCRIPTEN_BINDINGS(gpt2_wasm) {
    emscripten::class_<WasmModelLoader>("ModelLoader")
        .constructor<const std::string&, bool, double, int>()
        .function("ok", &WasmModelLoader::ok)
        .function("error", &WasmModelLoader::error)
        .function("feed", &WasmModelLoader::feed);

    emscripten::class_<WasmModel>("Model")
        .constructor<WasmModelLoader&>()
        .function("ok", &WasmModel::ok)
        .function("error", &WasmModel::error)
        .function("config", &WasmModel::config)
        .function("weightBytes", &WasmModel::weight_bytes)
        .function("threads", &WasmModel::threads);

    emscripten::class_<WasmSession>("Session")
        .constructor<const WasmModel&, bool>()
        .function("ok", &WasmSession::ok)
        .function("error", &WasmSession::error)
        .function("setSampling", &WasmSession::set_sampling)
        .function("prefill", &WasmSession::prefill)
        .function("step", &WasmSession::step)
        .function("logits", &WasmSession::logits)
        .function("distribution", &WasmSession::distribution)
        .function("reset", &WasmSession::reset)
        .function("nCached", &WasmSession::n_cached)
        .function("kvCacheBytes", &WasmSession::kv_cache_bytes);

    emscripten::function("heapUsedBytes", &heap_used_bytes);
    emscripten::function("streamRead", &stream_read);
}
