// The engine's embind binding (web/lib/engine/ wraps it): JS values converted to the engine's types and back, the
// classes registered; the engine decides. C++ exceptions are off in wasm: a failed call returns -1, false or null,
// and error() gives { kind, message }. JS reads the heap only through the views handed out here, valid until its next
// call into the module. The testing build adds session.logits() and testing_hooks.cpp.
#include <emscripten/bind.h>
#include <emscripten/em_asm.h>
#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "gpt2.h"
#include "host/host_api.h"
#include "host/host_numbers.h"
#include "model/allocation.h"
#include "model/forward.h"
#include "model/thread_pool.h"
#include "model/vocabulary.h"
#include "model/weights.h"

using emscripten::val;

namespace {

constexpr int kMaxSequences = gpt2::Sequences::kMaxSequences;

void add_fields(val&) {}
template <typename T, typename... Rest>
void add_fields(val& out, const char* name, const T& value, const Rest&... rest) {
    out.set(name, value);
    add_fields(out, rest...);
}

// A JS object: object("kind", kind, "message", message)
template <typename... Fields>
val object(const Fields&... fields) {
    val out = val::object();
    add_fields(out, fields...);
    return out;
}

val js_error(const gpt2::HostError& error) {
    return object("kind", gpt2::error_kind_name(error.kind), "message", error.message);
}

template <typename T>
val heap_view(size_t n, const T* data) {
    return data ? val(emscripten::typed_memory_view(n, data)) : val::null();
}

template <typename Iterator>
val js_array(Iterator first, Iterator last) {
    val out = val::array();
    for (Iterator it = first; it != last; ++it) out.call<void>("push", val(*it));
    return out;
}

// A JS array's numbers as the engine reads them: it converts each one or names why not (host/host_numbers.h).
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

// SamplingSettings as JS passes them: logitBias as [[token, bias], ...], badWords as [[token, ...], ...].
struct Sampling final : gpt2::HostSampling {
    val logit_bias_pairs = val::array();
    val bad_word_arrays = val::array();

    double logit_bias_length() const override { return logit_bias_pairs["length"].as<double>(); }
    void logit_bias(size_t i, double* token, double* bias) const override {
        *token = logit_bias_pairs[i][0].as<double>();
        *bias = logit_bias_pairs[i][1].as<double>();
    }
    double bad_words_length() const override { return bad_word_arrays["length"].as<double>(); }
    double bad_word_length(size_t i) const override { return JsArray(bad_word_arrays[i]).length(); }
    void read_bad_word(size_t i, double* out, size_t n) const override { JsArray(bad_word_arrays[i]).read(out, n); }
};

// Rows of a matrix as JS reads them: Float32Array, Int8Array, or the block formats' bytes.
val rows_view(gpt2::WeightFormat format, size_t bytes, const void* rows) {
    if (format == gpt2::WeightFormat::fp32) return heap_view(bytes / sizeof(float), static_cast<const float*>(rows));
    if (format == gpt2::WeightFormat::int8) return heap_view(bytes, static_cast<const int8_t*>(rows));
    return heap_view(bytes, static_cast<const uint8_t*>(rows));
}

// The JS function returns '' or the error that stops the load; it must not throw, which would unwind the loader.
class JsMatrixReceiver final : public gpt2::MatrixReceiver {
   public:
    explicit JsMatrixReceiver(val receive) : receive_(std::move(receive)) {}
    bool receive(const gpt2::MatrixRows& r, std::string* error) override {
        const size_t bytes = size_t(r.n_rows) * gpt2::host_row_bytes(r.format, r.n_in);
        *error = receive_(object("layer", r.layer, "name", r.name, "format", gpt2::weight_format_name(r.format), "nOut",
                                 r.n_out, "nIn", r.n_in, "row0", r.row0, "nRows", r.n_rows, "rows",
                                 rows_view(r.format, bytes, r.rows), "scale", heap_view(size_t(r.n_rows), r.scale)))
                     .as<std::string>();
        return error->empty();
    }

   private:
    val receive_;
};

// A gpt2::HostModelLoader with the receiver it hands the matrices to. config_json: null for a GGUF file; receive: null,
// or the function the matrices go to as they load.
class ModelLoader {
   public:
    ModelLoader(const val& config_json, bool int8, double file_size, int n_threads, double staging_bytes, val receive)
        : receiver_(receive.isNull() ? std::nullopt : std::optional<JsMatrixReceiver>(receive)),
          loader_(make(config_json, int8, file_size, n_threads, staging_bytes, receiver_ ? &*receiver_ : nullptr)) {}
    gpt2::HostModelLoader& loader() { return loader_; }

   private:
    static gpt2::HostModelLoader make(const val& config_json, bool int8, double file_size, int n_threads,
                                      double staging_bytes, gpt2::MatrixReceiver* receiver) {
        if (config_json.isNull())
            return gpt2::HostModelLoader(nullptr, false, file_size, n_threads, staging_bytes, receiver);
        const std::string json = config_json.as<std::string>();
        return gpt2::HostModelLoader(&json, int8, file_size, n_threads, staging_bytes, receiver);
    }

    std::optional<JsMatrixReceiver> receiver_;  // before loader_, which holds it
    gpt2::HostModelLoader loader_;
};
val loader_error(ModelLoader& l) { return js_error(l.loader().error()); }
bool loader_ok(ModelLoader& l) { return l.loader().ok(); }
bool feed(ModelLoader& l, double length) { return l.loader().feed(length); }
val staging(ModelLoader& l) { return heap_view(l.loader().staging_size(), l.loader().staging()); }

gpt2::HostModel* make_model(ModelLoader& loader) { return new gpt2::HostModel(loader.loader()); }
val model_error(const gpt2::HostModel& m) { return js_error(m.error()); }
// { tokens, merges, eosTokenId, bosTokenId (or null) } of a GGUF file; null for safetensors
val vocabulary(const gpt2::HostModel& m) {
    const gpt2::Vocabulary* v = m.vocabulary();
    if (!v) return val::null();
    val tokens = val::array(), merges = val::array();
    for (size_t i = 0; i < v->tokens.size(); i++) tokens.set(i, std::string(v->tokens[i]));
    for (size_t i = 0; i < v->merges.size(); i++) merges.set(i, std::string(v->merges[i]));
    return object("tokens", tokens, "merges", merges, "eosTokenId", v->eos_token_id, "bosTokenId",
                  v->has_bos_token_id ? val(v->bos_token_id) : val::null());
}
val matrix(const gpt2::HostModel& model, int layer, const std::string& name) {
    bool tied = false;
    const gpt2::Linear* m = model.matrix(layer, name, &tied);
    if (!m) return val::null();
    const float* scale = m->format == gpt2::WeightFormat::int8 ? m->scale : nullptr;
    return object("format", gpt2::weight_format_name(m->format), "nOut", m->n_out, "nIn", m->n_in, "tied", tied,
                  "scale", heap_view(size_t(m->n_out), scale), "bias", heap_view(size_t(m->n_out), m->bias));
}
val matrix_rows(gpt2::HostModel& model, int layer, const std::string& name, int row0, int n_rows) {
    const gpt2::Linear* m = nullptr;
    const size_t bytes = model.matrix_rows(layer, name, row0, n_rows, &m);
    return bytes ? rows_view(m->format, bytes, model.rows()) : val::null();
}
val vector(const gpt2::HostModel& model, int layer, const std::string& name) {
    size_t n = 0;
    const float* v = model.vector(layer, name, &n);
    return heap_view(n, v);
}

// The calls of a Session (gpt2::HostSession) that cross JS values; the others are registered as they are.
gpt2::HostSession* make_session(const gpt2::HostModel& model, bool use_kv_cache, const std::string& kv_cache,
                                bool recording) {
    return new gpt2::HostSession(model.shared(), use_kv_cache, kv_cache, recording);
}
val session_error(const gpt2::HostSession& s) { return js_error(s.error()); }
bool set_sampling(gpt2::HostSession& s, const Sampling& sampling) { return s.set_sampling(sampling); }
int prefill(gpt2::HostSession& s, const val& ids, bool reuse) { return s.prefill(JsArray(ids), reuse); }
bool feed_prompt(gpt2::HostSession& s, const val& ids, bool reuse) { return s.feed_prompt(JsArray(ids), reuse); }
bool run_on_cpu(gpt2::HostSession& s, const gpt2::HostModel& cpu) { return s.run_on_cpu(cpu.shared()); }

// A recording session's host's views: the commands (forward_ops.h), the window (n_ctx ids), the last token's logits,
// and the pass's rows of logits (null when it has none).
val commands(gpt2::HostSession& s) {
    int n = 0;
    const gpt2::GpuCommand* commands = s.session().recorded_commands(&n);
    return heap_view(size_t(n) * gpt2::kGpuCommandInts, reinterpret_cast<const int32_t*>(commands));
}
val window(gpt2::HostSession& s) { return heap_view(size_t(s.session().model().config().n_ctx), s.session().window()); }
val host_logits(gpt2::HostSession& s) { return heap_view(s.n_vocab(), s.session().host_logits()); }
val all_logits(gpt2::HostSession& s) {
    int n = 0;
    const size_t rows = size_t(gpt2::recorded_logits_rows(s.session().recorded_commands(&n), n));
    return rows ? heap_view(rows * s.n_vocab(), s.session().recorded_all_logits()) : val::null();
}

bool inspect(gpt2::HostSession& s, const val& positions, const val& layers, const val& heads, double top_k, bool lens) {
    return s.inspect(JsArray(positions), JsArray(layers), JsArray(heads), top_k, lens);
}
int inspect_prompt(gpt2::HostSession& s, const val& ids, bool reuse) { return s.inspect_prompt(JsArray(ids), reuse); }
// -> { name: a view of the heap, or a number } (HostSession::inspection_views), valid until the next call
val inspection(const gpt2::HostSession& s) {
    val out = val::object();
    for (const gpt2::HostView& v : s.inspection_views())
        out.set(v.name, v.floats ? heap_view(v.n, v.floats) : v.ints ? heap_view(v.n, v.ints) : val(v.number));
    return out;
}

bool score(gpt2::HostSession& s, const val& ids, double top_k) { return s.score(JsArray(ids), top_k); }
bool begin_score(gpt2::HostSession& s, const val& ids, double top_k) { return s.begin_score(JsArray(ids), top_k); }
// -> { logprobs, ranks, alternatives: [[token, logprob, ...] per scored id] }
val score_result(gpt2::HostSession& s) {
    const gpt2::HostScoreRun& run = s.score_run();
    val logprobs = val::array(), ranks = val::array(), alternatives = val::array();
    for (size_t i = 0, k = size_t(run.top_k); i + 1 < run.n; i++) {
        logprobs.set(i, run.scores[i].logprob);
        ranks.set(i, run.scores[i].rank);
        val row = val::array();
        for (size_t j = 0; j < k; j++) {
            row.set(2 * j, run.alternatives[i * k + j].token);
            row.set(2 * j + 1, run.alternatives[i * k + j].logprob);
        }
        alternatives.set(i, row);
    }
    s.end_score();
    return object("logprobs", logprobs, "ranks", ranks, "alternatives", alternatives);
}

// -> { probability, alternatives: [{ token, probability }] }, or null
val distribution(gpt2::HostSession& s, double token, double top_k, double row) {
    gpt2::HostDistribution d;
    if (!s.distribution(token, top_k, row, &d)) return val::null();
    val alternatives = val::array();
    for (int i = 0; i < d.top_k; i++)
        alternatives.set(i,
                         object("token", d.alternatives[i].token, "probability", std::exp(d.alternatives[i].logprob)));
    return object("probability", std::exp(d.logprob), "alternatives", alternatives);
}

val step_draft(gpt2::HostSession& s, double id, const val& draft) {
    int32_t out[gpt2::Speculation::kMaxDraftTokens + 1];
    const int n = s.step_draft(id, JsArray(draft), out);
    return n < 0 ? val::null() : js_array(out, out + n);
}
val lookup_draft(gpt2::HostSession& s, double id, double max_draft) {
    int32_t draft[gpt2::Speculation::kMaxDraftTokens];
    return js_array(draft, draft + s.lookup_draft(id, max_draft, draft));
}

// JS Session handles (at most kMaxSequences read) -> the array's length, which the engine checks
int read_sessions(const val& handles, gpt2::HostSession** out) {
    const double length = handles["length"].as<double>();
    const int n = length >= 0 && length <= kMaxSequences ? int(length) : kMaxSequences + 1;
    for (int i = 0; i < std::min(n, kMaxSequences); i++)
        out[i] = handles[i].as<gpt2::HostSession*>(emscripten::allow_raw_pointers());
    return n;
}
// sessions: this one first -> their sampled tokens, or null
val step_sequences(gpt2::HostSession& s, const val& sessions, const val& ids) {
    gpt2::HostSession* batch[kMaxSequences] = {&s};
    int32_t out[kMaxSequences];
    const int n = read_sessions(sessions, batch);
    return s.step_sequences(batch, n, JsArray(ids), out) ? js_array(out, out + n) : val::null();
}

#ifdef GPT2_WASM_TESTING
// the last fed position's raw logits (n_vocab), or null when nothing was fed
val logits(gpt2::HostSession& s) {
    return s.session().n_cached() ? heap_view(s.n_vocab(), s.session().logits()) : val::null();
}
#endif

// A beam search over sessions (one per beam, the first given the prompt ids), which must outlive it.
class BeamSearch {
   public:
    // early_stopping: "heuristic", "done" or "never"
    BeamSearch(const val& sessions, double num_beams, double length_penalty, const std::string& early_stopping,
               double max_new_tokens, double eos_token, const val& ids) {
        gpt2::HostSession* beams[kMaxSequences] = {};
        search_ = gpt2::host_beam_search(beams, read_sessions(sessions, beams), num_beams, length_penalty,
                                         early_stopping, max_new_tokens, eos_token, JsArray(ids), &error_);
    }

    bool ok() const { return search_ != nullptr; }
    val error() const { return js_error(search_ ? gpt2::HostError{search_->error_kind(), search_->error()} : error_); }
    int step() { return search_->step(); }  // 1 running, 0 done, -1 error()
    void finish() { search_->finish(); }
    // -> [{ tokens, score, endedByEos }], best first
    val results() const {
        val out = val::array();
        for (const gpt2::BeamHypothesis& h : search_->hypotheses())
            out.call<void>("push", object("tokens", js_array(h.tokens.begin(), h.tokens.end()), "score", h.score,
                                          "endedByEos", h.ended_by_eos));
        return out;
    }

   private:
    std::unique_ptr<gpt2::BeamSearch> search_;
    gpt2::HostError error_;
};

// the sampler's defaults (gpt2::SamplingSettings), as setSampling takes them
Sampling sampling_defaults() { return Sampling(); }

template <typename Class>
void functions(emscripten::class_<Class>&) {}
// c.function(name, method) for each name, method
template <typename Class, typename Method, typename... Rest>
void functions(emscripten::class_<Class>& c, const char* name, Method method, Rest... rest) {
    c.function(name, method);
    functions(c, rest...);
}

// malloc'ed bytes, for leak checks (the memory never shrinks); mallinfo's int read as unsigned stays right to 4 GB
double heap_used_bytes() { return double(static_cast<unsigned>(mallinfo().uordblks)); }
// the wasm memory's size, which never shrinks, so also its peak
double heap_bytes() { return double(__builtin_wasm_memory_size(0)) * 65536.0; }

}  // namespace

EMSCRIPTEN_BINDINGS(gpt2_wasm) {
#ifdef __EMSCRIPTEN_PTHREADS__
    // threads start only on the Web Workers started with the module (gpt2::ThreadPool::limit_workers says why)
    gpt2::ThreadPool::limit_workers(EM_ASM_INT({ return Module['gpt2Workers'] | 0; }));
#endif
    using emscripten::class_;
    using C = gpt2::Config;
    using S = Sampling;
    emscripten::value_object<C> config("Config");
    config.field("n_vocab", &C::n_vocab).field("n_ctx", &C::n_ctx).field("n_embd", &C::n_embd);
    config.field("n_head", &C::n_head)
        .field("n_layer", &C::n_layer)
        .field("layer_norm_epsilon", &C::layer_norm_epsilon);
    emscripten::value_object<S> sampling("SamplingSettings");
    sampling.field("temperature", &S::temperature).field("topK", &S::top_k).field("topP", &S::top_p);
    sampling.field("repetitionPenalty", &S::repetition_penalty).field("minP", &S::min_p);
    sampling.field("typicalP", &S::typical_p).field("noRepeatNgramSize", &S::no_repeat_ngram_size);
    sampling.field("presencePenalty", &S::presence_penalty).field("frequencyPenalty", &S::frequency_penalty);
    sampling.field("logitBias", &S::logit_bias_pairs).field("badWords", &S::bad_word_arrays);
    sampling.field("minNewTokens", &S::min_new_tokens).field("eosToken", &S::eos_token).field("seed", &S::seed);

    class_<ModelLoader> loader("ModelLoader");
    loader.constructor<const val&, bool, double, int, double, val>();
    functions(loader, "ok", &loader_ok, "error", &loader_error, "staging", &staging, "feed", &feed);
    using M = gpt2::HostModel;
    class_<M> model("Model");
    model.constructor(&make_model, emscripten::allow_raw_pointers());
    functions(model, "ok", &M::ok, "error", &model_error, "config", &M::config, "weightBytes", &M::weight_bytes,
              "threads", &M::threads, "weightTypes", &M::weight_types, "vocabulary", &vocabulary, "releaseWeights",
              &M::release_weights, "matrix", &matrix, "matrixRows", &matrix_rows, "vector", &vector);
    using H = gpt2::HostSession;
    class_<H> session("Session");
    session.constructor(&make_session, emscripten::allow_raw_pointers());
    functions(session, "ok", &H::ok, "error", &session_error, "setSampling", &set_sampling, "sample", &H::sample,
              "prefill", &prefill, "step", &H::step, "score", &score, "feedPrompt", &feed_prompt, "feedStep",
              &H::feed_step, "reset", &H::reset, "nCached", &H::n_cached, "reusedTokens", &H::reused_tokens, "kvCache",
              &H::kv_cache, "kvCacheBytes", &H::kv_cache_bytes, "batchRows", &H::batch_rows, "commands", &commands,
              "window", &window, "hostLogits", &host_logits, "allLogits", &all_logits, "runOnCpu", &run_on_cpu,
              "beginScore", &begin_score, "feedScorePass", &H::feed_score_pass, "scoreFedPass", &H::score_fed_pass,
              "scoreResult", &score_result, "distribution", &distribution, "stepDraft", &step_draft, "lookupDraft",
              &lookup_draft, "forkFrom", &H::fork_from, "stepSequences", &step_sequences);
    functions(session, "inspect", &inspect, "inspectPrompt", &inspect_prompt, "inspectStep", &H::inspect_step,
              "inspection", &inspection, "endInspection", &H::end_inspection);
#ifdef GPT2_WASM_TESTING
    session.function("logits", &logits);
#endif
    class_<BeamSearch> beams("BeamSearch");
    beams.constructor<const val&, double, double, const std::string&, double, double, const val&>();
    functions(beams, "ok", &BeamSearch::ok, "error", &BeamSearch::error, "step", &BeamSearch::step, "finish",
              &BeamSearch::finish, "results", &BeamSearch::results);

    emscripten::function("heapUsedBytes", &heap_used_bytes);
    emscripten::function("heapBytes", &heap_bytes);
    emscripten::function("constants", &gpt2::host_constants_json);
    emscripten::function("samplingDefaults", &sampling_defaults);
}
