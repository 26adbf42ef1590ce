#include "host/host_numbers.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "model/allocation.h"

namespace gpt2 {

std::string js_number(double x) {
    if (std::isnan(x)) return "NaN";
    if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
    if (x == 0.0) return "0";  // -0 too, as JS spells it
    // The shortest digits that read back as x, then ECMAScript's Number::toString layout of them: plain digits for a
    // decimal exponent in [-7, 21), exponent notation ("1e+39", "1.5e-7") outside it.
    char text[32];
    for (int precision = 0; precision <= 16; precision++) {
        std::snprintf(text, sizeof text, "%.*e", precision, x);
        if (std::strtod(text, nullptr) == x) break;
    }
    const std::string e = text;  // [-]d[.ddd]e±xx
    const size_t e_at = e.find('e');
    const bool negative = e[0] == '-';
    std::string digits;
    for (size_t i = negative ? 1 : 0; i < e_at; i++)
        if (e[i] != '.') digits += e[i];
    const int k = int(digits.size()), n = std::atoi(e.c_str() + e_at + 1) + 1;  // x = 0.digits x 10^n
    std::string out = negative ? "-" : "";
    if (k <= n && n <= 21) out += digits + std::string(size_t(n - k), '0');
    else if (0 < n && n <= 21) out += digits.substr(0, size_t(n)) + "." + digits.substr(size_t(n));
    else if (-6 < n && n <= 0) out += "0." + std::string(size_t(-n), '0') + digits;
    else {
        out += digits.substr(0, 1);
        if (k > 1) out += "." + digits.substr(1);
        out += (n - 1 < 0 ? "e-" : "e+") + std::to_string(std::abs(n - 1));
    }
    return out;
}

bool is_int32(double x) { return x >= -2147483648.0 && x <= 2147483647.0 && x == std::floor(x); }

bool is_count(double x) { return x >= 0.0 && x <= 4294967295.0 && x == std::floor(x); }

std::string array_length_refusal(double length, const char* what) {
    if (is_count(length)) return "";
    return std::string(what) + " must be an Array or typed array, got a length of " + js_number(length);
}

std::string token_id_refusal(double id, size_t n_vocab, int32_t* out) {
    if (is_int32(id)) {
        *out = int32_t(id);
        return "";
    }
    if (std::isfinite(id) && id != std::floor(id)) return "token id " + js_number(id) + " is not an integer";
    return "token id " + js_number(id) + " out of range [0, " + std::to_string(n_vocab) + ")";
}

namespace {

bool fail(HostError* error, ErrorKind kind, std::string message) {
    error->kind = kind;
    error->message = std::move(message);
    return false;
}

// The numbers of array in *numbers (a block of *n + 1), or false and *error: its length is not a count (input), or
// the block cannot be allocated (memory), the message naming what.
bool read_numbers(const HostArray& array, const char* what, std::unique_ptr<double[]>* numbers, size_t* n,
                  HostError* error) {
    const double length = array.length();
    const std::string refusal = array_length_refusal(length, what);
    if (!refusal.empty()) return fail(error, ErrorKind::input, refusal);
    numbers->reset(allocate_array<double>(uint64_t(length) + 1));
    if (!*numbers)
        return fail(error, ErrorKind::memory, out_of_memory_message(uint64_t(length) * sizeof(double), what));
    *n = size_t(length);
    array.read(numbers->get(), *n);
    return true;
}

// v->reserve(n) when that block can be allocated, so that filling the vector cannot fail: a std::vector's own failed
// allocation aborts a wasm instance (C++ exceptions are off there). malloc hands the block just freed to the vector
// next.
template <typename T>
bool reserve(std::vector<T>* v, size_t n) {
    size_t bytes = 0;
    if (!array_bytes(n, sizeof(T), &bytes)) return false;
    void* probe = std::malloc(bytes ? bytes : 1);
    if (!probe) return false;
    std::free(probe);
    v->reserve(n);
    return true;
}

// bad word i of a HostSampling as a HostArray
class BadWord final : public HostArray {
   public:
    BadWord(const HostSampling& host, size_t i) : host_(host), i_(i) {}
    double length() const override { return host_.bad_word_length(i_); }
    void read(double* out, size_t n) const override { host_.read_bad_word(i_, out, n); }

   private:
    const HostSampling& host_;
    size_t i_;
};

}  // namespace

bool host_token_ids(const HostArray& array, size_t n_vocab, std::unique_ptr<int32_t[]>* ids, size_t* n,
                    HostError* error) {
    std::unique_ptr<double[]> numbers;
    size_t count = 0;
    if (!read_numbers(array, "the token ids", &numbers, &count, error)) return false;
    ids->reset(allocate_array<int32_t>(uint64_t(count) + 1));
    if (!*ids) return fail(error, ErrorKind::memory, out_of_memory_message(uint64_t(count) * 4, "the token ids"));
    for (size_t i = 0; i < count; i++) {
        const std::string refusal = token_id_refusal(numbers[i], n_vocab, &(*ids)[i]);
        if (refusal.empty()) continue;
        ids->reset();
        return fail(error, ErrorKind::input, refusal);
    }
    *n = count;
    return true;
}

bool host_int32s(const HostArray& array, const std::string& what, size_t max_length, std::vector<int32_t>* out,
                 HostError* error) {
    const double length = array.length();
    if (is_count(length) && length > double(max_length))
        return fail(error, ErrorKind::input,
                    what + " has " + js_number(length) + " entries, more than " + std::to_string(max_length));
    std::unique_ptr<double[]> numbers;
    size_t n = 0;
    if (!read_numbers(array, what.c_str(), &numbers, &n, error)) return false;
    if (!reserve(out, n)) return fail(error, ErrorKind::memory, out_of_memory_message(uint64_t(n) * 4, what));
    out->clear();
    for (size_t i = 0; i < n; i++) {
        if (!is_int32(numbers[i]))
            return fail(error, ErrorKind::input,
                        what + " " + js_number(numbers[i]) + " is not an integer in the int32 range");
        out->push_back(int32_t(numbers[i]));
    }
    return true;
}

bool host_sampling_settings(const HostSampling& host, SamplingSettings* out, HostError* error) {
    auto refuse = [&](ErrorKind kind, const std::string& message) {
        return fail(error, kind, kind == ErrorKind::memory ? message : "setSampling: " + message);
    };
    auto to_float = [&](double x, const char* name, float* f) {
        if (!std::isfinite(x)) return refuse(ErrorKind::input, name + (" " + js_number(x)) + " is not a finite number");
        if (std::fabs(x) > double(kMaxFloat))
            return refuse(ErrorKind::input, name + (" " + js_number(x)) + " is outside the float range");
        *f = float(x);
        return true;
    };
    auto to_int = [&](double x, const char* name, int32_t* i) {
        if (!is_int32(x))
            return refuse(ErrorKind::input, name + (" " + js_number(x)) + " is not an integer in the int32 range");
        *i = int32_t(x);
        return true;
    };
    SamplingSettings s;
    if (!to_float(host.temperature, "temperature", &s.temperature) || !to_int(host.top_k, "topK", &s.top_k) ||
        !to_float(host.top_p, "topP", &s.top_p) ||
        !to_float(host.repetition_penalty, "repetitionPenalty", &s.repetition_penalty) ||
        !to_float(host.min_p, "minP", &s.min_p) || !to_float(host.typical_p, "typicalP", &s.typical_p) ||
        !to_int(host.no_repeat_ngram_size, "noRepeatNgramSize", &s.no_repeat_ngram_size) ||
        !to_float(host.presence_penalty, "presencePenalty", &s.presence_penalty) ||
        !to_float(host.frequency_penalty, "frequencyPenalty", &s.frequency_penalty) ||
        !to_int(host.min_new_tokens, "minNewTokens", &s.min_new_tokens) ||
        !to_int(host.eos_token, "eosToken", &s.eos_token))
        return false;
    if (!(host.seed >= 0.0 && host.seed < 9007199254740992.0 && host.seed == std::floor(host.seed)))
        return refuse(ErrorKind::input, "seed " + js_number(host.seed) + " is not an integer in [0, 2^53)");
    s.seed = uint64_t(host.seed);

    const double n_bias = host.logit_bias_length();
    if (!is_count(n_bias)) return refuse(ErrorKind::input, "logitBias must be an Array of [token, bias]");
    if (!reserve(&s.logit_bias, size_t(n_bias)))
        return refuse(ErrorKind::memory, out_of_memory_message(uint64_t(n_bias) * sizeof(LogitBias), "logitBias"));
    for (size_t i = 0; i < size_t(n_bias); i++) {
        double token = 0.0, bias = 0.0;
        host.logit_bias(i, &token, &bias);
        int32_t id = 0;
        if (!to_int(token, "logitBias token", &id)) return false;
        // -Infinity bans the token; any other value crosses as a float
        if (bias != -INFINITY && !std::isfinite(bias))
            return refuse(ErrorKind::input, "logitBias " + js_number(bias) + " for token " + js_number(token) +
                                                " is not a finite number or -Infinity");
        if (std::fabs(bias) > double(kMaxFloat) && bias != -INFINITY)
            return refuse(ErrorKind::input, "logitBias " + js_number(bias) + " for token " + js_number(token) +
                                                " is outside the float range");
        s.logit_bias.push_back({id, float(bias)});
    }

    const double n_words = host.bad_words_length();
    if (!is_count(n_words)) return refuse(ErrorKind::input, "badWords must be an Array of token id Arrays");
    if (!reserve(&s.bad_words, size_t(n_words)))
        return refuse(ErrorKind::memory,
                      out_of_memory_message(uint64_t(n_words) * sizeof(std::vector<int32_t>), "badWords"));
    for (size_t i = 0; i < size_t(n_words); i++) {
        std::unique_ptr<double[]> numbers;
        size_t n = 0;
        if (!read_numbers(BadWord(host, i), "badWords", &numbers, &n, error))
            return refuse(error->kind, error->message);
        s.bad_words.emplace_back();
        if (!reserve(&s.bad_words.back(), n))
            return refuse(ErrorKind::memory, out_of_memory_message(uint64_t(n) * 4, "badWords"));
        for (size_t j = 0; j < n; j++) {
            int32_t id = 0;
            if (!to_int(numbers[j], "badWords token", &id)) return false;
            s.bad_words.back().push_back(id);
        }
    }
    *out = std::move(s);
    return true;
}

const char* early_stopping_name(EarlyStopping early_stopping) {
    return early_stopping == EarlyStopping::done    ? "done"
           : early_stopping == EarlyStopping::never ? "never"
                                                    : "heuristic";
}

bool host_beam_settings(double num_beams, double length_penalty, const std::string& early_stopping,
                        double max_new_tokens, double eos_token, BeamSettings* out, std::string* error) {
    auto to_int = [&](double x, const char* name, int32_t* i) {
        if (is_int32(x)) {
            *i = int32_t(x);
            return true;
        }
        *error = std::string("beam search: ") + name + " " + js_number(x) + " is not an integer in the int32 range";
        return false;
    };
    BeamSettings settings;
    if (!to_int(num_beams, "num_beams", &settings.num_beams) ||
        !to_int(max_new_tokens, "max_new_tokens", &settings.max_new_tokens) ||
        !to_int(eos_token, "eos_token", &settings.eos_token))
        return false;
    if (!(std::fabs(length_penalty) <= double(kMaxFloat))) {  // false for NaN
        *error = "beam search: length_penalty " + js_number(length_penalty) + " is outside the float range";
        return false;
    }
    settings.length_penalty = float(length_penalty);
    settings.early_stopping = early_stopping == early_stopping_name(EarlyStopping::done)    ? EarlyStopping::done
                              : early_stopping == early_stopping_name(EarlyStopping::never) ? EarlyStopping::never
                                                                                            : EarlyStopping::heuristic;
    *out = settings;
    return true;
}

bool host_top_k(double top_k, size_t n_vocab, const char* method, int* out, std::string* error) {
    if (top_k >= 0.0 && top_k <= double(n_vocab) && top_k == std::floor(top_k)) {
        *out = int(top_k);
        return true;
    }
    *error = std::string(method) + ": top_k " + js_number(top_k) + " out of range [0, " + std::to_string(n_vocab) + "]";
    return false;
}

std::unique_ptr<Session> host_session(const Model& model, bool use_kv_cache, const std::string& kv_cache,
                                      bool recording, HostError* error) {
    KvCacheFormat format;
    std::unique_ptr<Session> session;
    if (!parse_kv_cache_format(kv_cache, &format))
        fail(error, ErrorKind::input, "kvCache must be \"int8\" or \"fp32\", got \"" + kv_cache + "\"");
    else if (recording && format != KvCacheFormat::fp32)
        fail(error, ErrorKind::input,
             "kvCache \"" + kv_cache + "\" runs on the CPU only: a WebGPU session keeps an fp32 cache");
    else if (!(session = recording ? Session::create_recording(model, use_kv_cache, &error->message)
                                   : Session::create(model, use_kv_cache, format, &error->message)))
        error->kind = ErrorKind::memory;  // creating a session fails only for lack of memory
    return session;
}

}  // namespace gpt2
