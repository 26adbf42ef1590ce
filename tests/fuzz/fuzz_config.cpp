// libFuzzer target: the input is config.json (so also the JSON parser), loaded with a fixed valid
// model.safetensors for the sizes of fuzz_model.h; configs that agree with it load and are run
// (tests/fuzz/fuzz_common.h). Seeds: tests/fuzz/corpus/config, run by tools/dev/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "fuzz_common.h"

namespace {

std::vector<uint8_t> read_model() {
    std::vector<uint8_t> bytes;
    FILE* f = std::fopen(GPT2_FUZZ_MODEL_PATH, "rb");
    if (!f) gpt2_fuzz::fail("cannot open", GPT2_FUZZ_MODEL_PATH);
    uint8_t buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.insert(bytes.end(), buf, buf + n);
    std::fclose(f);
    return bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::vector<uint8_t> model_bytes = read_model();
    std::string error;
    auto model = gpt2::load_model(data, size, model_bytes.data(), model_bytes.size(), &error);
    if (!model) {
        gpt2_fuzz::check_load_error(error);
        return 0;
    }
    gpt2_fuzz::exercise(*model);
    return 0;
}
