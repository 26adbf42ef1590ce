// What the fuzz targets check beyond "no crash, no sanitizer report": a failed load reports exactly one line
// with the file's prefix, and a model that loads runs (prefill + 2 steps) with cached and uncached decoding
// bit-identical. A broken property aborts, which libFuzzer reports as a crash with the input saved.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "gpt2.h"

namespace gpt2_fuzz {

inline void fail(const char* what, const std::string& detail) {
    std::fprintf(stderr, "fuzz property broken: %s: %s\n", what, detail.c_str());
    std::abort();
}

inline bool starts_with(const std::string& s, const char* prefix) {
    return s.compare(0, std::strlen(prefix), prefix) == 0;
}

inline void check_load_error(const std::string& error) {
    if (error.empty()) fail("load failed without a message", "");
    if (error.find('\n') != std::string::npos) fail("error message is not one line", error);
    if (!starts_with(error, "model.safetensors: ") && !starts_with(error, "model.gguf: ") &&
        !starts_with(error, "config.json: ") && !starts_with(error, "out of memory: "))
        fail("error message does not name the file", error);
}

// Greedy tokens and logits of a 3-token prompt and 2 steps.
struct Run {
    int tokens[3] = {-1, -1, -1};
    std::string error;
};

inline Run generate(const gpt2::Model& model, bool use_kv_cache, float* last_logits) {
    Run run;
    std::string error;
    std::unique_ptr<gpt2::Session> session = gpt2::Session::create(model, use_kv_cache, &error);
    if (!session) fail("Session::create failed for a tiny model", error);
    gpt2::SamplingSettings greedy;
    greedy.temperature = 0.0f;
    session->set_sampling(greedy);
    const int n_vocab = model.config().n_vocab;
    const int32_t prompt[3] = {1 % n_vocab, 2 % n_vocab, 3 % n_vocab};
    int next = session->prefill(prompt, 3);
    for (int i = 0; next >= 0; i++) {
        run.tokens[i] = next;
        if (i == 2) break;
        next = session->step(next);
    }
    if (next < 0) {
        run.error = session->error();
        if (!starts_with(run.error, "the model produced non-finite logits (NaN/Inf) at position "))
            fail("generation failed with an unexpected error", run.error);
    }
    std::memcpy(last_logits, session->logits(), sizeof(float) * size_t(n_vocab));
    return run;
}

inline void exercise(const gpt2::Model& model) {
    const size_t n_vocab = size_t(model.config().n_vocab);
    std::unique_ptr<float[]> cached_logits(new float[n_vocab]), uncached_logits(new float[n_vocab]);
    const Run cached = generate(model, true, cached_logits.get());
    const Run uncached = generate(model, false, uncached_logits.get());
    if (std::memcmp(cached.tokens, uncached.tokens, sizeof cached.tokens) != 0 || cached.error != uncached.error)
        fail("cached and uncached decoding differ", cached.error + " / " + uncached.error);
    if (cached.error.empty() && std::memcmp(cached_logits.get(), uncached_logits.get(), sizeof(float) * n_vocab) != 0)
        fail("cached and uncached logits are not bit-identical", "");
}

}  // namespace gpt2_fuzz
