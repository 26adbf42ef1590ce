// Numbers as a host passes them into the engine (the wasm binding: JavaScript, where every number is a double):
// each is converted to the engine's type only when that type holds it exactly as given, and refused otherwise with a
// one-line message that names the field as the host's API spells it, so that no number changes meaning on its way
// in (a token id 2^32 + 13 is refused, never read as token 13; a temperature of 1e39 is refused, never turned into
// infinity). Floats: finite with |x| <= kMaxFloat; ints: exact integers in the int32 range; token ids: exact int32s,
// which the engine then checks against the vocabulary. A host reads its arrays only when a conversion reaches them
// (HostArray, HostSampling), so the checks run, and fail, in one order whatever the host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpt2.h"

namespace gpt2 {

// x as JavaScript's String() spells it, as the messages show a number: "1e+39", "4294967309", "0.5", "NaN",
// "-Infinity" (the shortest digits that read back as x).
std::string js_number(double x);

// An exact integer in the int32 range (false for NaN and the infinities).
bool is_int32(double x);
// An exact integer in [0, 2^32): what the length of a JS array, or an index into one, can be.
bool is_count(double x);

// Why a conversion failed: ErrorKind::input (a value the engine cannot take as given) or ErrorKind::memory (a block
// for the numbers could not be allocated), and the one-line message.
struct HostError {
    ErrorKind kind = ErrorKind::none;
    std::string message;
};

// A host's array of numbers (JS: an Array or typed array), read when a conversion reaches it.
class HostArray {
   public:
    virtual ~HostArray() = default;
    // The length as the host's array reports it: a conversion checks that it is a count before it reads.
    virtual double length() const = 0;
    // The first n numbers into out (n), each as the host reads a value as a number (JS: Number(), NaN for what is
    // not a number).
    virtual void read(double* out, size_t n) const = 0;
};

// "" and *out = id for an exact int32, else the message for the id, worded as the engine's range check words it:
// "token id 1.5 is not an integer", "token id 4294967309 out of range [0, n_vocab)".
std::string token_id_refusal(double id, size_t n_vocab, int32_t* out);

// The token ids of array in *ids (a block of *n + 1), each an exact int32 (the engine checks the vocabulary); false
// and *error: "the token ids must be an Array or typed array, got a length of X", "out of memory: need N bytes for
// the token ids", or token_id_refusal's message for the first id refused.
bool host_token_ids(const HostArray& array, size_t n_vocab, std::unique_ptr<int32_t[]>* ids, size_t* n,
                    HostError* error);

// gpt2::SamplingSettings as a host passes them: every number a double, the fields named in the messages as the JS
// API spells them (topK, logitBias, ...). The two lists are read through the host's own methods when the
// conversion reaches them: logitBias as [token, bias] pairs, badWords as arrays of token ids. Each number starts as
// SamplingSettings' default, so that a host reads the engine's defaults from a HostSampling it has not filled.
struct HostSampling {
    double temperature = SamplingSettings().temperature;
    double top_k = SamplingSettings().top_k;
    double top_p = SamplingSettings().top_p;
    double repetition_penalty = SamplingSettings().repetition_penalty;
    double min_p = SamplingSettings().min_p;
    double typical_p = SamplingSettings().typical_p;
    double no_repeat_ngram_size = SamplingSettings().no_repeat_ngram_size;
    double presence_penalty = SamplingSettings().presence_penalty;
    double frequency_penalty = SamplingSettings().frequency_penalty;
    double min_new_tokens = SamplingSettings().min_new_tokens;
    double eos_token = SamplingSettings().eos_token;
    double seed = double(SamplingSettings().seed);

    virtual ~HostSampling() = default;
    virtual double logit_bias_length() const = 0;  // as the host reports it: checked to be a count before reading
    virtual void logit_bias(size_t i, double* token, double* bias) const = 0;  // pair i
    virtual double bad_words_length() const = 0;                               // as logit_bias_length
    virtual double bad_word_length(size_t i) const = 0;                        // as HostArray::length
    virtual void read_bad_word(size_t i, double* out, size_t n) const = 0;     // as HostArray::read
};

// host as SamplingSettings, every number exactly as given: floats finite with |x| <= kMaxFloat (a logitBias may also
// be -Infinity, a ban), ints exact integers in the int32 range, the seed an exact integer in [0, 2^53) (what a double
// holds exactly). Checked in the order of the fields above, then each logitBias pair, then each badWords array; false
// and *error for the first refused, "setSampling: " and the field ("setSampling: topK 4294967297 is not an integer
// in the int32 range"), or ErrorKind::memory and "out of memory: need N bytes for logitBias" (or badWords). The
// ranges of the values (temperature >= 0, ...) are Session::set_sampling's to check.
bool host_sampling_settings(const HostSampling& host, SamplingSettings* out, HostError* error);

// How a host names an EarlyStopping: "heuristic", "done" or "never" (Hugging Face's False, True and "never").
const char* early_stopping_name(EarlyStopping early_stopping);

// BeamSettings from a host's numbers: num_beams, max_new_tokens and eos_token exact int32s ("beam search: num_beams
// 4294967298 is not an integer in the int32 range"), length_penalty within the float range; early_stopping by
// early_stopping_name, anything else for heuristic. false and *error (ErrorKind::input) for the first refused.
bool host_beam_settings(double num_beams, double length_penalty, const std::string& early_stopping,
                        double max_new_tokens, double eos_token, BeamSettings* out, std::string* error);

// The integers of a host's list (an inspection's positions, layers or heads) into *out: at most max_length of them,
// each an exact int32; false and *error: array_length_refusal's message, "{what} has N entries, more than M", "{what}
// 1.5 is not an integer in the int32 range" (input), or out of memory.
bool host_int32s(const HostArray& array, const std::string& what, size_t max_length, std::vector<int32_t>* out,
                 HostError* error);

// A number of alternatives per token: an exact integer in [0, n_vocab] into *out; false and *error ("method: top_k X
// out of range [0, n_vocab]") otherwise.
bool host_top_k(double top_k, size_t n_vocab, const char* method, int* out, std::string* error);

// A session as a host asks for one: its KV cache by kv_cache_format_name, a recording one (Session::create_recording)
// with the fp32 cache its host keeps. nullptr and *error: input for a format it cannot take, memory otherwise.
std::unique_ptr<Session> host_session(const Model& model, bool use_kv_cache, const std::string& kv_cache,
                                      bool recording, HostError* error);

// "" for a length that is a count, else "{what} must be an Array or typed array, got a length of X".
std::string array_length_refusal(double length, const char* what);

}  // namespace gpt2
