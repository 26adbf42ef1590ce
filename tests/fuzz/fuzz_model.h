// The fixed tiny GPT-2 the fuzz targets and the seed corpus agree on (tests/fuzz/make_corpus.py reads the JSON
// below, so keep it a single raw string literal).
#pragma once

namespace gpt2_fuzz {

// vocab <= 64 and n_embd <= 16 keep every seed a few KB, so the fuzzer runs thousands of inputs a second
constexpr char kModelConfigJson[] =
    R"({"model_type": "gpt2", "vocab_size": 32, "n_positions": 8, "n_embd": 8, "n_head": 2, "n_layer": 2})";

}  // namespace gpt2_fuzz
