// libFuzzer target: the input is model.safetensors, loaded with the fixed tiny config.json of fuzz_model.h.
// Beyond the checks of fuzz_common.h (one-line errors naming the file; a model that loads runs, cached =
// uncached), the input is also fed to a gpt2::ModelLoader in pieces of 1 to 64 bytes (sizes drawn from the
// input itself), with the file size announced and not, and loaded as int8:
//  - size announced: the same result and the same error message as the whole-buffer load;
//  - size not announced: loads exactly when the whole-buffer load does (the error may differ: offsets past the
//    end are then found when the file ends), with bit-identical weights;
//  - int8: loads exactly when fp32 does, and runs.
// Seeds: tests/fuzz/corpus/loader, run by tools/dev/fuzz.sh.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz_common.h"
#include "fuzz_model.h"
#include "model/weights.h"

namespace {

// Feeds data in pieces of 1..64 bytes, the sizes from a generator seeded with the input's length and bytes.
std::unique_ptr<gpt2::Model> load_in_pieces(const uint8_t* data, size_t size, bool size_known, std::string* error) {
    const char* config = gpt2_fuzz::kModelConfigJson;
    gpt2::ModelLoader loader(reinterpret_cast<const uint8_t*>(config), std::strlen(config), gpt2::LoadOptions(),
                             size_known ? size : gpt2::ModelLoader::kUnknownFileSize);
    uint64_t state = size * 0x9E3779B97F4A7C15ull + (size ? data[size / 2] : 0);
    for (size_t offset = 0; offset < size;) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        const size_t n = std::min<size_t>(size - offset, 1 + (state >> 58));
        if (!loader.feed(data + offset, n)) break;
        offset += n;
    }
    auto model = loader.finish();
    *error = loader.error();
    return model;
}

bool same_weights(const gpt2::Model& a, const gpt2::Model& b) {
    return gpt2::model_weight_bytes(a) == gpt2::model_weight_bytes(b) &&
           std::memcmp(a.weights().memory, b.weights().memory, gpt2::model_weight_bytes(a)) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const char* config = gpt2_fuzz::kModelConfigJson;
    std::string error;
    auto model = gpt2::load_model(reinterpret_cast<const uint8_t*>(config), std::strlen(config), data, size, &error);

    std::string announced_error, unannounced_error;
    auto announced = load_in_pieces(data, size, true, &announced_error);
    auto unannounced = load_in_pieces(data, size, false, &unannounced_error);
    if (bool(announced) != bool(model) || announced_error != error)
        gpt2_fuzz::fail("a load in pieces (size announced) differs from the whole-buffer load",
                        announced_error + " / " + error);
    if (bool(unannounced) != bool(model))
        gpt2_fuzz::fail("a load in pieces (size not announced) differs from the whole-buffer load",
                        unannounced_error + " / " + error);
    if (!unannounced) gpt2_fuzz::check_load_error(unannounced_error);

    gpt2::LoadOptions int8;
    int8.format = gpt2::WeightFormat::int8;
    std::string int8_error;
    auto quantized =
        gpt2::load_model(reinterpret_cast<const uint8_t*>(config), std::strlen(config), data, size, int8, &int8_error);
    if (bool(quantized) != bool(model)) gpt2_fuzz::fail("int8 and fp32 loads disagree", int8_error + " / " + error);

    if (!model) {
        gpt2_fuzz::check_load_error(error);
        return 0;
    }
    if (!same_weights(*model, *announced) || !same_weights(*model, *unannounced))
        gpt2_fuzz::fail("a load in pieces gave different weights", "");
    gpt2_fuzz::exercise(*model);
    gpt2_fuzz::exercise(*quantized);
    return 0;
}
