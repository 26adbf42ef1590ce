// embind bindings of the GPT-2 engine for JavaScript (web/lib/engine/engine.js wraps them in friendlier classes); wasm/
// is the only place that includes Emscripten headers. Nothing here throws (C++ exceptions are off in wasm):
// constructors that can fail leave ok() false, methods return -1 / false, and error() then says
// { kind, message } with the engine's kind (config, file, memory, input); the objects stay usable.
//
// The contract is typed: Config and SamplingSettings cross as value objects, and JS writes the model file into
// a staging block the loader owns (no raw pointers, no malloc from JS). Built with GPT2_WASM_TESTING (the
// testing build, wasm/CMakeLists.txt), it also registers the hooks of wasm/testing_hooks.cpp.
#include "bindings.h"

#include <emscripten/em_asm.h>
#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#include "formats/gguf.h"
#include "kernels/block_formats.h"
#include "kernels/kernels.h"
#include "model/allocation.h"
#include "model/forward.h"
#include "model/forward_ops.h"
#include "model/host_numbers.h"
#include "model/thread_pool.h"
#include "model/weights.h"

using emscripten::val;

namespace {

// A JS Array or typed array as the engine reads a host's numbers (gpt2::HostArray).
class JsArray final : public gpt2::HostArray {
   public:
    explicit JsArray(val array) : array_(std::move(array)) {}
    double length() const override { return array_["length"].as<double>(); }
    void read(double* out, size_t n) const override {
        val(emscripten::typed_memory_view(n, out)).call<void>("set", array_);
    }

   private:
    val array_;
};

}  // namespace

// gpt2::SamplingSettings as JS passes them: the numbers as doubles (gpt2::HostSampling, which converts and checks
// them), logitBias as [[token, bias], ...] and badWords as [[token, ...], ...], read as the conversion reaches them.
struct Sampling final : gpt2::HostSampling {
    val logit_bias_pairs = val::array();
    val bad_word_arrays = val::array();

    double logit_bias_length() const override { return logit_bias_pairs["length"].as<double>(); }
    void logit_bias(size_t i, double* token, double* bias) const override {
        const val pair = logit_bias_pairs[i];
        *token = pair[0].as<double>();
        *bias = pair[1].as<double>();
    }
    double bad_words_length() const override { return bad_word_arrays["length"].as<double>(); }
    double bad_word_length(size_t i) const override { return JsArray(bad_word_arrays[i]).length(); }
    void read_bad_word(size_t i, double* out, size_t n) const override { JsArray(bad_word_arrays[i]).read(out, n); }
};

bool WasmModelLoader::wants_receiver(const val& receive) { return !receive.isNull() && !receive.isUndefined(); }

std::unique_ptr<JsMatrixReceiver> WasmModelLoader::make_receiver(const val& receive) {
    return std::unique_ptr<JsMatrixReceiver>(wants_receiver(receive) ? new (std::nothrow) JsMatrixReceiver(receive)
                                                                     : nullptr);
}

void WasmModelLoader::check_receiver(const val& receive) {
    if (wants_receiver(receive) && !receiver_)
        loader_.report_error(gpt2::ErrorKind::memory,
                             gpt2::out_of_memory_message(sizeof(JsMatrixReceiver), "the matrices' receiver"));
}

gpt2::LoadOptions WasmModelLoader::load_options(bool int8, int n_threads, gpt2::MatrixReceiver* receiver) {
    gpt2::LoadOptions options;
    options.format = int8 ? gpt2::WeightFormat::int8 : gpt2::WeightFormat::fp32;
    options.n_threads = n_threads;
    options.matrix_receiver = receiver;
    return options;
}

bool WasmModelLoader::feed(double length) {
    if (!ok()) return false;
    if (!(length >= 0 && length <= double(staging_size_))) {
        loader_.report_error(gpt2::ErrorKind::input, "feed: " + std::to_string(length) + " bytes do not fit the " +
                                                         std::to_string(staging_size_) + "-byte staging block");
        return false;
    }
    return loader_.feed(staging_.get(), size_t(length));
}

void WasmModelLoader::allocate_staging(double staging_bytes) {
    if (loader_.failed()) return;
    // malloc takes a 32-bit size: a larger request would wrap around to a small one.
    staging_.reset(staging_bytes >= 1 && staging_bytes < 4294967296.0
                       ? static_cast<uint8_t*>(std::malloc(size_t(staging_bytes)))
                       : nullptr);
    if (staging_) staging_size_ = size_t(staging_bytes);
    else
        loader_.report_error(gpt2::ErrorKind::memory,
                             gpt2::out_of_memory_message(uint64_t(staging_bytes), "the loader's staging block"));
}

namespace {

val strings(const gpt2::GgufStringList& list) {
    val out = val::array();
    for (size_t i = 0; i < list.size(); i++) out.call<void>("push", val(std::string(list[i])));
    return out;
}

}  // namespace

val WasmModel::vocabulary() const {
    const gpt2::Vocabulary* vocabulary = model_ ? model_->vocabulary() : nullptr;
    if (!vocabulary) return val::null();
    val out = val::object();
    out.set("tokens", strings(vocabulary->tokens));
    out.set("merges", strings(vocabulary->merges));
    out.set("eosTokenId", vocabulary->eos_token_id);
    out.set("bosTokenId", vocabulary->has_bos_token_id ? val(vocabulary->bos_token_id) : val::null());
    return out;
}

namespace {

const gpt2::Linear* named_matrix(const gpt2::Weights& w, int layer, const std::string& name) {
    if (layer < 0) return name == "wte" ? &w.wte : name == "lm_head" ? &w.lm_head() : nullptr;
    if (layer >= int(w.layers.size())) return nullptr;
    const gpt2::Layer& l = w.layers[size_t(layer)];
    return name == "attn_qkv"    ? &l.attn_qkv
           : name == "attn_proj" ? &l.attn_proj
           : name == "mlp_fc"    ? &l.mlp_fc
           : name == "mlp_proj"  ? &l.mlp_proj
                                 : nullptr;
}

// Bytes of one row of n_in values of a matrix in format, as rows cross to JS: fp32 floats, int8 bytes, or a
// block format's file blocks; 0 for a format with none of these.
size_t row_bytes(gpt2::WeightFormat format, int n_in) {
    if (const gpt2::BlockFormat* block = gpt2::block_format(format))
        return size_t(n_in) / block->values_per_block * block->bytes_per_block;
    if (format == gpt2::WeightFormat::fp32) return size_t(n_in) * sizeof(float);
    return format == gpt2::WeightFormat::int8 ? size_t(n_in) : 0;
}

template <typename T>
val heap_view(size_t n, const T* data) {
    return data ? val(emscripten::typed_memory_view(n, data)) : val::null();
}

}  // namespace

bool JsMatrixReceiver::receive(const gpt2::MatrixRows& r, std::string* error) {
    val rows = val::object();
    rows.set("layer", r.layer);
    rows.set("name", std::string(r.name));
    rows.set("format", std::string(gpt2::weight_format_name(r.format)));
    rows.set("nOut", r.n_out);
    rows.set("nIn", r.n_in);
    rows.set("row0", r.row0);
    rows.set("nRows", r.n_rows);
    const size_t values = size_t(r.n_rows) * size_t(r.n_in);
    if (r.format == gpt2::WeightFormat::fp32) {
        rows.set("rows", heap_view(values, static_cast<const float*>(r.rows)));
    } else if (r.format == gpt2::WeightFormat::int8) {
        rows.set("rows", heap_view(values, static_cast<const int8_t*>(r.rows)));
    } else {
        rows.set("rows",
                 heap_view(size_t(r.n_rows) * row_bytes(r.format, r.n_in), static_cast<const uint8_t*>(r.rows)));
    }
    rows.set("scale", heap_view(size_t(r.n_rows), r.scale));
    const std::string refusal = receive_(rows).as<std::string>();
    if (refusal.empty()) return true;
    *error = refusal;
    return false;
}

// The matrices' descriptions stay while the vectors do: also for a model whose matrices went to a receiver.
val WasmModel::matrix(int layer, const std::string& name) const {
    const gpt2::Linear* m = model_ && model_->weights().memory ? named_matrix(model_->weights(), layer, name) : nullptr;
    if (!m) return val::null();
    val out = val::object();
    out.set("format", std::string(gpt2::weight_format_name(m->format)));
    out.set("nOut", m->n_out);
    out.set("nIn", m->n_in);
    out.set("tied", name == "lm_head" && m == &model_->weights().wte);
    out.set("scale", heap_view(size_t(m->n_out), m->format == gpt2::WeightFormat::int8 ? m->scale : nullptr));
    out.set("bias", heap_view(size_t(m->n_out), m->bias));
    return out;
}

val WasmModel::matrix_rows(int layer, const std::string& name, int row0, int n_rows) const {
    const gpt2::Linear* m = model_ && model_->has_weights() ? named_matrix(model_->weights(), layer, name) : nullptr;
    if (!m || row0 < 0 || n_rows < 1 || row0 > m->n_out - n_rows) return val::null();
    const bool fp32 = m->format == gpt2::WeightFormat::fp32;
    const gpt2::BlockFormat* block = gpt2::block_format(m->format);
    const size_t bytes_per_row = row_bytes(m->format, m->n_in);
    if (bytes_per_row == 0) return val::null();
    const size_t bytes = size_t(n_rows) * bytes_per_row;
    if (bytes > rows_bytes_) {
        rows_.reset(new (std::nothrow) uint8_t[bytes]);
        rows_bytes_ = rows_ ? bytes : 0;
        if (!rows_) return val::null();
    }
    if (block) {
        block->file_rows(rows_.get(), m->weight, m->n_out, m->n_in, row0, n_rows);
        return heap_view(bytes, rows_.get());
    }
    for (int r = 0; r < n_rows; r++) {
        uint8_t* out = rows_.get() + size_t(r) * bytes_per_row;
        if (fp32)
            gpt2::unpack_row(reinterpret_cast<float*>(out), static_cast<const float*>(m->weight), m->n_out, m->n_in,
                             row0 + r);
        else
            gpt2::unpack_row(reinterpret_cast<int8_t*>(out), static_cast<const int8_t*>(m->weight), m->n_out, m->n_in,
                             row0 + r);
    }
    const size_t n = size_t(n_rows) * size_t(m->n_in);
    return fp32 ? heap_view(n, reinterpret_cast<const float*>(rows_.get()))
                : heap_view(n, reinterpret_cast<const int8_t*>(rows_.get()));
}

val WasmModel::vector(int layer, const std::string& name) const {
    if (!model_ || !model_->weights().memory) return val::null();
    const gpt2::Weights& w = model_->weights();
    const size_t C = size_t(model_->config().n_embd);
    if (layer < 0) {
        if (name == "wpe") return heap_view(size_t(model_->config().n_ctx) * C, w.wpe);
        if (name == "ln_f.weight" || name == "ln_f.bias")
            return heap_view(C, name == "ln_f.weight" ? w.ln_f.weight : w.ln_f.bias);
        return val::null();
    }
    if (layer >= int(w.layers.size())) return val::null();
    const gpt2::Layer& l = w.layers[size_t(layer)];
    const gpt2::LayerNorm* norm = name.rfind("ln_1.", 0) == 0   ? &l.ln_1
                                  : name.rfind("ln_2.", 0) == 0 ? &l.ln_2
                                                                : nullptr;
    if (!norm) return val::null();
    const std::string part = name.substr(5);
    return part == "weight" ? heap_view(C, norm->weight) : part == "bias" ? heap_view(C, norm->bias) : val::null();
}

WasmSession::WasmSession(const WasmModel& model, bool use_kv_cache, const std::string& kv_cache, bool recording)
    : model_(model.shared()) {
    gpt2::KvCacheFormat format;
    std::string error;
    if (!model_) constructor_error_ = {"input", "the model failed to load: " + model.error().message};
    else if (!gpt2::parse_kv_cache_format(kv_cache, &format))
        constructor_error_ = {"input", "kvCache must be \"int8\" or \"fp32\", got \"" + kv_cache + "\""};
    else if (recording && format != gpt2::KvCacheFormat::fp32)
        constructor_error_ = {"input", "kvCache \"" + kv_cache +
                                           "\" runs on the CPU only: a WebGPU session keeps an fp32 cache"};
    else if (!(session_ = recording ? gpt2::Session::create_recording(*model_, use_kv_cache, &error)
                                    : gpt2::Session::create(*model_, use_kv_cache, format, &error)))
        constructor_error_ = {"memory", error};  // creating a session fails only for lack of memory
    else n_vocab_ = size_t(model_->config().n_vocab);
}

BindingError WasmSession::error() const {
    return session_ ? BindingError{gpt2::error_kind_name(session_->error_kind()), session_->error()}
                    : constructor_error_;
}

bool WasmSession::set_sampling(const Sampling& sampling) {
    if (!session_) return false;
    gpt2::SamplingSettings settings;
    gpt2::HostError error;
    if (gpt2::host_sampling_settings(sampling, &settings, &error)) return session_->set_sampling(std::move(settings));
    session_->report_error(error.kind, error.message);
    return false;
}

bool WasmSession::read_ids(const val& ids, TokenIds* out) {
    gpt2::HostError error;
    if (gpt2::host_token_ids(JsArray(ids), n_vocab_, &out->ids, &out->n, &error)) return true;
    session_->report_error(error.kind, error.message);
    return false;
}

bool WasmSession::read_id(double id, const std::string& prefix, int32_t* out) {
    const std::string refusal = gpt2::token_id_refusal(id, n_vocab_, out);
    if (!refusal.empty()) session_->report_error(gpt2::ErrorKind::input, prefix + refusal);
    return refusal.empty();
}

template <int (gpt2::Session::*prefill_ids)(const int32_t*, size_t)>
int WasmSession::prefill(const val& ids) {
    TokenIds tokens;
    if (!session_ || !read_ids(ids, &tokens)) return -1;
    return (session_.get()->*prefill_ids)(tokens.ids.get(), tokens.n);
}

bool WasmSession::feed_prompt(const val& ids, bool reuse) {
    TokenIds tokens;
    return session_ && read_ids(ids, &tokens) && session_->feed_prompt(tokens.ids.get(), tokens.n, reuse);
}

int WasmSession::step(double id) {
    int32_t token = 0;
    return session_ && read_id(id, "", &token) ? session_->step(token) : -1;
}

bool WasmSession::feed_step(double id) {
    int32_t token = 0;
    return session_ && read_id(id, "", &token) && session_->feed_step(token);
}

val WasmSession::commands() const {
    int n = 0;
    const gpt2::GpuCommand* commands = session_ ? session_->recorded_commands(&n) : nullptr;
    return heap_view(size_t(n) * gpt2::kGpuCommandInts, reinterpret_cast<const int32_t*>(commands));
}

val WasmSession::window() const {
    return session_ ? heap_view(size_t(model_->config().n_ctx), session_->window()) : val::null();
}

val WasmSession::all_logits() const {
    int n = 0;
    const gpt2::GpuCommand* commands = session_ ? session_->recorded_commands(&n) : nullptr;
    size_t rows = 0;
    for (int i = 0; i < n; i++)
        if (commands[i].logits_row >= 0) rows = std::max(rows, size_t(commands[i].logits_row + commands[i].n));
    return rows ? heap_view(rows * n_vocab_, session_->recorded_all_logits()) : val::null();
}

bool WasmSession::run_on_cpu(const WasmModel& cpu_model) {
    if (!session_ || !session_->recording() || session_->n_cached() == 0) return false;
    int n = 0;
    const gpt2::GpuCommand* commands = session_->recorded_commands(&n);
    if (!cpu_host_) {
        const std::shared_ptr<const gpt2::Model> weights = cpu_model.shared();
        const gpt2::Config &c = model_->config(), *w = weights ? &weights->config() : nullptr;
        if (!w || !weights->has_weights() || w->n_vocab != c.n_vocab || w->n_ctx != c.n_ctx || w->n_embd != c.n_embd ||
            w->n_layer != c.n_layer || w->n_head != c.n_head) {
            session_->report_error(gpt2::ErrorKind::input,
                                   "run_on_cpu: the CPU model has no weights or another shape than the session's");
            return false;
        }
        std::string error;
        cpu_host_.reset(new (std::nothrow) gpt2::RunState());
        if (!cpu_host_ || !gpt2::create_run_state(c, gpt2::KvCacheFormat::fp32, false, cpu_host_.get(), &error)) {
            cpu_host_.reset();
            session_->report_error(gpt2::ErrorKind::memory, error.empty() ? "out of memory: the CPU run state" : error);
            return false;
        }
        cpu_model_ = weights;
        // The GPU's cache is gone: the positions before the pass (its embedding's first) from the window.
        const int pass_pos0 = n > 0 ? commands[0].pos0 : 0;
        if (pass_pos0 > 0) gpt2::forward(*cpu_model_, cpu_host_.get(), session_->window(), pass_pos0, 0, nullptr);
    }
    gpt2::replay(*cpu_model_, cpu_host_.get(), commands, n, session_->window(), session_->recorded_all_logits(),
                 session_->host_logits());
    return true;
}

val WasmSession::host_logits() { return session_ ? heap_view(n_vocab_, session_->host_logits()) : val::null(); }

val WasmSession::score(const val& ids, double top_k) {
    if (!allocate_scores(ids, top_k)) return val::null();
    const bool scored =
        session_->score(score_ids_.get(), n_score_ids_, score_top_k_, scores_.get(), score_alternatives_.get());
    return scored ? score_result() : val::null();
}

bool WasmSession::begin_score(const val& ids, double top_k) {
    return allocate_scores(ids, top_k) && session_->begin_score(score_ids_.get(), n_score_ids_, score_top_k_,
                                                                scores_.get(), score_alternatives_.get());
}

bool WasmSession::allocate_scores(const val& ids, double top_k) {
    if (!session_) return false;
    score_ids_.reset();
    scores_.reset();
    score_alternatives_.reset();
    n_score_ids_ = n_scored_ = 0;
    score_top_k_ = 0;
    int k = 0;
    std::string error;
    if (!gpt2::host_top_k(top_k, n_vocab_, "score", &k, &error)) {
        session_->report_error(gpt2::ErrorKind::input, error);
        return false;
    }
    // the engine's bounds on the ids and the alternatives, before anything is allocated
    const double length = ids["length"].as<double>();
    error = gpt2::array_length_refusal(length, "score: the token ids");
    if (!error.empty()) {
        session_->report_error(gpt2::ErrorKind::input, error);
        return false;
    }
    if (!session_->check_score(size_t(length), k)) return false;
    TokenIds tokens;
    if (!read_ids(ids, &tokens)) return false;
    // n_scored x top_k <= kMaxScoreAlternatives: the sizes below are small enough for 64 bits and array_bytes
    const uint64_t n_scored = tokens.n - 1, n_alternatives = n_scored * uint64_t(k);
    scores_.reset(gpt2::allocate_array<gpt2::TokenScore>(n_scored + 1));
    score_alternatives_.reset(scores_ ? gpt2::allocate_array<gpt2::TokenScore>(n_alternatives + 1) : nullptr);
    if (!scores_ || !score_alternatives_) {
        scores_.reset();
        session_->report_error(gpt2::ErrorKind::memory,
                               gpt2::out_of_memory_message((n_scored + n_alternatives) * sizeof(gpt2::TokenScore),
                                                           "the scores"));
        return false;
    }
    score_ids_ = std::move(tokens.ids);
    n_score_ids_ = tokens.n;
    n_scored_ = size_t(n_scored);
    score_top_k_ = k;
    return true;
}

val WasmSession::score_result() {
    val logprobs = val::array(), ranks = val::array(), alternative_rows = val::array();
    for (size_t i = 0; i < n_scored_; i++) {
        logprobs.set(i, scores_[i].logprob);
        ranks.set(i, scores_[i].rank);
        val row = val::array();
        for (int k = 0; k < score_top_k_; k++) {
            const gpt2::TokenScore& alternative = score_alternatives_[i * size_t(score_top_k_) + size_t(k)];
            row.set(2 * k, alternative.token);
            row.set(2 * k + 1, alternative.logprob);
        }
        alternative_rows.set(i, row);
    }
    score_ids_.reset();
    scores_.reset();
    score_alternatives_.reset();
    n_score_ids_ = n_scored_ = 0;
    val out = val::object();
    out.set("logprobs", logprobs);
    out.set("ranks", ranks);
    out.set("alternatives", alternative_rows);
    return out;
}

// The model's own distribution at the last fed position (gpt2::score_logits: softmax of the raw logits,
// temperature 1, no penalty): { probability: p(token), 0 for a token outside the vocabulary, alternatives:
// [{ token, probability }] } with the top_k likeliest tokens, likeliest first; or null when nothing has been fed
// or the logits are not finite (error() then holds the failure of the call that produced them).
val WasmSession::step_draft(double id, const val& draft) {
    if (!session_) return val::null();
    int32_t token = 0, drafted[gpt2::Session::kMaxDraftTokens], out[gpt2::Session::kMaxDraftTokens + 1];
    const double length = draft["length"].as<double>();
    // the engine verifies at most kMaxDraftTokens: only those cross
    const int k = length >= 0.0 ? int(std::min(length, double(gpt2::Session::kMaxDraftTokens))) : 0;
    if (!read_id(id, "step_draft: ", &token)) return val::null();
    for (int i = 0; i < k; i++)
        if (!read_id(draft[i].as<double>(), "step_draft: ", &drafted[i])) return val::null();
    const int n = session_->step_draft(token, drafted, k, out);
    if (n < 0) return val::null();
    val tokens = val::array();
    for (int i = 0; i < n; i++) tokens.set(i, out[i]);
    return tokens;
}

void WasmSession::add_sequence(double index, WasmSession& sequence, double id) {
    if (!gpt2::is_count(index) || index >= gpt2::Session::kMaxSequences || int(index) > n_queued_ ||
        !sequence.session_) {
        n_queued_ = gpt2::Session::kMaxSequences + 1;  // step_sequences() refuses the batch
        return;
    }
    queued_[int(index)] = sequence.session_.get();
    queued_ids_[int(index)] = id;  // checked by step_sequences(), which reports it
    n_queued_ = int(index) + 1;
}

val WasmSession::step_sequences() {
    const int n = n_queued_;
    n_queued_ = 0;
    if (!session_) return val::null();
    if (n > gpt2::Session::kMaxSequences || n == 0 || queued_[0] != session_.get()) {
        session_->report_error(gpt2::ErrorKind::input, "step_sequences: queue this session first and at most " +
                                                           std::to_string(gpt2::Session::kMaxSequences) +
                                                           " live sessions");
        return val::null();
    }
    int32_t ids[gpt2::Session::kMaxSequences], out[gpt2::Session::kMaxSequences];
    for (int i = 0; i < n; i++)
        if (!read_id(queued_ids_[i], "sequence " + std::to_string(i) + ": ", &ids[i])) return val::null();
    if (!gpt2::Session::step_sequences(queued_, ids, n, out)) return val::null();
    val tokens = val::array();
    for (int i = 0; i < n; i++) tokens.set(i, out[i]);
    return tokens;
}

bool WasmSession::begin_beams(double num_beams, double length_penalty, const std::string& early_stopping,
                              double max_new_tokens, double eos_token, const val& ids) {
    const int n = n_queued_;
    n_queued_ = 0;
    beams_.reset();
    if (!session_) return false;
    gpt2::BeamSettings settings;
    std::string error;
    if (gpt2::host_beam_settings(num_beams, length_penalty, early_stopping, max_new_tokens, eos_token, &settings,
                                 &error) &&
        (n != settings.num_beams || queued_[0] != session_.get()))
        error = "beam search: queue this session first, then one session per beam";
    if (!error.empty()) {
        session_->report_error(gpt2::ErrorKind::input, error);
        return false;
    }
    gpt2::ErrorKind kind = gpt2::ErrorKind::none;
    beams_ = gpt2::BeamSearch::create(queued_, settings, &error, &kind);
    if (!beams_) {
        session_->report_error(kind, error);
        return false;
    }
    TokenIds tokens;
    if (!read_ids(ids, &tokens)) {
        beams_.reset();
        return false;
    }
    if (beams_->start(tokens.ids.get(), tokens.n)) return true;
    session_->report_error(beams_->error_kind(), beams_->error());
    beams_.reset();
    return false;
}

int WasmSession::step_beams() {
    if (!session_ || !beams_) return -1;
    const int status = beams_->step();
    if (status < 0) session_->report_error(beams_->error_kind(), beams_->error());
    return status;
}

val WasmSession::beam_results() const {
    val out = val::array();
    if (!beams_) return out;
    const std::vector<gpt2::BeamHypothesis>& hypotheses = beams_->hypotheses();
    for (size_t i = 0; i < hypotheses.size(); i++) {
        val tokens = val::array();
        for (size_t j = 0; j < hypotheses[i].tokens.size(); j++) tokens.set(j, hypotheses[i].tokens[j]);
        val h = val::object();
        h.set("tokens", tokens);
        h.set("score", hypotheses[i].score);
        h.set("endedByEos", hypotheses[i].ended_by_eos);
        out.set(i, h);
    }
    return out;
}

val WasmSession::lookup_draft(double id, double max_draft) const {
    int32_t token = 0, draft[gpt2::Session::kMaxDraftTokens];
    // asking for more than kMaxDraftTokens gets at most that many, as asking for more than the context repeats gives
    const int most = max_draft >= 0.0 ? int(std::min(max_draft, double(gpt2::Session::kMaxDraftTokens))) : 0;
    const int n = session_ && gpt2::token_id_refusal(id, n_vocab_, &token).empty()
                      ? session_->lookup_draft(token, most, draft)
                      : 0;
    val tokens = val::array();
    for (int i = 0; i < n; i++) tokens.set(i, draft[i]);
    return tokens;
}

val WasmSession::distribution(double token, double top_k, double row) {
    const float* logits = !session_ || session_->n_cached() == 0 ? nullptr
                          : row < 0.0                            ? session_->logits()
                          : gpt2::is_int32(row)                  ? session_->verified_logits(int(row))
                                                                 : nullptr;
    if (!logits) return val::null();
    const int n_vocab = int(n_vocab_);
    int k = 0;
    std::string error;
    if (!gpt2::host_top_k(top_k, n_vocab_, "distribution", &k, &error)) {
        session_->report_error(gpt2::ErrorKind::input, error);
        return val::null();
    }
    const bool in_vocabulary = token >= 0.0 && token < double(n_vocab) && token == std::floor(token);
    gpt2::TokenScore score{};
    // Not a std::vector: its failed allocation would abort the instance.
    std::unique_ptr<gpt2::TokenScore[]> alternatives(gpt2::allocate_array<gpt2::TokenScore>(uint64_t(k) + 1));
    if (!alternatives) {
        session_->report_error(gpt2::ErrorKind::memory,
                               gpt2::out_of_memory_message(size_t(k) * sizeof(gpt2::TokenScore), "the alternatives"));
        return val::null();
    }
    if (!gpt2::score_logits(logits, n_vocab, in_vocabulary ? int32_t(token) : 0, k, in_vocabulary ? &score : nullptr,
                            alternatives.get()))
        return val::null();
    val out = val::object();
    out.set("probability", in_vocabulary ? std::exp(score.logprob) : 0.0);
    val rows = val::array();
    for (int i = 0; i < k; i++) {
        val alternative = val::object();
        alternative.set("token", alternatives[i].token);
        alternative.set("probability", std::exp(alternatives[i].logprob));
        rows.call<void>("push", alternative);
    }
    out.set("alternatives", rows);
    return out;
}

namespace {

// Bytes currently allocated by malloc: lets tests check that create/dispose cycles leak nothing, and the
// benchmark measure a model (the wasm memory itself never shrinks, so its size cannot tell). mallinfo's fields
// are int: read as unsigned, they stay right up to the 4 GB heap (GPT-2 1.5B as int8 with its KV cache uses
// over 2 GB).
double heap_used_bytes() { return double(static_cast<unsigned>(mallinfo().uordblks)); }

// The wasm memory's size, which never shrinks, so also its peak so far (the benchmark's peak memory, measured on
// the shipped build).
double heap_bytes() { return double(__builtin_wasm_memory_size(0)) * 65536.0; }

// The engine's limits, stated once in the engine (engine/gpt2.h, model/thread_pool.h) and read here by JS, which
// bounds its options by them: { maxSequences, maxDraftTokens, maxThreads, maxScoreAlternatives, maxInt, maxFloat }.
val limits() {
    val out = val::object();
    out.set("maxSequences", gpt2::Session::kMaxSequences);
    out.set("maxDraftTokens", gpt2::Session::kMaxDraftTokens);
    out.set("maxThreads", gpt2::ThreadPool::kMaxThreads);
    out.set("maxScoreAlternatives", gpt2::Session::kMaxScoreAlternatives);
    out.set("maxInt", gpt2::kMaxInt);
    out.set("maxFloat", double(gpt2::kMaxFloat));
    return out;
}

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
        .field("minP", &Sampling::min_p)
        .field("typicalP", &Sampling::typical_p)
        .field("noRepeatNgramSize", &Sampling::no_repeat_ngram_size)
        .field("presencePenalty", &Sampling::presence_penalty)
        .field("frequencyPenalty", &Sampling::frequency_penalty)
        .field("logitBias", &Sampling::logit_bias_pairs)
        .field("badWords", &Sampling::bad_word_arrays)
        .field("minNewTokens", &Sampling::min_new_tokens)
        .field("eosToken", &Sampling::eos_token)
        .field("seed", &Sampling::seed);

    emscripten::class_<WasmModelLoader>("ModelLoader")
        .constructor<const std::string&, bool, double, int, double, val>()
        .constructor<double, int, double, val>()
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
        .function("vocabulary", &WasmModel::vocabulary)
        .function("matrix", &WasmModel::matrix)
        .function("matrixRows", &WasmModel::matrix_rows)
        .function("vector", &WasmModel::vector)
        .function("releaseWeights", &WasmModel::release_weights);

    emscripten::class_<WasmSession> session("Session");
    session.constructor<const WasmModel&, bool, const std::string&, bool>()
        .function("ok", &WasmSession::ok)
        .function("error", &WasmSession::error)
        .function("setSampling", &WasmSession::set_sampling)
        .function("prefill", &WasmSession::prefill<&gpt2::Session::prefill>)
        .function("prefillReusing", &WasmSession::prefill<&gpt2::Session::prefill_reusing>)
        .function("reusedTokens", &WasmSession::reused_tokens)
        .function("step", &WasmSession::step)
        .function("feedPrompt", &WasmSession::feed_prompt)
        .function("feedStep", &WasmSession::feed_step)
        .function("sample", &WasmSession::sample)
        .function("batchRows", &WasmSession::batch_rows)
        .function("commands", &WasmSession::commands)
        .function("window", &WasmSession::window)
        .function("hostLogits", &WasmSession::host_logits)
        .function("runOnCpu", &WasmSession::run_on_cpu)
        .function("score", &WasmSession::score)
        .function("beginScore", &WasmSession::begin_score)
        .function("feedScorePass", &WasmSession::feed_score_pass)
        .function("scoreFedPass", &WasmSession::score_fed_pass)
        .function("scoreResult", &WasmSession::score_result)
        .function("allLogits", &WasmSession::all_logits)
        .function("distribution", &WasmSession::distribution)
        .function("stepDraft", &WasmSession::step_draft)
        .function("lookupDraft", &WasmSession::lookup_draft)
        .function("forkFrom", &WasmSession::fork_from)
        .function("addSequence", &WasmSession::add_sequence)
        .function("stepSequences", &WasmSession::step_sequences)
        .function("beginBeams", &WasmSession::begin_beams)
        .function("stepBeams", &WasmSession::step_beams)
        .function("finishBeams", &WasmSession::finish_beams)
        .function("beamResults", &WasmSession::beam_results)
        .function("endBeams", &WasmSession::end_beams)
        .function("reset", &WasmSession::reset)
        .function("nCached", &WasmSession::n_cached)
        .function("kvCacheBytes", &WasmSession::kv_cache_bytes)
        .function("kvCache", &WasmSession::kv_cache);

    emscripten::function("heapUsedBytes", &heap_used_bytes);
    emscripten::function("heapBytes", &heap_bytes);
    emscripten::function("limits", &limits);

#ifdef GPT2_WASM_TESTING
    register_testing_hooks(session);
#endif
}
