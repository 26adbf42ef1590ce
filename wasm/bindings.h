// The embind objects as C++ classes: wasm/bindings.cpp registers them (the product API), wasm/testing_hooks.cpp
// adds the testing build's methods. Nothing here throws: see bindings.cpp.
#pragma once

#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "gpt2.h"
#include "model/forward.h"

// What a failed call returns from error(). kind: "config", "file", "memory" or "input" (gpt2::ErrorKind).
struct BindingError {
    std::string kind;
    std::string message;
};

// Hands each weight matrix's rows to a JS function as the loader converts them (gpt2::MatrixReceiver): it is called
// with { layer, name, format, nOut, nIn, row0, nRows, rows, scale } (rows: heap views, valid during the call only:
// Float32Array for fp32, Int8Array for int8, Uint8Array of the file's blocks; scale: int8's Float32Array, or null)
// and returns '' or the one-line error that stops the load. It must not throw: an exception would unwind through
// the loader.
class JsMatrixReceiver final : public gpt2::MatrixReceiver {
   public:
    explicit JsMatrixReceiver(emscripten::val receive) : receive_(std::move(receive)) {}
    bool receive(const gpt2::MatrixRows& rows, std::string* error) override;

   private:
    emscripten::val receive_;
};

// model.safetensors or a GGUF file arriving in chunks (gpt2::ModelLoader): JS copies each piece of a download into the
// loader's staging block (staging(), a view of the heap) and calls feed(length), so the file is never held
// whole, in JS or in the heap.
class WasmModelLoader {
   public:
    // file_size: the file's length in bytes, or -1 when unknown (no Content-Length). int8: quantize the weight
    // matrices and the LM head on load (gpt2::WeightFormat::int8). n_threads: threads of the forward pass
    // (gpt2::LoadOptions::n_threads); above 1 it needs the -pthread build (gpt2-mt), elsewhere the model gets
    // one thread. staging_bytes: the size of the staging block, the largest piece feed() takes. receive_matrices:
    // null, or the function of a JsMatrixReceiver that takes the matrices (the model then keeps none).
    WasmModelLoader(const std::string& config_json, bool int8, double file_size, int n_threads, double staging_bytes,
                    emscripten::val receive_matrices)
        : receiver_(make_receiver(receive_matrices)),
          loader_(reinterpret_cast<const uint8_t*>(config_json.data()), config_json.size(),
                  load_options(int8, n_threads, receiver_.get()),
                  file_size < 0 ? gpt2::ModelLoader::kUnknownFileSize : uint64_t(file_size)) {
        check_receiver(receive_matrices);
        allocate_staging(staging_bytes);
    }

    // A GGUF file (model.gguf), which carries its own config and tokenizer; its matrices keep the file's types.
    WasmModelLoader(double file_size, int n_threads, double staging_bytes, emscripten::val receive_matrices)
        : receiver_(make_receiver(receive_matrices)),
          loader_(load_options(false, n_threads, receiver_.get()),
                  file_size < 0 ? gpt2::ModelLoader::kUnknownFileSize : uint64_t(file_size)) {
        check_receiver(receive_matrices);
        allocate_staging(staging_bytes);
    }

    // The loader's error state is the engine loader's (gpt2::ModelLoader::report_error takes the binding's own
    // failures).
    bool ok() const { return !loader_.failed(); }
    BindingError error() const { return {gpt2::error_kind_name(loader_.error_kind()), loader_.error()}; }

    // Uint8Array over the staging block: valid until the next call into the module (memory growth detaches it).
    emscripten::val staging() const {
        return emscripten::val(emscripten::typed_memory_view(staging_size_, staging_.get()));
    }

    // The next length bytes of the file, written at the start of staging().
    bool feed(double length);

    gpt2::ModelLoader& loader() { return loader_; }

   private:
    static bool wants_receiver(const emscripten::val& receive);
    // null when receive is null, or when there was no memory for it: check_receiver then fails the loader
    static std::unique_ptr<JsMatrixReceiver> make_receiver(const emscripten::val& receive);
    void check_receiver(const emscripten::val& receive);
    static gpt2::LoadOptions load_options(bool int8, int n_threads, gpt2::MatrixReceiver* receiver);
    void allocate_staging(double staging_bytes);
    std::unique_ptr<JsMatrixReceiver> receiver_;  // before loader_, which holds it
    gpt2::ModelLoader loader_;
    std::unique_ptr<uint8_t, decltype(&std::free)> staging_{nullptr, &std::free};  // (staging_size_)
    size_t staging_size_ = 0;
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
    emscripten::val vocabulary() const;

    // Sessions share ownership, so JS may delete the model and its sessions in any order.
    std::shared_ptr<const gpt2::Model> shared() const { return model_; }
    // gpt2::Model::release_weights: once a GPU holds them, the heap's copy goes, and matrix_rows's staging block
    // with it; the model then makes only recording sessions, and matrix, matrix_rows and vector give null.
    void release_weights() {
        if (model_) model_->release_weights();
        rows_.reset();
        rows_bytes_ = 0;
    }

    // The weights as a GPU host uploads them (web/lib/gpu/gpu_weights.js). matrix: "wte", "attn_qkv", "attn_proj",
    // "mlp_fc", "mlp_proj" or "lm_head" (layer -1 for wte and the head): { format, nOut, nIn, tied (the head is
    // wte), scale: Float32Array (nOut) or null, bias: Float32Array (nOut) or null }, or null for a name it lacks.
    emscripten::val matrix(int layer, const std::string& name) const;
    // Rows [row0, row0 + n_rows) of that matrix, in a staging block the model keeps: fp32 as a Float32Array and
    // int8 as an Int8Array (n_rows, nIn), plain row-major; a GGUF block format (f16, q8_0, q4_0, q4_1, q5_0, q5_1,
    // q4_k, q5_k, q6_k) as a Uint8Array of the file's own ggml blocks (n_rows, nIn / values per block) blocks
    // (ggml-common.h's block_q8_0 etc., bit for bit what the file stored: gpt2::BlockFormat::file_rows), f16 as
    // (n_rows, nIn) halves. null for a range outside or a staging block that cannot be allocated. Views: valid
    // until the next call into the module.
    emscripten::val matrix_rows(int layer, const std::string& name, int row0, int n_rows) const;
    // A fp32 vector as a Float32Array: "ln_1.weight", "ln_1.bias", "ln_2.weight", "ln_2.bias" of a layer, and
    // "ln_f.weight", "ln_f.bias", "wpe" (n_ctx, n_embd) with layer -1; null for a name it lacks.
    emscripten::val vector(int layer, const std::string& name) const;

   private:
    std::shared_ptr<gpt2::Model> model_;
    BindingError error_;
    mutable std::unique_ptr<uint8_t[]> rows_;  // (rows_bytes_) matrix_rows's staging block
    mutable size_t rows_bytes_ = 0;
};

struct Sampling;  // gpt2::SamplingSettings as JS passes them (bindings.cpp)

// Token ids from JS (an Array or typed array) in a block of the heap: each an exact integer in the int32 range
// (the engine then checks the vocabulary), none wrapped around on the way.
struct TokenIds {
    std::unique_ptr<int32_t[]> ids;  // (n)
    size_t n = 0;
};

// A gpt2::Session. Its error state is the session's (gpt2::Session::report_error takes the binding's own
// failures), or the constructor's when no session could be made.
class WasmSession {
   public:
    // kv_cache: "int8" or "fp32" (gpt2::KvCacheFormat); recording: a recording session (gpt2::Session::
    // create_recording, fp32 cache), whose forward passes web/lib/gpu/ runs on a GPU.
    WasmSession(const WasmModel& model, bool use_kv_cache, const std::string& kv_cache, bool recording);

    bool ok() const { return session_ != nullptr; }
    BindingError error() const;
    // gpt2::Session::set_sampling; false (error() names the field) for a number the engine cannot represent as
    // given (gpt2::host_sampling_settings) or a value outside its range.
    bool set_sampling(const Sampling& sampling);
    // Numbers from JS arrive as doubles and are checked by the engine (model/host_numbers.h), never narrowed: a
    // token id must be an exact int32 (the engine checks the vocabulary), so 2^32 + 13 is refused, not read as 13.
    // ids: a JS Array or typed array of token ids, fed by prefill_ids (gpt2::Session::prefill or prefill_reusing).
    template <int (gpt2::Session::*prefill_ids)(const int32_t*, size_t)>
    int prefill(const emscripten::val& ids);
    int reused_tokens() const { return session_ ? session_->reused_tokens() : 0; }
    int step(double id);
    // gpt2::Session::step_draft: feeds id and verifies draft (an Array of ids, of which the first kMaxDraftTokens are
    // verified) -> Array of the sampled tokens (the accepted drafts, then the model's own), or null (error() says why).
    emscripten::val step_draft(double id, const emscripten::val& draft);
    // gpt2::Session::lookup_draft -> Array of at most max_draft (and kMaxDraftTokens) drafted ids (prompt lookup
    // after id); empty for an id that is not an int32 or a max_draft that is not a number >= 0.
    emscripten::val lookup_draft(double id, double max_draft) const;
    // A recording session's halves of prefill and step (the host runs the commands in between, then sample()).
    bool feed_prompt(const emscripten::val& ids, bool reuse);
    bool feed_step(double id);
    int sample() { return session_ ? session_->sample() : -1; }
    int batch_rows() const { return session_ ? session_->batch_rows() : 0; }
    // Int32Array over the last pass's commands (gpt2::kGpuCommandInts per command, forward_ops.h), Int32Array
    // over the window (n_ctx token ids, the first n_cached() fed), Float32Array (n_vocab) where the host writes
    // the last token's logits. Views: valid until the next call into the module.
    emscripten::val commands() const;
    emscripten::val window() const;
    emscripten::val host_logits();
    // Float32Array over the rows of logits the last recorded pass writes (a pass with every-row logits, as a score
    // pass has), where its host writes them; null for a pass with the last token's logits only.
    emscripten::val all_logits() const;
    // Runs the last recorded pass on the CPU (gpt2::replay) with cpu_model's weights (the session's model, or the
    // same model loaded again when its weights were released) and writes its logits for sample(): the host for a
    // recording session whose GPU was lost. The first time, the window's positions before the pass are fed into a
    // CPU cache, which then follows the session's passes. false (error() set) when cpu_model has no weights or
    // another shape, or its run state cannot be allocated.
    bool run_on_cpu(const WasmModel& cpu_model);
    // gpt2::Session::score of ids[1..]: { logprobs: [..], ranks: [..], alternatives: [[token, logprob, token,
    // logprob, ...] per scored token, top_k pairs likeliest first] }, or null (error() says why).
    emscripten::val score(const emscripten::val& ids, double top_k);
    // score() pass by pass, for a recording session's host (gpt2::Session::begin_score): the ids and the scores
    // are kept here for the run; score_result() is what score() returns, once feed_score_pass() has returned 0.
    bool begin_score(const emscripten::val& ids, double top_k);
    int feed_score_pass() { return session_ ? session_->feed_score_pass() : -1; }
    bool score_fed_pass() { return session_ && session_->score_fed_pass(); }
    emscripten::val score_result();
    // The model's distribution where token was sampled: at the last fed position (row -1), or at row i of the last
    // step_draft() (gpt2::Session::verified_logits). top_k in [0, n_vocab] (null and error() otherwise).
    emscripten::val distribution(double token, double top_k, double row);
    // Several sequences (gpt2::Session::fork_from, step_sequences): fork_from copies other's window and KV cache;
    // add_sequence(i, s, id) queues s as sequence i with the token it is fed next (i = 0, this session, starts a
    // batch), and step_sequences() feeds the queued ones in one pass -> Array of their sampled tokens, or null
    // (error() names the sequence).
    bool fork_from(const WasmSession& other) {
        return session_ && other.session_ && session_->fork_from(*other.session_);
    }
    void add_sequence(double index, WasmSession& sequence, double id);
    emscripten::val step_sequences();
    // Beam search (gpt2::BeamSearch) over the queued sessions (add_sequence: this one first, as many as beams; the
    // ids are not used), which must outlive it: begin_beams() creates it and feeds the prompt ids, step_beams()
    // runs a step (1 running, 0 done, -1 error()), finish_beams() ends it now, beam_results() -> Array of
    // { tokens, score, endedByEos } best first, end_beams() frees it. early_stopping: "heuristic", "done" or "never".
    bool begin_beams(double num_beams, double length_penalty, const std::string& early_stopping, double max_new_tokens,
                     double eos_token, const emscripten::val& ids);
    int step_beams();
    void finish_beams() {
        if (beams_) beams_->finish();
    }
    emscripten::val beam_results() const;
    void end_beams() { beams_.reset(); }
    void reset() {
        if (session_) session_->reset();
    }
    int n_cached() const { return session_ ? session_->n_cached() : 0; }
    double kv_cache_bytes() const { return session_ ? double(session_->kv_cache_bytes()) : 0.0; }
    std::string kv_cache() const { return session_ ? gpt2::kv_cache_format_name(session_->kv_cache_format()) : ""; }

    // The engine's session (null unless ok()) and its vocabulary size, for the testing hooks.
    const gpt2::Session* session() const { return session_.get(); }
    size_t n_vocab() const { return n_vocab_; }

   private:
    std::shared_ptr<const gpt2::Model> model_;  // the session's weights, kept alive as long as it
    std::unique_ptr<gpt2::Session> session_;
    std::unique_ptr<gpt2::RunState> cpu_host_;      // run_on_cpu's activations and KV cache, once it has run
    std::shared_ptr<const gpt2::Model> cpu_model_;  // the weights run_on_cpu runs with, once it has run
    gpt2::Session* queued_[gpt2::Session::kMaxSequences] = {};  // add_sequence's sessions, this one first
    double queued_ids_[gpt2::Session::kMaxSequences] = {};      // (n_queued_) the token each is fed, as JS gave it
    int n_queued_ = 0;
    std::unique_ptr<gpt2::BeamSearch> beams_;  // begin_beams to end_beams, over queued_
    // A score run's ids and what it fills, from begin_score (or score) to its result; not std::vectors, whose
    // failed allocation would abort the instance.
    std::unique_ptr<int32_t[]> score_ids_;                    // (n_score_ids_)
    std::unique_ptr<gpt2::TokenScore[]> scores_;              // (n_scored_)
    std::unique_ptr<gpt2::TokenScore[]> score_alternatives_;  // (n_scored_, score_top_k_)
    size_t n_score_ids_ = 0, n_scored_ = 0;
    int score_top_k_ = 0;
    // a score run's storage for ids (an Array or typed array) and top_k alternatives per scored id; false (error()
    // set) for arguments score() refuses, checked before anything is allocated, or for lack of memory
    bool allocate_scores(const emscripten::val& ids, double top_k);
    // ids into *out; false with error() set (input for an id that is not an int32, memory) otherwise
    bool read_ids(const emscripten::val& ids, TokenIds* out);
    // id as a token id when it is an exact int32; false with error() set (prefix, then gpt2::token_id_refusal's
    // message) otherwise
    bool read_id(double id, const std::string& prefix, int32_t* out);
    size_t n_vocab_ = 0;
    BindingError constructor_error_;  // why session_ is null
};

// The testing build's hooks (wasm/testing_hooks.cpp), on the Session class and beside it.
void register_testing_hooks(emscripten::class_<WasmSession>& session);
