// host_api.h: each host value checked before anything is allocated, in the order the host's arguments come.
#include "host/host_api.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "model/allocation.h"
#include "model/forward_ops.h"
#include "model/thread_pool.h"
#include "model/weights.h"

namespace gpt2 {

namespace {

LoadOptions load_options(bool int8, int n_threads, MatrixReceiver* receiver) {
    LoadOptions options;
    options.format = int8 ? WeightFormat::int8 : WeightFormat::fp32;
    options.n_threads = n_threads;
    options.matrix_receiver = receiver;
    return options;
}

uint64_t file_size_of(double file_size) { return file_size < 0 ? ModelLoader::kUnknownFileSize : uint64_t(file_size); }

}  // namespace

HostModelLoader::HostModelLoader(const std::string* config_json, bool int8, double file_size, int n_threads,
                                 double staging_bytes, MatrixReceiver* receiver)
    : loader_(config_json ? ModelLoader(reinterpret_cast<const uint8_t*>(config_json->data()), config_json->size(),
                                        load_options(int8, n_threads, receiver), file_size_of(file_size))
                          : ModelLoader(load_options(int8, n_threads, receiver), file_size_of(file_size))) {
    // allocate_array refuses what a 32-bit size_t would wrap around
    if (ok() && staging_bytes >= 1) staging_.reset(allocate_array<uint8_t>(uint64_t(staging_bytes)));
    if (staging_) staging_size_ = size_t(staging_bytes);
    else if (ok())
        loader_.report_error(ErrorKind::memory,
                             out_of_memory_message(uint64_t(staging_bytes), "the loader's staging block"));
}

bool HostModelLoader::feed(double length) {
    if (ok() && !(length >= 0 && length <= double(staging_size_)))
        loader_.report_error(ErrorKind::input, "feed: " + std::to_string(length) + " bytes do not fit the " +
                                                   std::to_string(staging_size_) + "-byte staging block");
    return ok() && loader_.feed(staging_.get(), size_t(length));
}

void HostModel::release_weights() {
    model_->release_weights();
    rows_.reset();
    rows_bytes_ = 0;
}

const Linear* HostModel::matrix(int layer, const std::string& name, bool* tied) const {
    return model_->weights().memory ? find_matrix(model_->weights(), layer, name, tied) : nullptr;
}

size_t HostModel::matrix_rows(int layer, const std::string& name, int row0, int n_rows, const Linear** m) {
    *m = model_->has_weights() ? find_matrix(model_->weights(), layer, name) : nullptr;
    return *m ? copy_host_rows(**m, row0, n_rows, &rows_, &rows_bytes_) : 0;
}

const float* HostModel::vector(int layer, const std::string& name, size_t* n) const {
    const Weights& w = model_->weights();
    return w.memory ? find_vector(w, model_->config(), layer, name, n) : nullptr;
}

HostSession::HostSession(std::shared_ptr<const Model> model, bool use_kv_cache, const std::string& kv_cache,
                         bool recording)
    : model_(std::move(model)), error_{ErrorKind::input, "the model failed to load"} {
    if (model_) session_ = host_session(*model_, use_kv_cache, kv_cache, recording, &error_);
    if (!session_) return;
    n_vocab_ = size_t(model_->config().n_vocab);
    speculation_.emplace(*session_);
    scorer_.emplace(*session_);
}

bool HostSession::report(const HostError& error) {
    session_->report_error(error.kind, error.message);
    return false;
}

bool HostSession::read_id(double id, const std::string& prefix, int32_t* out) {
    const std::string refusal = token_id_refusal(id, n_vocab_, out);
    return refusal.empty() || report({ErrorKind::input, prefix + refusal});
}

bool HostSession::read_ids(const HostArray& ids) {
    HostError error;
    return host_token_ids(ids, n_vocab_, &ids_, &n_ids_, &error) || report(error);
}

bool HostSession::set_sampling(const HostSampling& sampling) {
    SamplingSettings settings;
    HostError error;
    return host_sampling_settings(sampling, &settings, &error) ? session_->set_sampling(std::move(settings))
                                                               : report(error);
}

int HostSession::prefill(const HostArray& ids, bool reuse) {
    if (!read_ids(ids)) return -1;
    return reuse ? session_->prefill_reusing(ids_.get(), n_ids_) : session_->prefill(ids_.get(), n_ids_);
}

int HostSession::step(double id) {
    int32_t token = 0;
    return read_id(id, "", &token) ? session_->step(token) : -1;
}

bool HostSession::feed_prompt(const HostArray& ids, bool reuse) {
    return read_ids(ids) && session_->feed_prompt(ids_.get(), n_ids_, reuse);
}

bool HostSession::feed_step(double id) {
    int32_t token = 0;
    return read_id(id, "", &token) && session_->feed_step(token);
}

bool HostSession::run_on_cpu(std::shared_ptr<const Model> cpu_model) {
    return run_recorded_pass_on_cpu(session_.get(), cpu_model, &cpu_host_);
}

bool HostSession::score(const HostArray& ids, double top_k) {
    HostScoreRun& run = run_;
    return prepare_score(ids, top_k) &&
           scorer_->score(run.ids.get(), run.n, run.top_k, run.scores.get(), run.alternatives.get());
}

bool HostSession::begin_score(const HostArray& ids, double top_k) {
    HostScoreRun& run = run_;
    return prepare_score(ids, top_k) &&
           scorer_->begin(run.ids.get(), run.n, run.top_k, run.scores.get(), run.alternatives.get());
}

bool HostSession::prepare_score(const HostArray& ids, double top_k) {
    HostScoreRun& run = run_;
    run = HostScoreRun{};
    HostError error{ErrorKind::input, ""};
    const double length = ids.length();
    if (!host_top_k(top_k, n_vocab_, "score", &run.top_k, &error.message)) return report(error);
    error.message = array_length_refusal(length, "score: the token ids");
    if (!error.message.empty()) return report(error);
    if (!scorer_->check(size_t(length), run.top_k)) return false;
    if (!host_token_ids(ids, n_vocab_, &run.ids, &run.n, &error)) return report(error);
    // n_scored x top_k <= kMaxScoreAlternatives (check): small enough for 64 bits and array_bytes
    const uint64_t n_scored = run.n - 1, n_alternatives = n_scored * uint64_t(run.top_k);
    run.scores.reset(allocate_array<TokenScore>(n_scored + 1));
    run.alternatives.reset(run.scores ? allocate_array<TokenScore>(n_alternatives + 1) : nullptr);
    if (!run.alternatives) {
        end_score();
        const uint64_t bytes = (n_scored + n_alternatives) * sizeof(TokenScore);
        return report({ErrorKind::memory, out_of_memory_message(bytes, "the scores")});
    }
    return true;
}

bool HostSession::inspect(const HostArray& positions, const HostArray& layers, const HostArray& heads, double top_k,
                          bool logit_lens) {
    const Config& c = model_->config();
    InspectionRequest request;
    HostError error;
    if (!host_int32s(positions, "inspect: positions", size_t(c.n_ctx), &request.positions, &error) ||
        !host_int32s(layers, "inspect: layers", size_t(c.n_layer), &request.layers, &error) ||
        !host_int32s(heads, "inspect: heads", size_t(c.n_head), &request.heads, &error))
        return report(error);
    if (!is_int32(top_k)) return report({ErrorKind::input, "inspect: topK " + js_number(top_k) + " is not an integer"});
    request.top_k = int(top_k);
    request.logit_lens = logit_lens;
    if (!inspector_) inspector_.reset(new (std::nothrow) Inspector(*session_));
    if (!inspector_) return report({ErrorKind::memory, out_of_memory_message(sizeof(Inspector), "the inspection")});
    return inspector_->configure(request);
}

int HostSession::uninspected() {
    report({ErrorKind::input, "inspect: no inspection was asked for"});
    return -1;
}

int HostSession::inspect_prompt(const HostArray& ids, bool reuse) {
    if (!inspector_) return uninspected();
    return read_ids(ids) && inspector_->feed_prompt(ids_.get(), n_ids_, reuse) ? inspector_->sample() : -1;
}

int HostSession::inspect_step(double id) {
    if (!inspector_) return uninspected();
    int32_t token = 0;
    return read_id(id, "", &token) && inspector_->feed_step(token) ? inspector_->sample() : -1;
}

std::vector<HostView> HostSession::inspection_views() const {
    if (!inspector_) return {};
    const Inspector& in = *inspector_;
    const InspectionRequest& r = in.request();
    const Config& c = model_->config();
    const size_t P = size_t(in.n_positions()), L = r.layers.size(), H = r.heads.size(), K = size_t(r.top_k),
                 hs = size_t(c.n_embd / c.n_head), S = SamplerTrace::kStages;
    const SamplerTrace& t = in.trace();
    static_assert(sizeof(CacheEvent) == 3 * sizeof(int32_t), "an event is read as 3 int32s");
    return {
        {"positions", P, nullptr, in.positions(), 0},
        {"rowStride", 0, nullptr, nullptr, double(in.row_stride())},
        {"attention", P * L * H * size_t(in.row_stride()), in.attention(), nullptr, 0},
        {"lensTokens", P * L * K, nullptr, in.lens_tokens(), 0},
        {"lensLogits", P * L * K, in.lens_logits(), nullptr, 0},
        {"lensProbabilities", P * L * K, in.lens_probabilities(), nullptr, 0},
        {"blocks", P * L * 3, in.blocks(), nullptr, 0},
        {"qkvNorms", P * L * H * 3, in.qkv_norms(), nullptr, 0},
        {"kvRows", P * L * H * 2 * hs, in.kv_rows(), nullptr, 0},
        {"events", size_t(in.n_events()) * 3, nullptr, reinterpret_cast<const int32_t*>(in.events()), 0},
        {"nCached", 0, nullptr, nullptr, double(session_->n_cached())},
        {"kvCacheBytes", 0, nullptr, nullptr, double(session_->kv_cache_bytes())},
        {"stageRan", S, nullptr, t.ran, 0},
        {"stageCandidates", S, nullptr, t.candidates, 0},
        {"stageTopCount", S, nullptr, t.n_top, 0},
        {"stageTop", S * K, nullptr, t.top, 0},
        {"stageValues", S * K, t.values, nullptr, 0},
        {"token", 0, nullptr, nullptr, double(t.token)},
        {"probability", 0, nullptr, nullptr, double(t.probability)},
        {"draw", 0, nullptr, nullptr, double(t.draw)},
    };
}

bool HostSession::distribution(double token, double top_k, double row, HostDistribution* out) {
    const float* logits = session_->n_cached() == 0 ? nullptr
                          : row < 0.0               ? session_->logits()
                          : is_int32(row)           ? speculation_->verified_logits(int(row))
                                                    : nullptr;
    if (!logits) return false;
    HostError error{ErrorKind::input, ""};
    if (!host_top_k(top_k, n_vocab_, "distribution", &out->top_k, &error.message)) return report(error);
    const bool in_vocabulary = token >= 0.0 && token < double(n_vocab_) && token == std::floor(token);
    out->alternatives.reset(allocate_array<TokenScore>(uint64_t(out->top_k) + 1));
    if (!out->alternatives) {
        const uint64_t bytes = uint64_t(out->top_k) * sizeof(TokenScore);
        return report({ErrorKind::memory, out_of_memory_message(bytes, "the alternatives")});
    }
    TokenScore score{};
    if (!score_logits(logits, int(n_vocab_), in_vocabulary ? int32_t(token) : 0, out->top_k,
                      in_vocabulary ? &score : nullptr, out->alternatives.get()))
        return false;
    out->logprob = in_vocabulary ? score.logprob : -std::numeric_limits<double>::infinity();
    return true;
}

int HostSession::step_draft(double id, const HostArray& draft, int32_t* out) {
    int32_t token = 0;
    if (!read_id(id, "step_draft: ", &token) || !read_ids(draft)) return -1;
    return speculation_->step(token, ids_.get(), int(std::min(n_ids_, size_t(Speculation::kMaxDraftTokens))), out);
}

int HostSession::lookup_draft(double id, double max_draft, int32_t* draft) const {
    int32_t token = 0;
    const int most = max_draft >= 0.0 ? int(std::min(max_draft, double(Speculation::kMaxDraftTokens))) : 0;
    return token_id_refusal(id, n_vocab_, &token).empty() ? speculation_->lookup_draft(token, most, draft) : 0;
}

bool HostSession::step_sequences(HostSession* const* sessions, int n, const HostArray& ids, int32_t* out) {
    Session* batch[Sequences::kMaxSequences] = {session_.get()};
    for (int i = 0; i < std::min(n, Sequences::kMaxSequences); i++) batch[i] = sessions[i]->session_.get();
    if (!read_ids(ids)) return false;
    if (n_ids_ != size_t(std::max(n, 0)))
        return report({ErrorKind::input, "step_sequences: " + std::to_string(n_ids_) + " token ids for " +
                                             std::to_string(n) + " sequences"});
    return sequences_.step(batch, ids_.get(), n, out);
}

std::unique_ptr<BeamSearch> host_beam_search(HostSession* const* sessions, int n, double num_beams,
                                             double length_penalty, const std::string& early_stopping,
                                             double max_new_tokens, double eos_token, const HostArray& ids,
                                             HostError* error) {
    BeamSettings settings;
    *error = {ErrorKind::input, ""};
    if (!host_beam_settings(num_beams, length_penalty, early_stopping, max_new_tokens, eos_token, &settings,
                            &error->message))
        return nullptr;
    if (n != settings.num_beams) {
        error->message = "beam search: " + std::to_string(n) + " sessions for " + std::to_string(settings.num_beams) +
                         " beams, expected one per beam";
        return nullptr;
    }
    Session* beams[Sequences::kMaxSequences];
    for (int i = 0; i < std::min(n, Sequences::kMaxSequences); i++) beams[i] = &sessions[i]->session();
    std::unique_ptr<BeamSearch> search = BeamSearch::create(beams, settings, &error->message, &error->kind);
    std::unique_ptr<int32_t[]> tokens;
    size_t n_tokens = 0;
    if (!search || !host_token_ids(ids, sessions[0]->n_vocab(), &tokens, &n_tokens, error)) return nullptr;
    if (search->start(tokens.get(), n_tokens)) return search;
    *error = {search->error_kind(), search->error()};
    return nullptr;
}

namespace {

// "name":[...] of names (plain identifiers, no escapes), or of name(Enum(i)) for the codes up to last
std::string json_names(const char* name, const std::vector<std::string>& names) {
    std::string out = std::string("\"") + name + "\":[";
    for (size_t i = 0; i < names.size(); i++) out += (i ? ",\"" : "\"") + names[i] + "\"";
    return out + "]";
}
template <size_t N>
std::string json_names(const char* name, const char* const (&names)[N]) {
    return json_names(name, std::vector<std::string>(names, names + N));
}
template <typename Enum>
std::string json_names(const char* name, const char* (*name_of)(Enum), Enum last) {
    std::vector<std::string> names;
    for (int i = 0; i <= int(last); i++) names.push_back(name_of(Enum(i)));
    return json_names(name, names);
}
std::string json_number(const char* name, double value) { return std::string("\"") + name + "\":" + js_number(value); }

}  // namespace

std::string host_constants_json() {
    const WeightNames w = weight_names();
    return "{\"limits\":{" + json_number("maxSequences", Sequences::kMaxSequences) + "," +
           json_number("maxDraftTokens", Speculation::kMaxDraftTokens) + "," +
           json_number("maxThreads", ThreadPool::kMaxThreads) + "," +
           json_number("maxScoreAlternatives", Scorer::kMaxScoreAlternatives) + "," + json_number("maxInt", kMaxInt) +
           "," + json_number("maxFloat", kMaxFloat) + "," + json_number("maxInspectTopK", Inspector::kMaxTopK) +
           "},\"enums\":{" + json_names("errorKinds", error_kind_name, ErrorKind::input) + "," +
           json_names("weightFormats", weight_format_name, WeightFormat::q6_k) + "," +
           json_names("kvCacheFormats", kv_cache_format_name, KvCacheFormat::int8) + "," +
           json_names("earlyStopping", early_stopping_name, EarlyStopping::never) + "," +
           json_names("cacheEvents", kCacheEventNames) + "," + json_names("samplerStages", kSamplerStageNames) +
           "},\"weightNames\":{" + json_names("modelMatrices", w.model_matrices) + "," +
           json_names("layerMatrices", w.layer_matrices) + "," + json_names("modelVectors", w.model_vectors) + "," +
           json_names("layerVectors", w.layer_vectors) + "},\"gpuCommands\":{" + json_number("ints", kGpuCommandInts) +
           "," + json_names("ops", kGpuOpNames) + "," + json_names("activations", kActivationNames) + "," +
           json_names("matrices", kMatrixNames) + "," + json_names("norms", kNormNames) + "," +
           json_names("epilogues", kEpilogueNames) + "}}";
}

}  // namespace gpt2
