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
// refuses larger ones (the binding exports them as limits().maxInt and limits().maxFloat).
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

// One scored token of Session::score: its log-probability (log-softmax of the raw logits, temperature 1, no
// penalty, computed in double) and its rank (1 + the number of tokens with a strictly greater logit).
struct TokenScore {
    int32_t token;
    double logprob;
    int32_t rank;
};

// The model's distribution at one position from its row of logits (n_vocab), as Session::score gives it: *score
// (if not null) is token's TokenScore, token in [0, n_vocab); alternatives (top_k) the top_k likeliest tokens,
// likeliest first (lower id first on equal logits, which share a rank), top_k in [0, n_vocab] (alternatives may be
// null for 0). false, and nothing written, if an argument is out of range or a logit is not finite.
bool score_logits(const float* logits, int n_vocab, int32_t token, int top_k, TokenScore* score,
                  TokenScore* alternatives);

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

// Run state of one generation: KV cache, activations, token window, sampler. Everything is allocated by
// create(); feeding tokens allocates nothing.
//
// Context policy (sliding window):
//  - a prompt longer than n_ctx keeps its newest n_ctx tokens (the window is then full);
//  - when step() would need position n_ctx, the newest n_ctx/2 tokens of the window (the new one included) are
//    kept, the cache is reset and those tokens are re-prefilled, then generation continues.
// So a position never exceeds n_ctx - 1 (wpe is never indexed past its end).
class Session {
   public:
    // nullptr + *error on failure: for lack of memory (ErrorKind::memory), or a model whose weights were released
    // (Model::release_weights). use_kv_cache =
    // false recomputes the whole window from scratch through the batched path at every step (like picoGPT):
    // for verification and benchmarks. kv_cache: the cache's storage (the first form: fp32).
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
    // Clears, feeds the prompt, returns the sampled next token id, or -1 and error() set.
    int prefill(const int32_t* ids, size_t n);
    // prefill() that keeps what the window already holds: the longest common prefix of the window and the prompt
    // (truncated the same way), at most keep - 1 positions of the keep fed (the last token is always fed, for its
    // logits), stays in the cache and only the rest is fed, in one batched pass from that position. The cache rows
    // of a position depend only on the tokens up to it, so the logits and the sampled token are bit-identical to
    // prefill()'s. An uncached session never reuses (it has no cache to keep).
    int prefill_reusing(const int32_t* ids, size_t n);
    // Positions kept by the last prefill_reusing (0 after prefill(), prefill_logits(), score() and reset(); steps
    // leave it as it is).
    int reused_tokens() const { return reused_tokens_; }
    // Feeds one token, returns the sampled next token id, or -1 and error() set.
    int step(int32_t id);
    // Speculative decoding's verification, step() for several tokens in one batched pass: feeds id and then the
    // drafted tokens draft[0..k), samples at each fed position in order as step() would, and stops at the first
    // sample that is not the next drafted token. Writes those samples to out (room for k + 1) and returns how many
    // (m + 1 >= 1), or -1 and error() set: out[i] == draft[i] for i < m (accepted, and fed), out[m] the model's
    // own token after them (not fed, as step()'s result). The positions of the rejected drafts are rolled back. The
    // tokens and the sampler's state are bit-identical to m + 1 calls of step() (a row of a batched pass has a
    // step's logits, and each sample is the same draw), so speculation never changes the text. k is cut to the
    // window's room and to kMaxDraftTokens; an uncached session, and a full window (which slides), verify none.
    static constexpr int kMaxDraftTokens = 16;
    int step_draft(int32_t id, const int32_t* draft, int k, int32_t* out);
    // (n_vocab) the logits out[i] of the last step_draft() was sampled from (i < its count), valid until the next
    // call that feeds; null out of range. The last one is logits().
    const float* verified_logits(int i) const;
    // Drafts from the context itself (prompt lookup): with id appended to the window, max_draft tokens into draft
    // that continue the latest earlier occurrence of its last n tokens, for n from kLookupMaxNgram down to
    // kLookupMinNgram, as the context went on after it, and past the context's end as the draft itself goes on (so
    // a loop repeats). -> how many (0 when no such n-gram occurred before).
    static constexpr int kLookupMaxNgram = 3, kLookupMinNgram = 2;
    int lookup_draft(int32_t id, int max_draft, int32_t* draft) const;

    // Several sequences from one prompt. fork_from() makes this session continue from other's window: its tokens,
    // positions, KV cache (copied, not recomputed), last logits and count of generated tokens; the sampling settings
    // stay this session's. Both must be cached sessions of the same model and KV-cache format, neither recording.
    // Only the cache rows after the two windows' common prefix are copied (forked_rows() of them): a row depends on
    // the tokens up to it alone, so those before are already equal.
    bool fork_from(const Session& other);
    int forked_rows() const { return forked_rows_; }
    // Feeds ids[i] to sessions[i] (1 <= n <= kMaxSequences distinct sessions of one model, cached, not recording)
    // in one batched pass, the weights read once for all, and samples each one's next token into out[i] as its
    // step() would, bit for bit; a session whose window is full slides on its own as step() does. false on
    // failure, with sessions[0]->error() naming the sequence. The first call allocates the pass's logits in
    // sessions[0]; later ones allocate nothing.
    static constexpr int kMaxSequences = 16;
    static bool step_sequences(Session* const* sessions, const int32_t* ids, int n, int32_t* out);
    // step_sequences() without the sampling: each session's logits() become its next position's.
    static bool feed_sequences(Session* const* sessions, const int32_t* ids, int n);
    // (n_vocab) what beam search adds to a beam's score for each next token: the log-softmax of logits(), then
    // the logits processors (SamplingSettings steps 1-6, on log-probabilities as Hugging Face's beam search
    // applies them) and, at a temperature > 0 (beam sampling), the warpers: a kept token's score divided by the
    // temperature, the others -inf. 0, or -1 and error() (nothing fed, non-finite logits).
    int beam_scores(float* out);
    const SamplingSettings& sampling() const;  // as set_sampling() took them
    // The feeding halves of step() and of prefill() / prefill_reusing() (reuse): everything but the sampling, so
    // step(id) is feed_step(id) then sample(). false and error() set when the ids cannot be fed.
    bool feed_step(int32_t id);
    bool feed_prompt(const int32_t* ids, size_t n, bool reuse);
    bool recording() const;
    // The most tokens one chunk of a forward pass feeds (longer feeds run in chunks): a host's activation rows.
    int batch_rows() const;
    // A recording session's last forward pass: *n commands, in order (forward_ops.h), and where its every-row
    // logits go (null unless a pass asked for them: prefill_logits(), feed_score_pass()).
    const GpuCommand* recorded_commands(int* n) const;
    float* recorded_all_logits() const;
    // (n_vocab) where the host of a recording session writes the last fed token's logits
    float* host_logits();
    const float* logits() const;  // (n_vocab) raw logits of the last fed position
    void reset();
    int n_cached() const;  // positions currently in the window / cache
    size_t kv_cache_bytes() const;
    KvCacheFormat kv_cache_format() const;
    const std::string& error() const;
    ErrorKind error_kind() const { return error_kind_; }  // input (token ids, lengths) or file (non-finite logits)
    // Makes error() and error_kind() report a failure of the caller's own work for this session (the wasm
    // binding's allocation of what score() fills), until the next call that clears them.
    void report_error(ErrorKind kind, const std::string& message);

    // Lower level: clears, feeds ids[0..n) (1 <= n <= n_ctx, no truncation) in one batched pass and writes the
    // logits of every position to all_logits (n, n_vocab). Samples nothing; step() may continue afterwards.
    bool prefill_logits(const int32_t* ids, size_t n, float* all_logits);
    // Samples a token from logits() with the current settings (over the window and the tokens generated since the
    // last prefill, see SamplingSettings); -1 if nothing has been fed, the logits are not finite or the settings
    // ban every token.
    int sample();
    const int32_t* window() const;  // (n_cached) the token ids in the window, oldest first

    // Scores ids[1..n) (n >= 2): scores[i - 1] is ids[i] given ids[..i), and alternatives[(i - 1) * top_k ..] the
    // top_k likeliest tokens there, likeliest first (lower id first on equal logits), top_k in [0, n_vocab] and
    // (n - 1) x top_k at most kMaxScoreAlternatives (alternatives may be null, then none are computed).
    // Texts longer than n_ctx run in windows of n_ctx tokens with a stride of n_ctx / 2: window k starts at
    // min(k * stride, n - n_ctx) and scores the ids that no earlier window scored, so that every token past the
    // first window has at least n_ctx - stride tokens of context; the first window [0, n_ctx) scores ids[1..n_ctx),
    // the last one ends at n. In a window the already-scored part is fed without logits, the rest in batches of
    // at most kScoreRows rows of logits into one scratch buffer (allocated by the first score(), then reused), so
    // memory does not grow with n_ctx x n_vocab. The window is left holding the last window (prefill_reusing may
    // reuse it). Sampling settings play no part.
    static constexpr int kScoreRows = 64;
    // The most alternatives one score() returns, scored tokens x top_k (2^22: 96 MiB of TokenScores, and more in
    // the JS objects a host makes of them), so that what a caller asks for is bounded before it is allocated.
    static constexpr int kMaxScoreAlternatives = 4194304;
    bool score(const int32_t* ids, size_t n, int top_k, TokenScore* scores, TokenScore* alternatives);
    // Whether score() takes n ids with top_k alternatives each (n >= 2, top_k in [0, n_vocab], (n - 1) x top_k at
    // most kMaxScoreAlternatives); false and error() (ErrorKind::input) otherwise: a host checks before it allocates
    // what score() fills.
    bool check_score(size_t n, int top_k);
    // score() pass by pass, for the host of a recording session, which runs each pass itself: begin_score() checks
    // the arguments as score() does and keeps them (ids, scores and alternatives must outlive the run); then, until
    // it returns 0, feed_score_pass() feeds the next forward pass (1) and, once the host has run it and written its
    // rows of logits to recorded_all_logits() (a pass of context only has none), score_fed_pass() scores them.
    // score() is the same loop with the passes run here. -1 / false and error() on a failure, which ends the run.
    bool begin_score(const int32_t* ids, size_t n, int top_k, TokenScore* scores, TokenScore* alternatives);
    int feed_score_pass();
    bool score_fed_pass();
    bool uses_kv_cache() const { return use_kv_cache_; }
    const Model& model() const { return *model_; }

   private:
    Session() = default;
    bool check_ids(const int32_t* ids, size_t n);
    // runs ids through the network from scratch (window := ids), optionally keeping all logits
    void feed_from_scratch(const int32_t* ids, size_t n, float* all_logits);
    void clear_error();  // error() empty and error_kind() none: each call that can fail starts from no error
    bool check_prompt(const int32_t* ids, size_t n);  // clears the error; then false + error() if ids can't be fed
    // feed_sequences() with errors named after method
    static bool feed_batch(Session* const* sessions, const int32_t* ids, int n, const char* method);
    static std::unique_ptr<Session> create_session(const Model& model, bool use_kv_cache, KvCacheFormat kv_cache,
                                                   bool recording, std::string* error);
    // true + error() for a recording session, which method cannot serve (its forward passes do not run here)
    bool refuse_recording(const char* method);
    // sample() from the logits of the last fed position: logits() or a row of the drafts' verification
    int sample_from(const float* logits);
    // A score() in progress (begin_score() to the feed_score_pass() that returns 0): the window being scored is
    // ids[start, end), of which ids[start + from, end) are scored; window row r predicts ids[start + r + 1], whose
    // score is scores[start + r].
    struct ScoreRun {
        const int32_t* ids = nullptr;  // (n) null when no run is in progress
        size_t n = 0;
        int top_k = 0;
        TokenScore* scores = nullptr;        // (n - 1)
        TokenScore* alternatives = nullptr;  // (n - 1, top_k) or null
        size_t next_window = 0;              // index of the window after this one
        size_t start = 0, end = 0;           // the window
        int from = 0;                        // the window's index of its first scored id
        int next_row = 0;                    // the window's first row not yet fed
        int pass_rows = 0;                   // rows of logits of the pass fed last, ending at next_row (0: context)
    };

    const Model* model_ = nullptr;
    bool use_kv_cache_ = true;
    std::unique_ptr<RunState> state_;
    std::unique_ptr<Sampler> sampler_;
    int n_cached_ = 0;
    int reused_tokens_ = 0;
    int n_generated_ = 0;  // tokens fed since the last prefill: the window's last ones are the run's own (sampling)
    int forked_rows_ = 0;  // cache rows the last fork_from() copied
    std::unique_ptr<float[]> score_logits_;     // (kScoreRows, n_vocab) once score() has run
    std::unique_ptr<float[]> draft_logits_;     // (kMaxDraftTokens + 1, n_vocab) once step_draft() has verified drafts
    int verified_rows_ = 0;                     // rows of draft_logits_ the last step_draft() sampled from
    int drafts_accepted_ = 0;                   // drafts the last step_draft() accepted: its next first batch
    std::unique_ptr<float[]> sequence_logits_;  // (kMaxSequences, n_vocab) once step_sequences() ran with it first
    ScoreRun score_run_;
    std::string error_;
    ErrorKind error_kind_ = ErrorKind::none;
};

// Beam search with Hugging Face's semantics (transformers' BeamSearchScorer and beam sampling; docs/api.md "Beam
// search"; tools/python/gpt2tools/reference_beam_search.py is the independent reference). Each step scores every
// running beam's next tokens with Session::beam_scores() added to the beam's score, keeps the 2 x num_beams best
// continuations (with a temperature > 0, draws them without replacement from the softmax of those scores), and
// walks them best first: an end-of-text among the first num_beams ends a hypothesis (scored sum / length ^
// length_penalty, the end-of-text counted in the length), the others become the next beams until there are
// num_beams. The search is done when num_beams hypotheses exist and (early_stopping) that is enough, or no running
// beam can beat the worst of them, or max_new_tokens have been generated (the running beams then become
// hypotheses too).
// The beams live in the sessions given, one each, and are fed together in one batched pass per step
// (Session::feed_sequences). A beam that continues its parent takes over the parent's session; only a parent's
// second and later children are forked into sessions whose beams ended, and a fork copies only the cache rows
// after the two windows' common prefix. No step allocates but the first (the batched pass's logits, once per
// session that leads it) and the last (hypotheses()).
enum class EarlyStopping { heuristic, done, never };  // Hugging Face's early_stopping False, True, "never"

struct BeamSettings {
    int num_beams = 2;  // 2..Session::kMaxSequences
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

class Rng;

class BeamSearch {
   public:
    // sessions: num_beams distinct cached sessions of one model, not recording; the first one's sampling settings
    // give the logits processors, and a temperature > 0 beam sampling with the warpers and that seed.
    // nullptr + *error on invalid settings or sessions (ErrorKind::input) or for lack of memory (ErrorKind::memory,
    // "out of memory: need N bytes for the beam search"), the kind in *kind (if not null) so that a host need not
    // read it from the message. Every buffer's size is computed in 64 bits and bounded before it is allocated.
    static std::unique_ptr<BeamSearch> create(Session* const* sessions, const BeamSettings& settings,
                                              std::string* error, ErrorKind* kind = nullptr);
    ~BeamSearch();
    BeamSearch(const BeamSearch&) = delete;
    BeamSearch& operator=(const BeamSearch&) = delete;

    // Feeds the prompt to the first session (Session::prefill_reusing) and starts a search from it; false and
    // error() when it cannot be fed.
    bool start(const int32_t* ids, size_t n);
    // One step: 1 while running, 0 once done (hypotheses() holds the result), -1 and error() on a failure.
    int step();
    // Ends the search now, as if max_new_tokens were reached: the running beams become hypotheses.
    void finish();
    // Best first (ties: the later found first), at most num_beams; final once step() returned 0 or finish() ran.
    const std::vector<BeamHypothesis>& hypotheses() const { return results_; }
    int n_beams() const { return n_beams_; }           // running beams, best first
    int n_generated() const { return n_generated_; }   // tokens each running beam has generated
    const int32_t* beam_tokens(int i) const;           // (n_generated) beam i's tokens
    float beam_score(int i) const;                     // beam i's sum of beam scores
    Session* beam_session(int i) const;                // the session holding beam i's window
    long copied_rows() const { return copied_rows_; }  // KV-cache rows forks have copied so far
    const std::string& error() const { return error_; }
    ErrorKind error_kind() const { return error_kind_; }

   private:
    struct Candidate {
        int beam;
        int32_t token;
        float score;
    };
    struct Hypothesis {
        double score;
        int slot;  // its tokens: hypothesis_tokens_ row
        int n_tokens;
        bool ended_by_eos;
        long order;  // when it was added
    };
    BeamSearch() = default;
    int select_best();      // candidates_ <- the best continuations; -> how many
    int draw_candidates();  // candidates_ <- continuations drawn by beam sampling; -> how many
    void add_hypothesis(const int32_t* tokens, int n, float sum, int length, bool ended_by_eos);
    bool enough_hypotheses(float best) const;  // the early-stopping test
    bool feed_next_beams(int n_next);          // reassigns the sessions to the next beams and feeds them
    void collect_results();
    bool fail(const std::string& message, ErrorKind kind);  // sets error(); false

    BeamSettings settings_;
    int n_vocab_ = 0;
    bool sampling_ = false;
    std::unique_ptr<Rng> rng_;
    Session* sessions_[Session::kMaxSequences] = {};  // the sessions given
    int slot_[Session::kMaxSequences] = {};           // beam i's session: sessions_[slot_[i]]
    float beam_score_[Session::kMaxSequences] = {};
    int n_beams_ = 0;
    int n_generated_ = 0;
    bool done_ = true;
    std::unique_ptr<float[]> scores_;               // (num_beams, n_vocab) each beam's Session::beam_scores
    std::unique_ptr<float[]> weights_;              // (num_beams, n_vocab) beam sampling: exp(candidate score - max)
    std::unique_ptr<Candidate[]> candidates_;       // (2 * num_beams) the step's continuations, best first
    std::unique_ptr<int32_t[]> tokens_;             // (2, num_beams, max_new_tokens) the beams' tokens: this step's
                                                    // half and the next one's
    int tokens_half_ = 0;                           // which half is this step's
    std::unique_ptr<int32_t[]> hypothesis_tokens_;  // (num_beams + 1, max_new_tokens)
    Hypothesis hypotheses_[Session::kMaxSequences + 1];
    int n_hypotheses_ = 0;
    double worst_score_ = 1e9;
    long added_ = 0;
    long copied_rows_ = 0;
    std::vector<BeamHypothesis> results_;
    std::string error_;
    ErrorKind error_kind_ = ErrorKind::none;
};

}  // namespace gpt2
