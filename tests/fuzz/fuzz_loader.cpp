// libFuzzer target: the input is model.safetensors, loaded with the fixed tiny config.json of fuzz_model.h;
// a model that loads is run (tests/fuzz/fuzz_common.h). Seeds: tests/fuzz/corpus/loader, run by tools/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz_common.h"
#include "fuzz_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const char* config = gpt2_fuzz::kModelConfigJson;
    std::string error;
    auto model = gpt2::load_model(reinterpret_cast<const uint8_t*>(config), std::strlen(config), data, size, &error);
    if (!model) {
        gpt2_fuzz::check_load_error(error);
        return 0;
    }
    gpt2_fuzz::exercise(*model);
    return 0;
}
