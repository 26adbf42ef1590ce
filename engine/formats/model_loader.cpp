// ModelLoader (gpt2.h): model.safetensors as a stream, in three stages: the 8-byte header length, the JSON
// header (parsed, checked against the config, then the weights are allocated), the tensor data (converted by
// SafetensorsWeightsSink as it arrives). A GGUF file is one stage: GgufReader delivers it to GgufWeightsSink.
#include <cstdlib>
#include <cstring>
#include <new>

#include "formats/config.h"
#include "formats/gguf.h"
#include "formats/gguf_weights.h"
#include "formats/json.h"
#include "formats/safetensors.h"
#include "formats/safetensors_weights.h"
#include "gpt2.h"
#include "model/allocation.h"
#include "model/thread_pool.h"
#include "model/weights.h"

namespace gpt2 {

struct LoaderState {
    enum class Stage { length, header, data, gguf };
    // The caller's MatrixReceiver (LoadOptions), through this wrapper that notes its failures: those are the
    // caller's (ErrorKind::input), not the file's.
    struct Receiver : MatrixReceiver {
        MatrixReceiver* host = nullptr;
        bool failed = false;
        bool receive(const MatrixRows& rows, std::string* error) override {
            failed = !host->receive(rows, error);
            return !failed;
        }
    };

    Stage stage = Stage::length;
    Receiver receiver;  // receiver.host null: the model keeps its matrices
    // What the sinks hand the matrices to: the wrapper, or null when the model keeps them.
    MatrixReceiver* matrix_receiver() { return receiver.host ? &receiver : nullptr; }
    Config config{};
    WeightFormat format = WeightFormat::fp32;
    int n_threads = 1;                                   // LoadOptions::n_threads, for the model's pool
    uint64_t file_size = ModelLoader::kUnknownFileSize;  // as announced by the caller

    uint8_t front[kSafetensorsQuotedTextBytes];  // the first bytes: the header length (a text file: its first line)
    size_t front_fill = 0;                       // bytes of front received
    uint64_t header_len = 0;                     // from the length stage
    // (header_len) the JSON
    std::unique_ptr<uint8_t, decltype(&std::free)> header_bytes{nullptr, &std::free};
    size_t header_fill = 0;  // bytes of header_bytes received

    std::unique_ptr<Weights> weights;          // allocated after the header has been checked
    WeightsLayout layout;                      // where each parameter goes in *weights (fixed by the config)
    SafetensorsHeader header;                  // the parsed header
    std::vector<TensorRole> roles;             // (header.tensors) what becomes of each tensor
    SafetensorsWeightsSink weights_sink;       // the data stage: the tensors into *weights
    ErrorKind failure_kind = ErrorKind::file;  // of a failure in feed(): the file's fault unless an allocation failed

    // Stage::gguf: the whole file goes to the reader, which hands the tensors to the sink
    std::unique_ptr<GgufWeightsSink> gguf_sink;
    std::unique_ptr<GgufReader> gguf_reader;
};

namespace {

// The header is complete: parse and check it, allocate the weights, start the data stage.
bool start_data(LoaderState& state, std::string* error) {
    const uint64_t data_bytes = state.file_size == ModelLoader::kUnknownFileSize
                                    ? kUnknownFileSize
                                    : state.file_size - kSafetensorsLengthBytes - state.header_len;
    // The parse allocates with new, which aborts when memory runs out: first check that what it can need at most
    // is there (then freed at once, for the parse to use).
    const size_t max_values = safetensors_max_header_values(state.config.n_layer);
    const uint64_t parse_bytes = json_parse_bytes(size_t(state.header_len), max_values);
    void* room = parse_bytes > uint64_t(SIZE_MAX) ? nullptr : std::malloc(size_t(parse_bytes));
    if (!room) {
        state.failure_kind = ErrorKind::memory;
        return out_of_memory(parse_bytes, "parsing the safetensors header", error);
    }
    std::free(room);
    if (!parse_safetensors_header(state.header_bytes.get(), size_t(state.header_len), data_bytes, state.config.n_layer,
                                  &state.header, error))
        return false;
    state.header_bytes.reset();
    if (!match_tensors(state.config, state.header.tensors, state.layout, &state.roles, error)) return false;
    // The small conversion buffers first, while the heap has room: then the weights are the allocation that
    // grows a wasm heap, which grows by about what is asked (and never shrinks).
    state.failure_kind = ErrorKind::memory;  // the conversion buffers and the weights are allocations
    if (!state.weights_sink.init(state.config, state.format, state.header, state.roles, state.layout,
                                 state.weights.get(), state.matrix_receiver(), error))
        return false;
    if (!allocate_weights(state.layout, state.weights.get(), error)) return false;
    state.failure_kind = ErrorKind::file;
    state.stage = LoaderState::Stage::data;
    return true;
}

// The length stage: gathers the first bytes into state.front. Returns the bytes used.
size_t feed_length(LoaderState& state, const uint8_t* bytes, size_t n, std::string* error) {
    // 8 bytes, then (a text file) up to the end of its first line for the message
    const size_t want = state.front_fill < kSafetensorsLengthBytes ? kSafetensorsLengthBytes
                                                                   : kSafetensorsQuotedTextBytes;
    const size_t used = n < want - state.front_fill ? n : want - state.front_fill;
    std::memcpy(state.front + state.front_fill, bytes, used);
    state.front_fill += used;
    if (!safetensors_length_ready(state.front, state.front_fill)) return used;
    if (!parse_safetensors_length(state.front, state.front_fill, state.file_size, &state.header_len, error))
        return used;
    // + 1: an empty header, which is invalid JSON, still gets a buffer to be parsed from
    state.header_bytes.reset(static_cast<uint8_t*>(std::malloc(size_t(state.header_len) + 1)));
    if (!state.header_bytes) {
        state.failure_kind = ErrorKind::memory;
        out_of_memory(state.header_len, "the safetensors header", error);
        return used;
    }
    state.stage = LoaderState::Stage::header;
    if (state.header_len == 0) start_data(state, error);  // complete already
    return used;
}

// The header stage. Returns the bytes used.
size_t feed_header(LoaderState& state, const uint8_t* bytes, size_t n, std::string* error) {
    const uint64_t missing = state.header_len - state.header_fill;
    const size_t used = n < missing ? n : size_t(missing);
    std::memcpy(state.header_bytes.get() + state.header_fill, bytes, used);
    state.header_fill += used;
    if (state.header_fill == state.header_len) start_data(state, error);
    return used;
}

// The GGUF stage: everything goes to the reader, whose failure says its kind (an allocation's failure is the memory's
// fault, not the file's).
void feed_gguf(LoaderState& state, const uint8_t* bytes, size_t n, std::string* error) {
    if (state.gguf_reader->feed(bytes, n)) return;
    *error = state.gguf_reader->error();
    state.failure_kind = state.gguf_reader->error_kind();
}

}  // namespace

// Allocates the state and the weights and checks the options every file takes. false (and the error) on failure.
bool ModelLoader::start(const LoadOptions& options) {
    state_.reset(new (std::nothrow) LoaderState());
    if (!state_) {
        error_kind_ = ErrorKind::memory;
        return out_of_memory(sizeof(LoaderState), "the model loader", &error_);
    }
    state_->weights.reset(new (std::nothrow) Weights());
    if (!state_->weights) {
        error_kind_ = ErrorKind::memory;
        return out_of_memory(sizeof(Weights), "the model", &error_);
    }
    if (options.n_threads < 1 || options.n_threads > ThreadPool::kMaxThreads) {
        error_kind_ = ErrorKind::input;
        error_ = "n_threads must be 1.." + std::to_string(ThreadPool::kMaxThreads) + ", got " +
                 std::to_string(options.n_threads);
        return false;
    }
    state_->n_threads = options.n_threads;
    state_->receiver.host = options.matrix_receiver;
    state_->weights->matrices_received = options.matrix_receiver != nullptr;
    return true;
}

ModelLoader::ModelLoader(const LoadOptions& options, uint64_t file_size) {
    if (!start(options)) return;
    if (options.format != WeightFormat::fp32) {
        error_kind_ = ErrorKind::input;
        error_ = "model.gguf: a GGUF model runs in the types its file stores; re-quantizing it to int8 is not offered";
        return;
    }
    LoaderState& state = *state_;
    file_ = "model.gguf";
    state.stage = LoaderState::Stage::gguf;
    state.file_size = file_size;
    state.gguf_sink.reset(new (std::nothrow) GgufWeightsSink(state.weights.get(), state.matrix_receiver()));
    if (state.gguf_sink)
        state.gguf_reader.reset(
            new (std::nothrow)
                GgufReader(state.gguf_sink.get(), file_size == kUnknownFileSize ? kGgufUnknownFileSize : file_size));
    if (!state.gguf_reader) {
        error_kind_ = ErrorKind::memory;
        out_of_memory(sizeof(GgufReader), "the GGUF reader", &error_);
    }
}

ModelLoader::ModelLoader(const uint8_t* config_json, size_t config_len, const LoadOptions& options,
                         uint64_t file_size) {
    if (!start(options)) return;
    if (!parse_config(config_json, config_len, &state_->config, &error_)) {
        error_kind_ = ErrorKind::config;
        return;
    }
    state_->format = options.format;
    state_->file_size = file_size;
    state_->layout = weights_layout(state_->config, options.format, state_->weights.get(), !options.matrix_receiver);
    // Refused before any download: weights that cannot be one array here (see allocate_weights).
    if (state_->layout.bytes() > kMaxWeightsBytes) {
        error_kind_ = ErrorKind::memory;
        out_of_memory(state_->layout.bytes(), "the weights", &error_);
    }
}

ModelLoader::~ModelLoader() = default;

bool ModelLoader::feed(const uint8_t* bytes, size_t n) {
    if (failed()) return false;
    if (!state_) {
        error_kind_ = ErrorKind::input;
        error_ = std::string(file_) + ": bytes fed after finish()";
        return false;
    }
    LoaderState& state = *state_;
    if (state.file_size != kUnknownFileSize && n > state.file_size - bytes_fed_) {
        error_kind_ = ErrorKind::file;
        error_ = std::string(file_) + ": more bytes arrived than the announced file size (" +
                 std::to_string(state.file_size) + " bytes)";
        return false;
    }
    bytes_fed_ += n;
    while (n > 0 && !failed()) {
        size_t used = n;
        switch (state.stage) {
            case LoaderState::Stage::length: used = feed_length(state, bytes, n, &error_); break;
            case LoaderState::Stage::header: used = feed_header(state, bytes, n, &error_); break;
            case LoaderState::Stage::data: state.weights_sink.consume(bytes, n, &error_); break;
            case LoaderState::Stage::gguf: feed_gguf(state, bytes, n, &error_); break;
        }
        bytes += used;
        n -= used;
    }
    if (failed()) error_kind_ = state.receiver.failed ? ErrorKind::input : state.failure_kind;
    return !failed();
}

void ModelLoader::report_error(ErrorKind kind, const std::string& message) {
    if (failed()) return;
    error_kind_ = kind;
    error_ = message;
}

std::unique_ptr<Model> ModelLoader::finish() {
    if (!state_ && !failed()) {
        error_kind_ = ErrorKind::input;
        error_ = std::string(file_) + ": finish() called twice";
    }
    if (failed()) {
        state_.reset();
        return nullptr;
    }
    std::unique_ptr<LoaderState> state = std::move(state_);
    error_kind_ = ErrorKind::file;  // until the file is known to be complete and valid
    switch (state->stage) {
        case LoaderState::Stage::length:
            if (state->front_fill < kSafetensorsLengthBytes) safetensors_ended_early(bytes_fed_, nullptr, &error_);
            else  // a short text file, which this rejects
                parse_safetensors_length(state->front, state->front_fill, state->file_size, &state->header_len,
                                         &error_);
            return nullptr;
        case LoaderState::Stage::header:
            safetensors_ended_early(bytes_fed_, &state->header_len, &error_);
            return nullptr;
        case LoaderState::Stage::data:
            if (!state->weights_sink.finish(&error_)) return nullptr;
            error_kind_ = ErrorKind::memory;  // what remains are allocations
            if (!pack_weight_panels(state->config, state->weights.get(), &error_)) return nullptr;
            return make_model(state->config, std::move(state->weights), nullptr, state->n_threads);
        case LoaderState::Stage::gguf: return finish_gguf(*state);
    }
    return nullptr;
}

// The reader has had the whole file: the tensors are complete, the tokenizer moves to the model.
std::unique_ptr<Model> ModelLoader::finish_gguf(LoaderState& state) {
    if (!state.gguf_reader->finish()) {
        error_ = state.gguf_reader->error();
        return nullptr;
    }
    error_kind_ = ErrorKind::memory;  // what remains are allocations
    std::unique_ptr<Vocabulary> vocabulary(new (std::nothrow) Vocabulary());
    if (!vocabulary) {
        out_of_memory(sizeof(Vocabulary), "the vocabulary", &error_);
        return nullptr;
    }
    if (!state.gguf_sink->finish(&error_)) return nullptr;
    GgufModelInfo& info = state.gguf_reader->info();
    vocabulary->tokens.swap(info.tokens);
    vocabulary->merges.swap(info.merges);
    vocabulary->eos_token_id = info.eos_token_id;
    vocabulary->has_bos_token_id = info.has_bos_token_id;
    vocabulary->bos_token_id = info.bos_token_id;
    return make_model(state.gguf_sink->config(), std::move(state.weights), std::move(vocabulary), state.n_threads);
}

std::unique_ptr<Model> ModelLoader::make_model(const Config& config, std::unique_ptr<Weights> weights,
                                               std::unique_ptr<Vocabulary> vocabulary, int n_threads) {
    error_kind_ = ErrorKind::memory;
    std::unique_ptr<Model> model(new (std::nothrow) Model());
    if (!model) {
        out_of_memory(sizeof(Model), "the model", &error_);
        return nullptr;
    }
    if (n_threads > 1 && !(model->thread_pool_ = ThreadPool::create(n_threads))) {
        out_of_memory(sizeof(ThreadPool), "the thread pool", &error_);
        return nullptr;
    }
    error_kind_ = ErrorKind::none;
    model->config_ = config;
    model->weights_ = std::move(weights);
    model->vocabulary_ = std::move(vocabulary);
    return model;
}

std::unique_ptr<Model> load_model(const uint8_t* config_json, size_t config_len, const uint8_t* safetensors,
                                  size_t safetensors_len, std::string* error) {
    return load_model(config_json, config_len, safetensors, safetensors_len, LoadOptions(), error);
}

std::unique_ptr<Model> load_model(const uint8_t* config_json, size_t config_len, const uint8_t* safetensors,
                                  size_t safetensors_len, const LoadOptions& options, std::string* error) {
    ModelLoader loader(config_json, config_len, options, safetensors_len);
    loader.feed(safetensors, safetensors_len);
    std::unique_ptr<Model> model = loader.finish();
    if (!model && error) *error = loader.error();
    return model;
}

}  // namespace gpt2
