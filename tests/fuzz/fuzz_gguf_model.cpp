// libFuzzer target: the input is model.gguf, loaded as a model by gpt2::ModelLoader's GGUF form (the reader, then
// the weights' placement, engine/formats/gguf_weights.cpp) in pieces of 1 to 64 bytes (sizes drawn from the input
// itself). Beyond "no crash, no sanitizer report, no leak": a failure is one line naming the file (or "out of
// memory: "); a model generates a prompt and two steps, cached and uncached with identical tokens and
// bit-identical logits (fuzz_common.h). Slower per input than fuzz_gguf (the reader alone), which it complements.
// Seeds: tests/fuzz/corpus/gguf (ok_gpt2_model.gguf is a whole model), run by tools/dev/fuzz.sh 60 fuzz_gguf_model.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "fuzz_common.h"
#include "gpt2.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    gpt2::ModelLoader loader(gpt2::LoadOptions{}, size);
    uint64_t state = size * 0x2545F4914F6CDD1Dull + (size ? data[size / 2] : 0);
    for (size_t offset = 0; offset < size && !loader.failed();) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        const size_t n = std::min<size_t>(size - offset, 1 + (state >> 33) % 64);
        loader.feed(data + offset, n);
        offset += n;
    }
    const std::unique_ptr<gpt2::Model> model = loader.finish();
    if (model) gpt2_fuzz::exercise(*model);
    else gpt2_fuzz::check_load_error(loader.error());
    return 0;
}
