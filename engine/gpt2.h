// Public C++ API of the GPT-2 engine (used by the native tool and the wasm binding).
// Nothing here throws or aborts on bad input: failures return nullptr / -1 / false with a one-line message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gpt2 {

struct Config {
    int n_vocab;               // vocabulary size ("vocab_size")
    int n_ctx;                 // context length = rows of wpe ("n_positions", falling back to "n_ctx")
    int n_embd;                // channels
    int n_head;                // attention heads (n_embd % n_head == 0)
    int n_layer;               // transformer blocks
    float layer_norm_epsilon;  // default 1e-5
};

// One entry of SamplingSettings::logit_bias.
struct LogitBias {
    int32_t token;
    float bias;  // added to the token's logit; -inf bans it
};

// The sampler's settings: the logits processors, then greedy or the warpers and a seeded draw, in this order
// (docs/api.md "Decoding options"; tools/python/gpt2tools/reference_sampling.py is the independent reference):
//  1. logit_bias               4. no_repeat_ngram_size     7. temperature 0: argmax, done
//  2. repetition_penalty       5. bad_words                8. top_k, softmax at temperature, top_p
//  3. presence/frequency       6. min_new_tokens           9. min_p, typical_p, then the draw
// The window is the session's tokens, prompt and generated; "generated" means the tokens fed since the last
// prefill that are still in the window. Session::set_sampling refuses (ErrorKind::input, naming the field) a value
// outside the range given with each field below: a value never turns into "off" on its way in. The meanings at the
// ends of the ranges: temperature 0 is greedy, top_k 0 or >= n_vocab keeps every token, top_p 0 keeps only the
// most likely token (the nucleus is never empty) and 1 is off, min_p 0 and typical_p 1 are off.
// Any finite settings give finite logits: a bias or penalty whose float result would overflow is applied in double
// and clamped to [-kMaxFloat, kMaxFloat], so a huge bonus makes a token certain and a huge penalty makes it never
// drawn (a -inf bias alone bans a token).
struct SamplingSettings {
    float temperature = 1.0f;         // finite, >= 0; 0: greedy (argmax, lowest id on ties)
    int top_k = 0;                    // >= 0: keep the k most likely tokens; 0 (or >= n_vocab): all
    float top_p = 1.0f;               // [0, 1] nucleus: smallest set with probability mass >= top_p; 1: off
    float repetition_penalty = 1.0f;  // finite, > 0, CTRL style over the window: logit > 0 divided, else multiplied
    float min_p = 0.0f;               // [0, 1] drop tokens below min_p x the most likely one's probability; 0: off
    float typical_p =
        1.0f;  // [0, 1] locally typical: the smallest set, closest to the entropy first, with mass >= typical_p
    int no_repeat_ngram_size = 0;       // >= 0: bans the token that would repeat an n-gram of the window; 0: off
    float presence_penalty = 0.0f;      // finite, OpenAI's: subtracted from each generated token's logit once
    float frequency_penalty = 0.0f;     // finite, OpenAI's: subtracted once per occurrence among the generated tokens
    std::vector<LogitBias> logit_bias;  // tokens in [0, n_vocab), biases finite or -inf
    // token sequences never produced (each non-empty, tokens in [0, n_vocab)): the last is banned after the rest
    std::vector<std::vector<int32_t>> bad_words;
    int min_new_tokens = 0;  // >= 0: eos_token is banned until this many tokens are generated
    int32_t eos_token = -1;  // [-1, n_vocab): the end-of-text token min_new_tokens holds back; -1: none
    uint64_t seed = 0;
};

// The largest values that cross into the engine: an integer option (int32) and a float option (FLT_MAX). The JS API
// refuses larger ones (the binding exports them in constants().limits).
constexpr int32_t kMaxInt = 2147483647;
constexpr float kMaxFloat = 3.40282346638528859811704183484516925e+38f;

// Storage of the weight matrices. int8: every linear weight matrix (attn.c_attn, attn.c_proj, mlp.c_fc,
// mlp.c_proj) and wte (the tied LM head, also used for the input embedding lookup, dequantized on the fly) is
// quantized on load per output row with a symmetric scale (q = round(w / s), s = max|w| / 127), so the weights
// take about a quarter of the fp32 memory; everything else (wpe, layernorms, biases, scales) stays fp32. The
// inputs of those matrices are quantized per token to int16 (at least 11 bits of range, see kernels.h), so the
// dot products run exactly in integers.
// The ggml block formats (f16 .. q6_k) are the storage of a GGUF file's matrices, run as the file stores them
// (engine/kernels/block_formats.h): a GGUF model's Linears each have the format of their tensor in the file.
enum class WeightFormat { fp32, int8, f16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k };

// Storage of a session's KV cache. fp32: the keys and values as computed. int8: each head's key and value row of
// a position is stored as int8 with one fp32 scale (engine/kernels/kernels.h's quantize_cache_row), a quarter of the
// bytes plus a scale per head_size values (GPT-2 124M at 1024 positions: 19.7 MB instead of 75.5 MB), which is what a
// decode step at a long context reads most; the scores are exact integer dot products with the query quantized
// per head, and the values exact integer sums with the attention weights quantized to int16 (kernels.h). Cached
// and uncached decoding stay bit-identical with either (both read the rows back from the cache), as do any thread
// counts.
enum class KvCacheFormat { fp32, int8 };

// Rows of one weight matrix, handed by the loader to a MatrixReceiver as soon as they are converted: rows
// [row0, row0 + n_rows) of the (n_out, n_in) matrix `name` ("wte", "lm_head" with layer -1; "attn_qkv",
// "attn_proj", "mlp_fc", "mlp_proj" of a layer), row-major: fp32 as floats, int8 as bytes with one scale per row,
// a GGUF block type as the file's own ggml blocks (what BlockFormat::file_rows gives back). Each row is handed
// over once; the pointers are valid only during the call.
struct MatrixRows {
    int layer;
    const char* name;
    WeightFormat format;
    int n_out;
    int n_in;
    int row0;
    int n_rows;
    const void* rows;    // (n_rows, the row's bytes)
    const float* scale;  // (n_rows) int8: the rows' scales; otherwise null
};

// Where a host that keeps the weight matrices elsewhere (a GPU) takes them while the file loads, so that the heap
// never holds them. receive() returns false and sets *error (one line) to stop the load with that error.
class MatrixReceiver {
   public:
    virtual bool receive(const MatrixRows& rows, std::string* error) = 0;

   protected:
    ~MatrixReceiver() = default;
};

struct LoadOptions {
    WeightFormat format = WeightFormat::fp32;
    // Threads a forward pass uses, the calling thread included (1..ThreadPool::kMaxThreads = 16). n_threads - 1
    // workers start with the model and live as long as it; every matrix product is split between them with
    // bit-identical results for any count (engine/model/forward.cpp). If the system refuses some threads the model
    // runs with those it got (Model::n_threads()).
    int n_threads = 1;
    // Not null: every weight matrix goes to this receiver as it loads and the model keeps none (its Linears have
    // their shapes and formats, no weights): only recording sessions run it, as after Model::release_weights. The
    // model keeps the vectors (wpe, layernorms, biases). Peak memory: the vectors and the conversion buffers
    // (for a Conv1D matrix: the whole matrix, transposed, to hand its rows over).
    MatrixReceiver* matrix_receiver = nullptr;
};

// What an error is about, next to its message (ModelLoader::error_kind(), Session::error_kind()), so that callers
// (the wasm binding) classify errors without reading messages. none: no error.
//   config: config.json is invalid           file: model.safetensors is invalid (or its weights misbehave)
//   memory: an allocation failed             input: the caller's arguments are out of range
enum class ErrorKind { none, config, file, memory, input };
// "config", "file", "memory" or "input", as the JS API spells a kind ("" for none).
const char* error_kind_name(ErrorKind kind);

struct Weights;      // engine layout of the parameters, engine/model/weights.h
struct Vocabulary;   // the tokenizer a GGUF file carries, engine/model/vocabulary.h
struct LoaderState;  // the incremental loader's progress, engine/formats/model_loader.cpp
class ThreadPool;    // workers of the forward pass, engine/model/thread_pool.h
struct RunState;     // activations + KV cache, engine/model/forward.h
class Sampler;       // engine/model/sampler.h
struct GpuCommand;   // one recorded operation of a forward pass, engine/model/forward_ops.h

// Immutable weights, shared by sessions (a Model must outlive its sessions), and the model's worker threads.
// Sessions of one model may run on different threads: a forward pass that finds the workers busy with another
// session's runs on its own thread alone (same results).
class Model {
   public:
    ~Model();
    Model(const Model&) = delete;
    Model& operator=(const Model&) = delete;

    const Config& config() const { return config_; }
    const Weights& weights() const { return *weights_; }
    // The tokenizer of a model loaded from a GGUF file; null for safetensors (its tokenizer files are separate).
    const Vocabulary* vocabulary() const { return vocabulary_.get(); }
    // null when single-threaded
    ThreadPool* thread_pool() const { return thread_pool_.get(); }
    int n_threads() const;  // threads a forward pass uses, the caller included
    // Frees the weights' storage, for a model whose weights a host holds elsewhere (a GPU): the model keeps its
    // config, vocabulary and weight types, model_weight_bytes() becomes 0, and from then on only recording
    // sessions can be made of it (Session::create fails). Nothing may read weights() after it.
    void release_weights();
    // false after release_weights(), or for a model whose matrices went to a MatrixReceiver as it loaded (it keeps
    // its vectors: weights().memory holds them)
    bool has_weights() const;

   private:
    Model() = default;
    friend class ModelLoader;
    Config config_{};
    std::unique_ptr<Weights> weights_;
    std::unique_ptr<Vocabulary> vocabulary_;
    std::unique_ptr<ThreadPool> thread_pool_;
};

// Loads a model from config.json and model.safetensors (Hugging Face GPT-2 layout, F32/F16/BF16, optional
// "transformer." prefix, tied lm_head) with the safetensors bytes arriving in order, in chunks of any size
// (1 byte works), so that the file is never held whole: the 8-byte length and the JSON header are parsed and
// checked as soon as they are in, the weights are then allocated once, and every tensor is converted into
// its final storage as its bytes arrive. Peak memory: the weights, the header, and a few buffers (one
// decoded Conv1D matrix for int8; a raw copy of wte or lm_head when the file has both, for the tie check).
//
// Or from one GGUF file (engine/formats/gguf.h), which holds the hyper-parameters, the tokenizer and the tensors: its
// matrices keep the file's types (F32, F16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K), run in their
// block-quantized form (engine/kernels/block_formats.h), and the model keeps the file's tokenizer
// (Model::vocabulary()).
//
// Nothing throws or aborts. Errors are one line starting with "config.json: ", "model.safetensors: ",
// "model.gguf: " or "out of memory: "; after one, feed() refuses everything and finish() returns nullptr.
class ModelLoader {
   public:
    static constexpr uint64_t kUnknownFileSize = UINT64_MAX;

    // A GGUF file. options.format must be fp32 (the default): the file's own types run, re-quantizing them to
    // int8 would only lose precision (an input error otherwise).
    explicit ModelLoader(const LoadOptions& options, uint64_t file_size = kUnknownFileSize);

    // file_size: the exact length of model.safetensors when certain; the header's offsets are then checked
    // against it at once, else against the bytes fed when the file ends. Parses config.json: a config error,
    // options.n_threads outside 1..ThreadPool::kMaxThreads, or weights too large to be one array (over 2 GB in wasm32),
    // fail here, before any byte of the file. finish() starts the worker threads.
    ModelLoader(const uint8_t* config_json, size_t config_len, const LoadOptions& options,
                uint64_t file_size = kUnknownFileSize);
    ~ModelLoader();
    ModelLoader(const ModelLoader&) = delete;
    ModelLoader& operator=(const ModelLoader&) = delete;

    bool feed(const uint8_t* bytes, size_t n);  // the next n bytes of the file; false once failed
    // The end of the file: the model, or nullptr (e.g. the file ended inside a tensor, naming it). The loader
    // is spent afterwards.
    std::unique_ptr<Model> finish();
    bool failed() const { return !error_.empty(); }
    const std::string& error() const { return error_; }
    ErrorKind error_kind() const { return error_kind_; }
    // Fails the load with a failure of the caller's own work for it (the wasm binding's staging block, or a piece
    // larger than that block): failed() from then on, so feed() and finish() refuse. A loader that has already
    // failed keeps its first error, the one that explains the rest.
    void report_error(ErrorKind kind, const std::string& message);

   private:
    std::unique_ptr<LoaderState> state_;  // null once finished (or if it could not be allocated)
    std::string error_;                   // "" until something failed
    ErrorKind error_kind_ = ErrorKind::none;
    uint64_t bytes_fed_ = 0;                  // bytes of the file received
    const char* file_ = "model.safetensors";  // the file's name in messages

    bool start(const LoadOptions& options);
    std::unique_ptr<Model> finish_gguf(LoaderState& state);
    std::unique_ptr<Model> make_model(const Config& config, std::unique_ptr<Weights> weights,
                                      std::unique_ptr<Vocabulary> vocabulary, int n_threads);
};

// The whole file at once: one feed() of a ModelLoader; the input buffers may be freed afterwards. nullptr +
// *error on failure.
std::unique_ptr<Model> load_model(const uint8_t* config_json, size_t config_len, const uint8_t* safetensors,
                                  size_t safetensors_len, std::string* error);  // fp32
std::unique_ptr<Model> load_model(const uint8_t* config_json, size_t config_len, const uint8_t* safetensors,
                                  size_t safetensors_len, const LoadOptions& options, std::string* error);
const Config& model_config(const Model& model);
size_t model_weight_bytes(const Model& model);  // bytes of the engine's weight storage (int8: quantized size)
// The storage formats of the model's weight matrices, each once in the order the forward pass meets them
// (wte first, the head last), e.g. "fp32", "int8" or "q4_k, q6_k, q5_0".
std::string model_weight_types(const Model& model);
// The name of a storage format as the JS API and the benchmark spell it: "fp32", "int8", "f16", "q8_0", ...
const char* weight_format_name(WeightFormat format);
// "fp32" or "int8", as the JS API, the CLI and the benchmark spell a KV cache format; parse_kv_cache_format is the
// inverse (false for any other name).
const char* kv_cache_format_name(KvCacheFormat format);
bool parse_kv_cache_format(const std::string& name, KvCacheFormat* format);

// The tokens a full window keeps when Session::step() slides it (its context policy, below), the new one
// included: n_ctx / 2, at least 1.
int slide_kept_tokens(int n_ctx);

// Run state of one generation: KV cache, activations, token window, sampler. Everything is allocated by
// create(); feeding tokens allocates nothing. The decoding modes beyond one token at a time (engine/decoding/:
// speculation, several sequences, beam search, scoring) run over a session through its primitives below.
//
// Context policy (sliding window):
//  - a prompt longer than n_ctx keeps its newest n_ctx tokens (the window is then full);
//  - when step() would need position n_ctx, the newest n_ctx/2 tokens of the window (the new one included) are
//    kept, the cache is reset and those tokens are re-prefilled, then generation continues.
// So a position never exceeds n_ctx - 1 (wpe is never indexed past its end).
class Session {
   public:
    // nullptr + *error on failure: for lack of memory (ErrorKind::memory), or a model whose weights were released
    // (Model::release_weights). use_kv_cache = false recomputes the whole window from scratch through the batched
    // path at every step (like picoGPT): for verification and benchmarks. kv_cache: the cache's storage (fp32 when
    // not given).
    static std::unique_ptr<Session> create(const Model& model, bool use_kv_cache, std::string* error);
    static std::unique_ptr<Session> create(const Model& model, bool use_kv_cache, KvCacheFormat kv_cache,
                                           std::string* error);
    // A recording session: its forward passes are not run but written down (recorded_commands()) for a host that
    // runs them elsewhere (a GPU) with activations and an fp32 KV cache of its own, and writes the logits back
    // (host_logits()) before sample(). It keeps the same window, cache policy and sampler as any session: the
    // host feeds it with feed_step() and feed_prompt(), never step() or prefill(), and its weights are read by
    // the host alone. Its kv_cache_bytes() are the bytes the host's cache needs.
    static std::unique_ptr<Session> create_recording(const Model& model, bool use_kv_cache, std::string* error);
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // Takes the settings and reseeds the RNG; false and error() (ErrorKind::input, one line naming the field) for a
    // value outside its range (SamplingSettings), keeping the settings before.
    bool set_sampling(SamplingSettings s);
    const SamplingSettings& sampling() const;  // as set_sampling() took them
    // Clears, feeds the prompt, returns the sampled next token id, or -1 and error() set.
    int prefill(const int32_t* ids, size_t n);
    // prefill() that keeps the longest common prefix of the window and the prompt (truncated the same way), at
    // most keep - 1 positions of the keep fed (the last token is always fed, for its logits), and feeds only the
    // rest, in one batched pass. A position's cache rows depend only on the tokens up to it, so the logits and the
    // token are bit-identical to prefill()'s. An uncached session never reuses (it has no cache to keep).
    int prefill_reusing(const int32_t* ids, size_t n);
    // Positions kept by the last prefill_reusing (0 after prefill(), prefill_logits(), a scoring run and reset();
    // steps leave it as it is).
    int reused_tokens() const { return reused_tokens_; }
    int step(int32_t id);  // feeds one token, returns the sampled next token id, or -1 and error() set
    // The feeding halves of step() and of prefill() / prefill_reusing() (reuse): everything but the sampling, so
    // step(id) is feed_step(id) then sample(). false and error() set when the ids cannot be fed.
    bool feed_step(int32_t id);
    bool feed_prompt(const int32_t* ids, size_t n, bool reuse);
    // A token from logits() with the current settings (over the window and the tokens generated since the last
    // prefill, see SamplingSettings); -1 if nothing has been fed, the logits are not finite or all are banned.
    int sample();
    // Clears, feeds ids[0..n) (1 <= n <= n_ctx, no truncation) in one batched pass and writes the logits of every
    // position to all_logits (n, n_vocab). Samples nothing; step() may continue afterwards.
    bool prefill_logits(const int32_t* ids, size_t n, float* all_logits);
    const float* logits() const;    // (n_vocab) raw logits of the last fed position
    const int32_t* window() const;  // (n_cached) the token ids in the window, oldest first
    int n_cached() const;           // positions currently in the window / cache
    void reset();
    size_t kv_cache_bytes() const;
    KvCacheFormat kv_cache_format() const;
    bool uses_kv_cache() const { return use_kv_cache_; }
    const Model& model() const { return *model_; }

    bool recording() const;
    int batch_rows() const;  // the most tokens one chunk of a forward pass feeds: a host's activation rows
    // A recording session's last forward pass: *n commands, in order (forward_ops.h), and where its every-row
    // logits go (null unless a pass asked for them: prefill_logits(), Scorer::feed_pass()).
    const GpuCommand* recorded_commands(int* n) const;
    float* recorded_all_logits() const;
    float* host_logits();  // (n_vocab) where the host of a recording session writes the last fed token's logits

    const std::string& error() const;
    ErrorKind error_kind() const { return error_kind_; }  // input (ids, lengths), file (non-finite logits), memory
    void clear_error();  // error() empty and error_kind() none: each call that can fail starts with it
    // Makes error() and error_kind() report a failure of work done over this session by its caller (a decoding
    // mode, the wasm binding), until the next call that clears them.
    void report_error(ErrorKind kind, const std::string& message);

    // The primitives of the decoding modes, which run their own passes over the run state (window tokens, last
    // logits, KV cache, activations: model/forward.h) and then set the window: its first n tokens, their cache rows
    // written, `generated` of them fed since the last prefill (reused_tokens() stays; reset() first for a new run).
    RunState& run_state();
    const RunState& run_state() const;
    void set_window(int n, int generated);
    int n_generated() const { return n_generated_; }
    int sample_from(const float* logits);          // sample() from a row of logits other than logits()
    Sampler& sampler() { return *sampler_; }       // sample()'s, e.g. to trace it (Sampler::set_trace)
    bool check_ids(const int32_t* ids, size_t n);  // false and error() (input) for an id outside the vocabulary
    // true and error() (input) for a recording session, which method cannot serve (its passes run at its host)
    bool refuse_recording(const char* method);

   private:
    Session() = default;
    static std::unique_ptr<Session> create_session(const Model& model, bool use_kv_cache, KvCacheFormat kv_cache,
                                                   bool recording, std::string* error);
    bool check_prompt(const int32_t* ids, size_t n);  // clears the error; then false + error() if ids can't be fed
    // runs ids through the network from scratch (window := ids), optionally keeping all logits
    void feed_from_scratch(const int32_t* ids, size_t n, float* all_logits);

    const Model* model_ = nullptr;
    bool use_kv_cache_ = true;
    std::unique_ptr<RunState> state_;
    std::unique_ptr<Sampler> sampler_;
    int n_cached_ = 0;
    int reused_tokens_ = 0;
    int n_generated_ = 0;  // tokens fed since the last prefill: the window's last ones are the run's own (sampling)
    std::string error_;
    ErrorKind error_kind_ = ErrorKind::none;
};

// The settings and results of beam search (BeamSearch, engine/decoding/beam_search.h, which states the semantics:
// Hugging Face's).
enum class EarlyStopping { heuristic, done, never };  // Hugging Face's early_stopping False, True, "never"

struct BeamSettings {
    int num_beams = 2;  // 2..Sequences::kMaxSequences (16)
    float length_penalty = 1.0f;
    EarlyStopping early_stopping = EarlyStopping::heuristic;
    int max_new_tokens = 16;  // 1..n_ctx: the beams' token buffers hold at most one context
    int32_t eos_token = -1;   // ends a hypothesis; -1: none (every beam runs to max_new_tokens)
};

struct BeamHypothesis {
    std::vector<int32_t> tokens;  // the generated tokens, the end-of-text not included
    float score;                  // sum of the tokens' beam scores (end-of-text's too) / length ^ length_penalty
    bool ended_by_eos;
};

}  // namespace gpt2
