// Activations, KV cache and the GPT-2 forward pass (the one function that knows the layer order).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "gpt2.h"
#include "model/forward_ops.h"

namespace gpt2 {

class ForwardObserver;

// Everything is sized at creation, so neither a prefill nor a step allocates. The activation buffers hold
// n_batch token rows: a longer prefill runs in chunks of n_batch tokens (each row's arithmetic does not depend
// on its chunk, so the result is the same bit for bit), which keeps the steady-state memory close to weights +
// KV cache.
struct RunState {
    int n_batch = 0;            // token rows of the activation buffers, min(n_ctx, kMaxBatch)
    float* x = nullptr;         // (n_batch, n_embd) residual stream of the tokens being fed
    float* xb = nullptr;        // (n_batch, n_embd) layernorm output
    float* qkv = nullptr;       // (n_batch, 3 * n_embd) query | key | value per token
    float* att = nullptr;       // (n_batch, n_embd) attention output, heads concatenated
    float* proj = nullptr;      // (n_batch, n_embd) attn.c_proj / mlp.c_proj output before the residual add
    float* fc = nullptr;        // (n_batch, 4 * n_embd) MLP hidden activations, in the memory of qkv + att
    float* scores = nullptr;    // (n_head, scores_stride) attention weights of one query row, a row per head
    int scores_stride = 0;      // n_ctx + 1 rounded up to 4: every head's row has the same alignment
    float* logits = nullptr;    // (n_vocab) logits of the last fed token
    float* xq_scale = nullptr;  // (n_batch, ceil(4 * n_embd / 32)) int8 weights: the scale of each quantized
                                // input row (the first n_batch); block formats: of each block of 32 of xq
    int32_t* xq_sum = nullptr;  // (n_batch, ceil(4 * n_embd / 32)) block formats: the sum of each block of xq
    KvCacheFormat kv_format = KvCacheFormat::fp32;  // which of the two caches below exists
    float* key_cache = nullptr;        // fp32: (n_layer, n_head, n_ctx, head_size): one head's keys are contiguous
    float* value_cache = nullptr;      // fp32: (n_layer, n_head, n_ctx, head_size)
    int8_t* key_cache_q8 = nullptr;    // int8: (n_layer, n_head, n_ctx, head_size), rows as kernels.h quantizes them
    int8_t* value_cache_q8 = nullptr;  // int8: (n_layer, n_head, ceil(n_ctx / 2), head_size, 2): positions 2m and
                                       // 2m + 1 interleaved value by value (kernels.h attention_values_q8)
    float* key_scale = nullptr;        // int8: (n_layer, n_head, n_ctx) the scale of each key row
    float* value_scale = nullptr;      // int8: (n_layer, n_head, n_ctx) the scale of each value row
    int16_t* query_q = nullptr;        // int8: (n_head, head_size) one query row quantized per head
    int16_t* weights_q = nullptr;      // int8: (n_head, scores_stride) each head's scores row times the value
                                       // scales, quantized
    int32_t* tokens = nullptr;         // (n_ctx) token ids of the window, oldest first
    int16_t* xq = nullptr;             // (n_batch, 4 * n_embd) int8 and block formats: a matmul's input rows
                                       // quantized to int16

    // A recording run state (a session whose forward passes a host runs, e.g. on a GPU) holds only tokens, logits
    // and the commands: the activations and the KV cache are the host's, laid out as above (fp32 cache).
    bool recording = false;
    GpuCommand* commands = nullptr;  // (command_capacity) the last forward pass's operations, in order
    int n_commands = 0;
    int command_capacity = 0;              // enough for a forward over n_ctx tokens
    float* recorded_all_logits = nullptr;  // where the last recorded pass's logits rows go (its all_logits), or null

    // An inspection reading the passes as they run (engine/inspection/), or null: forward() then runs no more than
    // the pass.
    ForwardObserver* observer = nullptr;

    void* memory = nullptr;  // one block holding all of the above, laid out by one list (forward.cpp)
    size_t bytes = 0;
    size_t kv_cache_bytes = 0;

    RunState() = default;
    RunState(const RunState&) = delete;
    RunState& operator=(const RunState&) = delete;
    ~RunState();
};

// "out of memory: need N bytes for ..." on failure. recording: a recording run state (see above; kv_format fp32).
bool create_run_state(const Config& config, KvCacheFormat kv_format, bool recording, RunState* state,
                      std::string* error);

// Bytes of the KV cache in kv_format at n_ctx (with the int8 format's scales): what a run state holds, or a host.
uint64_t kv_cache_bytes(const Config& config, KvCacheFormat kv_format);

// Feeds tokens[0..n) at positions pos0..pos0+n-1; the KV cache must hold positions < pos0 and
// pos0 + n <= n_ctx, token ids in range (the caller checks). Fills the cache for the new positions and writes
// the last token's logits to state->logits; if all_logits is not null also every token's logits (n, n_vocab).
// n == 1 runs the GEMV path, n > 1 the batched GEMM path; both give bit-identical rows.
// A recording run state runs nothing: state->commands receive the pass's operations (replacing the last pass's); the
// host runs them and writes the last token's logits to state->logits and, when all_logits is not null, every row to
// it (GpuCommand::logits_row).
void forward(const Model& model, RunState* state, const int32_t* tokens, int n, int pos0, float* all_logits);

// forward() with all_logits in two parts, so that a verification of drafted tokens computes a row's logits only
// once the rows before it are accepted: forward_body feeds tokens[0..n) (n <= state->n_batch) as forward() does
// but computes no logits, leaving the tokens' residual rows in state->x; forward_logits then writes the logits of
// rows [row0, row0 + n) of that pass to all_logits rows [row0, row0 + n), bit for bit forward()'s. Until the next
// call that feeds, any rows, in any order. Not for recording run states.
void forward_body(const Model& model, RunState* state, const int32_t* tokens, int n, int pos0);
void forward_logits(const Model& model, RunState* state, int row0, int n, float* all_logits);

// The two blocks of a layer, each of which adds its output to the residual stream.
enum class Block : int32_t { attention, mlp };

// What forward() lets an observer (RunState::observer; not for recording run states) read between the operations of
// a chunk of n tokens at positions pos0..pos0 + n - 1, row t being position pos0 + t. The run state's scratch
// (scores, xb, xq) is the observer's during a call; the rest it only reads.
class ForwardObserver {
   public:
    // After layer's attention: s->qkv rows [0, n) hold the chunk's queries, keys and values, the cache their keys
    // and values (attention_row_probabilities, kv_cache_rows).
    virtual void attention_done(const Model& model, RunState* s, int layer, int n, int pos0) = 0;
    // After block's output was added to the residual stream: s->proj rows [0, n) hold what was added, s->x rows the
    // stream after it (residual_logits).
    virtual void block_done(const Model& model, RunState* s, int layer, Block block, int n, int pos0) = 0;

   protected:
    ~ForwardObserver() = default;
};

// The attention probabilities (pos + 1 of them, into out) of chunk row `row`, at position pos, in head `head` of
// layer `layer`: bit for bit the ones the pass weighed the values with, computed again from the row's query and the
// cache (kernels/ops.h attention_probabilities) in the head's own scores row. Valid in attention_done.
void attention_row_probabilities(const Config& c, RunState* s, int layer, int head, int row, int pos, float* out);

// The logit lens: the final layernorm and the LM head on the residual stream's row `row` (s->x), into logits
// (n_vocab), through the calls the head makes (so after the last layer these are the pass's own logits, bit for
// bit). Uses xb's row `row` and xq as scratch: valid in block_done.
void residual_logits(const Model& model, RunState* s, int row, float* logits);

// Head `head`'s key and value rows (head_size values each) of layer `layer` at position pos of the cache, as the
// attention reads them: fp32 as stored, int8 dequantized (q * scale).
void kv_cache_rows(const Config& c, const RunState& s, int layer, int head, int pos, float* key, float* value);

// Copies positions [first, first + n) of from's KV cache into to's (both run states of one config and KV-cache
// format, not recording; 0 <= first, first + n <= n_ctx).
void copy_kv_cache(const Config& config, const RunState& from, RunState* to, int first, int n);

// Feeds one token to each of n sequences in one pass (n <= activations->n_batch): tokens[i] at position
// positions[i] of the sequence whose KV cache is caches[i] (holding positions < positions[i], positions[i] < n_ctx;
// activations may be one of them), so the matrices read the weights once for all n. every row's logits go to
// all_logits (n, n_vocab). Each row is bit for bit what forward() of that token alone on caches[i] gives. Not
// for recording run states.
void forward_sequences(const Model& model, RunState* activations, RunState* const* caches, const int32_t* tokens,
                       const int* positions, int n, float* all_logits);

// Runs a recording session's commands (Session::recorded_commands) on the CPU in s, a run state that is not recording
// and plays the host: it keeps the activations and the KV cache between passes. window: the session's tokens
// (Session::window()); all_logits: the pass's every-row logits (Session::recorded_all_logits()) or null; logits
// (n_vocab): receives the last token's (Session::host_logits()). This is what any host's executor computes: the tests
// pin recording to it (a replayed pass gives the running session's logits bit for bit), and a session whose GPU was
// lost goes on with it (run_recorded_pass_on_cpu).
void replay(const Model& model, RunState* s, const GpuCommand* commands, int n_commands, const int32_t* window,
            float* all_logits, float* logits);

// The rows of every-row logits (forward's all_logits) that a recorded pass writes: 0 for one that writes only the last
// token's.
int recorded_logits_rows(const GpuCommand* commands, int n_commands);

// The CPU as the host of a recording session whose GPU was lost: weights of its own (the session's model, or the same
// model loaded again once the session's went to the GPU) and a run state whose fp32 KV cache follows the passes.
struct CpuHost {
    std::shared_ptr<const Model> model;  // null until the first pass has run
    std::unique_ptr<RunState> state;
};

// Runs session's last recorded pass on the CPU (replay) and writes its logits where a host does, for sample(). The
// first pass takes weights as host's and feeds the window's positions before the pass into host's KV cache (the GPU's
// is gone). false for a session that is not recording or holds nothing; false and session's error() for weights
// that are absent, released or of another shape than the session's model (input), or for lack of memory.
bool run_recorded_pass_on_cpu(Session* session, const std::shared_ptr<const Model>& weights, CpuHost* host);

}  // namespace gpt2
