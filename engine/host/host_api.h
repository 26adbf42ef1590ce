// The engine as a host drives it with its own values (the wasm binding's JS numbers and arrays): each one converted
// and checked as host/host_numbers.h does, with the JS API's names in the messages, so that the host only converts.
// The engine's top layer: it reaches every decoding mode, and only hosts (wasm/) include it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "decoding/beam_search.h"
#include "decoding/scorer.h"
#include "decoding/sequences.h"
#include "decoding/speculation.h"
#include "gpt2.h"
#include "host/host_numbers.h"
#include "inspection/inspector.h"
#include "kernels/linear.h"
#include "model/forward.h"

namespace gpt2 {

// A model file fed by a host that copies each piece into a staging block the loader owns, so that the file is never
// whole in the host or the heap. Its errors are the loader's (ModelLoader::error()).
class HostModelLoader {
   public:
    // config_json: a safetensors model's config.json, or null for a GGUF file; file_size < 0: unknown; receiver: where
    // the matrices go (LoadOptions::matrix_receiver), or null.
    HostModelLoader(const std::string* config_json, bool int8, double file_size, int n_threads, double staging_bytes,
                    MatrixReceiver* receiver);

    bool ok() const { return !loader_.failed(); }
    HostError error() const { return {loader_.error_kind(), loader_.error()}; }
    uint8_t* staging() const { return staging_.get(); }
    size_t staging_size() const { return staging_size_; }
    // the first length bytes of staging(), checked against its size
    bool feed(double length);
    std::unique_ptr<Model> finish() { return loader_.finish(); }

   private:
    ModelLoader loader_;
    std::unique_ptr<uint8_t[]> staging_;  // (staging_size_)
    size_t staging_size_ = 0;
};

// A loaded model as a host reads it; its sessions share it, so the host may delete the two in any order.
class HostModel {
   public:
    explicit HostModel(HostModelLoader& loader) : model_(loader.finish()), error_(loader.error()) {}

    bool ok() const { return model_ != nullptr; }
    HostError error() const { return error_; }
    std::shared_ptr<const Model> shared() const { return model_; }
    Config config() const { return model_->config(); }
    double weight_bytes() const { return double(model_weight_bytes(*model_)); }
    int threads() const { return model_->n_threads(); }
    std::string weight_types() const { return model_weight_types(*model_); }
    const Vocabulary* vocabulary() const { return model_->vocabulary(); }
    void release_weights();
    // The weights by name, as a GPU host uploads them (model/weights.h): a matrix's description stays while the
    // vectors do, also when the matrices went to a receiver; matrix_rows copies rows into rows() (copy_host_rows)
    // -> their bytes, 0 without them.
    const Linear* matrix(int layer, const std::string& name, bool* tied = nullptr) const;
    size_t matrix_rows(int layer, const std::string& name, int row0, int n_rows, const Linear** m);
    const uint8_t* rows() const { return rows_.get(); }
    const float* vector(int layer, const std::string& name, size_t* n) const;

   private:
    std::shared_ptr<Model> model_;
    HostError error_;
    std::unique_ptr<uint8_t[]> rows_;  // (rows_bytes_) matrix_rows's staging block
    size_t rows_bytes_ = 0;
};

// A score run's ids and what Scorer fills, from the run's start to its result.
struct HostScoreRun {
    std::unique_ptr<int32_t[]> ids;  // (n)
    size_t n = 0;
    int top_k = 0;
    std::unique_ptr<TokenScore[]> scores;        // (n - 1)
    std::unique_ptr<TokenScore[]> alternatives;  // (n - 1, top_k)
};

// One position's distribution as the model gives it (softmax of the raw logits, temperature 1): the log-probability
// of a token (-inf outside the vocabulary) and the top_k likeliest tokens, likeliest first.
struct HostDistribution {
    double logprob = 0.0;
    std::unique_ptr<TokenScore[]> alternatives;  // (top_k)
    int top_k = 0;
};

// One named array of a result as a host reads it in place (floats or ints, n values), or a number (n 0, both null).
struct HostView {
    const char* name;
    size_t n;
    const float* floats;
    const int32_t* ints;
    double number;
};

// A Session with its decoding modes (engine/decoding/) and the buffers a host's calls fill. Its errors are the
// session's, or the constructor's when there is no session (ok() false).
class HostSession {
   public:
    // kv_cache: kv_cache_format_name's; recording: a session whose passes the host runs (Session::create_recording)
    HostSession(std::shared_ptr<const Model> model, bool use_kv_cache, const std::string& kv_cache, bool recording);

    bool ok() const { return session_ != nullptr; }
    HostError error() const { return session_ ? HostError{session_->error_kind(), session_->error()} : error_; }
    Session& session() const { return *session_; }
    size_t n_vocab() const { return n_vocab_; }
    // Session's and Scorer's calls that take and give no host values but these
    int sample() { return session_->sample(); }
    void reset() { session_->reset(); }
    int n_cached() const { return session_->n_cached(); }
    int reused_tokens() const { return session_->reused_tokens(); }
    int batch_rows() const { return session_->batch_rows(); }
    double kv_cache_bytes() const { return double(session_->kv_cache_bytes()); }
    std::string kv_cache() const { return kv_cache_format_name(session_->kv_cache_format()); }
    int feed_score_pass() { return scorer_->feed_pass(); }
    bool score_fed_pass() { return scorer_->score_fed_pass(); }

    bool set_sampling(const HostSampling& sampling);
    // Session::prefill, or prefill_reusing (reuse), and Session::step -> the sampled token, or -1 and error()
    int prefill(const HostArray& ids, bool reuse);
    int step(double id);
    bool feed_prompt(const HostArray& ids, bool reuse);
    bool feed_step(double id);
    // The recorded pass on the CPU (run_recorded_pass_on_cpu) with cpu_model's weights.
    bool run_on_cpu(std::shared_ptr<const Model> cpu_model);

    // A score run, whole (Scorer::score) or pass by pass (Scorer::begin): ids and top_k checked as Scorer::check
    // does before score_run()'s storage is allocated; end_score() frees it.
    bool score(const HostArray& ids, double top_k);
    bool begin_score(const HostArray& ids, double top_k);
    const HostScoreRun& score_run() const { return run_; }
    void end_score() { run_ = HostScoreRun{}; }
    // At the last fed position (row < 0) or at row `row` of the last step_draft(). false when there are no such
    // logits or they are not finite (error() holds the failure that made them), or for a top_k outside [0, n_vocab]
    // or no memory.
    bool distribution(double token, double top_k, double row, HostDistribution* out);

    // Speculation::step of draft's first kMaxDraftTokens -> out (room for kMaxDraftTokens + 1), or -1
    int step_draft(double id, const HostArray& draft, int32_t* out);
    // Speculation::lookup_draft of at most max_draft (and kMaxDraftTokens) ids; 0 for an id that is not a token id
    int lookup_draft(double id, double max_draft, int32_t* draft) const;
    // An inspection (Inspector): the request from the host's lists and top_k ("inspect: layers 1.5 is not an
    // integer in the int32 range"); then Inspector::feed_prompt or feed_step and sample -> the token, or -1 and
    // error(); inspection_views() the results of the last call, by the names the JS API reads (host_api.cpp).
    bool inspect(const HostArray& positions, const HostArray& layers, const HostArray& heads, double top_k,
                 bool logit_lens);
    int inspect_prompt(const HostArray& ids, bool reuse);
    int inspect_step(double id);
    std::vector<HostView> inspection_views() const;
    void end_inspection() { inspector_.reset(); }  // frees its results

    bool fork_from(const HostSession& other) { return Sequences::fork(*session_, *other.session_) >= 0; }
    // Sequences::step of sessions[0..n) (this one first, at most kMaxSequences read; n as the host counted them),
    // each fed ids[i] -> out
    bool step_sequences(HostSession* const* sessions, int n, const HostArray& ids, int32_t* out);

   private:
    bool report(const HostError& error);
    bool prepare_score(const HostArray& ids, double top_k);  // into run_
    bool read_id(double id, const std::string& prefix, int32_t* out);
    bool read_ids(const HostArray& ids);  // into ids_
    int uninspected();                    // -1 and the error of an inspect_ call before inspect()

    std::shared_ptr<const Model> model_;  // kept alive as long as the session
    std::unique_ptr<Session> session_;
    HostError error_;  // why session_ is null
    size_t n_vocab_ = 0;
    std::optional<Speculation> speculation_;
    std::optional<Scorer> scorer_;
    Sequences sequences_;                   // step_sequences's pass, led by this session
    CpuHost cpu_host_;                      // run_on_cpu's weights and run state
    std::unique_ptr<Inspector> inspector_;  // from inspect() to end_inspection()
    HostScoreRun run_;                      // begin_score to end_score
    std::unique_ptr<int32_t[]> ids_;        // (n_ids_) the ids of the last call that took some
    size_t n_ids_ = 0;
};

// A beam search over sessions[0..n) (one per beam, as the host counted them) from a host's settings
// (host_beam_settings), started on the prompt ids; nullptr and *error otherwise.
std::unique_ptr<BeamSearch> host_beam_search(HostSession* const* sessions, int n, double num_beams,
                                             double length_penalty, const std::string& early_stopping,
                                             double max_new_tokens, double eos_token, const HostArray& ids,
                                             HostError* error);

// The engine's constants as one JSON object, so that a host restates none of them: limits { maxSequences,
// maxDraftTokens, maxThreads, maxScoreAlternatives, maxInt, maxFloat, maxInspectTopK }; enums
// { errorKinds, weightFormats, kvCacheFormats, earlyStopping, cacheEvents, samplerStages }, each value's name at its
// code (errorKinds[0] is none, ""); weightNames
// { modelMatrices, layerMatrices, modelVectors, layerVectors } (model/weights.h); gpuCommands { ints, ops,
// activations, matrices, norms, epilogues }, a command's int32s and each code's name (model/forward_ops.h).
std::string host_constants_json();

}  // namespace gpt2
