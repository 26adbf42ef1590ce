// Loading: config.json, the safetensors container, tensor names/shapes, dtypes, and every error path.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "formats/safetensors.h"
#include "gpt2.h"
#include "kernels/float16.h"
#include "kernels/kernels.h"
#include "model/forward.h"
#include "model/weights.h"
#include "test_util.h"

using namespace gpt2_test;

namespace {

const ModelSpec kSpec;  // 67 vocab, 40 ctx, 20 embd, 4 heads, 2 layers

// Loads the given tensors with the default config; returns the error ("" on success).
std::string load_error(const std::vector<TensorSpec>& tensors, const std::string& config = config_json(kSpec)) {
    std::string error;
    auto model = load(config, build_safetensors(tensors), &error);
    if (model) return "";
    EXPECT_FALSE(error.empty());
    EXPECT_EQ(error.find('\n'), std::string::npos) << "error must be one line: " << error;
    return error;
}

std::string load_error_raw(const std::vector<uint8_t>& file) {
    std::string error;
    auto model = load(config_json(kSpec), file, &error);
    EXPECT_FALSE(model);
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    return error;
}

std::string config_error(const std::string& config) {
    std::string error;
    auto model = load(config, build_safetensors(random_tensors(kSpec)), &error);
    EXPECT_FALSE(model);
    return error;
}

#define EXPECT_CONTAINS(haystack, needle) EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

}  // namespace

TEST(Float16, ConvertsNormalsSubnormalsInfNan) {
    EXPECT_EQ(gpt2::f16_to_float(0x3C00), 1.0f);
    EXPECT_EQ(gpt2::f16_to_float(0xC000), -2.0f);
    EXPECT_EQ(gpt2::f16_to_float(0x7BFF), 65504.0f);
    EXPECT_EQ(gpt2::f16_to_float(0x0400), std::ldexp(1.0f, -14));     // smallest normal
    EXPECT_EQ(gpt2::f16_to_float(0x0001), std::ldexp(1.0f, -24));     // smallest subnormal
    EXPECT_EQ(gpt2::f16_to_float(0x03FF), std::ldexp(1023.0f, -24));  // largest subnormal
    EXPECT_EQ(gpt2::f16_to_float(0x8200), -std::ldexp(512.0f, -24));
    EXPECT_EQ(float_bits(gpt2::f16_to_float(0x8000)), 0x80000000u);  // -0
    EXPECT_EQ(gpt2::f16_to_float(0x7C00), INFINITY);
    EXPECT_EQ(gpt2::f16_to_float(0xFC00), -INFINITY);
    EXPECT_TRUE(std::isnan(gpt2::f16_to_float(0x7E00)));
    EXPECT_TRUE(std::isnan(gpt2::f16_to_float(0x7C01)));
    // every finite half is exact in float: check against ldexp arithmetic
    for (uint32_t h = 0; h < 0x10000; h++) {
        const uint32_t e = (h >> 10) & 0x1F, m = h & 0x3FF;
        if (e == 0x1F) continue;
        float expected = e == 0 ? std::ldexp(float(m), -24) : std::ldexp(float(m + 1024), int(e) - 25);
        if (h & 0x8000) expected = -expected;
        ASSERT_EQ(float_bits(gpt2::f16_to_float(uint16_t(h))), float_bits(expected)) << std::hex << h;
    }
}

TEST(Float16, ConvertsBfloat16) {
    EXPECT_EQ(gpt2::bf16_to_float(0x3F80), 1.0f);
    EXPECT_EQ(gpt2::bf16_to_float(0xC0A0), -5.0f);
    EXPECT_EQ(gpt2::bf16_to_float(0x0001), std::ldexp(1.0f, -133));  // subnormal
    EXPECT_EQ(gpt2::bf16_to_float(0x7F80), INFINITY);
    EXPECT_TRUE(std::isnan(gpt2::bf16_to_float(0x7FC0)));
}

TEST(Loader, LoadsAValidModelAndReportsItsConfig) {
    std::string error;
    auto model = load(config_json(kSpec), build_safetensors(random_tensors(kSpec), "{\"format\": \"pt\"}"), &error);
    ASSERT_TRUE(model) << error;
    const gpt2::Config& c = gpt2::model_config(*model);
    EXPECT_EQ(c.n_vocab, 67);
    EXPECT_EQ(c.n_ctx, 40);
    EXPECT_EQ(c.n_embd, 20);
    EXPECT_EQ(c.n_head, 4);
    EXPECT_EQ(c.n_layer, 2);
    EXPECT_FLOAT_EQ(c.layer_norm_epsilon, 1e-5f);
    const size_t C = 20, V = 67, T = 40, L = 2;
    EXPECT_EQ(gpt2::model_weight_bytes(*model), 4 * (V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C));
}

TEST(Loader, StoresConv1DWeightsTransposed) {
    auto tensors = random_tensors(kSpec);
    std::string error;
    auto model = load(config_json(kSpec), build_safetensors(tensors), &error);
    ASSERT_TRUE(model) << error;
    const TensorSpec& fc = find_tensor(tensors, "h.1.mlp.c_fc.weight");  // file: [in=20][out=80]
    const gpt2::Linear& engine_fc = model->weights().layers[1].mlp_fc;   // [out][in] in panels
    ASSERT_EQ(engine_fc.format, gpt2::WeightFormat::fp32);
    ASSERT_EQ(engine_fc.n_out, 80);
    ASSERT_EQ(engine_fc.n_in, 20);
    const float* engine = static_cast<const float*>(engine_fc.weight);
    float row[20];
    for (int o = 0; o < 80; o++) {
        gpt2::unpack_row(row, engine, 80, 20, o);
        for (int i = 0; i < 20; i++) {
            float file_value;
            std::memcpy(&file_value, fc.bytes.data() + 4 * (i * 80 + o), 4);
            ASSERT_EQ(row[i], file_value) << o << " " << i;
        }
    }
}

TEST(Loader, F16AndBF16LoadBitIdenticalToF32) {
    std::string error;
    auto f32 = load(config_json(kSpec), build_safetensors(random_tensors(kSpec, "F32")), &error);
    auto f16 = load(config_json(kSpec), build_safetensors(random_tensors(kSpec, "F16")), &error);
    auto bf16 = load(config_json(kSpec), build_safetensors(random_tensors(kSpec, "BF16")), &error);
    ASSERT_TRUE(f32 && f16 && bf16) << error;
    const size_t bytes = gpt2::model_weight_bytes(*f32);
    ASSERT_EQ(bytes, gpt2::model_weight_bytes(*f16));
    EXPECT_EQ(std::memcmp(f32->weights().memory, f16->weights().memory, bytes), 0);
    EXPECT_EQ(std::memcmp(f32->weights().memory, bf16->weights().memory, bytes), 0);
}

TEST(Loader, AcceptsTransformerPrefixMaskBuffersAndTiedHead) {
    auto tensors = random_tensors(kSpec, "F32", "transformer.");
    for (int l = 0; l < kSpec.n_layer; l++) {
        tensors.push_back({"transformer.h." + std::to_string(l) + ".attn.bias",
                           "F32",
                           {1, 1, 40, 40},
                           std::vector<uint8_t>(40 * 40 * 4)});
        tensors.push_back({"h." + std::to_string(l) + ".attn.masked_bias", "F32", {}, std::vector<uint8_t>(4)});
    }
    TensorSpec lm_head = find_tensor(tensors, "transformer.wte.weight");
    lm_head.name = "lm_head.weight";
    tensors.push_back(lm_head);
    EXPECT_EQ(load_error(tensors), "");
}

TEST(Loader, RejectsAnUntiedLmHead) {
    auto tensors = random_tensors(kSpec);
    TensorSpec lm_head = find_tensor(tensors, "wte.weight");
    lm_head.name = "lm_head.weight";
    lm_head.bytes[4 * 100] ^= 1;  // one element differs in its lowest bit
    tensors.push_back(lm_head);
    EXPECT_EQ(
        load_error(tensors),
        "model.safetensors: tensor 'lm_head.weight' differs from 'wte.weight' (only a tied LM head is supported)");
    tensors.back().shape = {66, 20};
    tensors.back().bytes.resize(66 * 20 * 4);
    EXPECT_CONTAINS(load_error(tensors), "tensor 'lm_head.weight' has shape [66, 20], expected [67, 20]");
}

TEST(Loader, NamesAMissingTensor) {
    auto tensors = random_tensors(kSpec);
    tensors.erase(tensors.begin() + 5);  // h.0.attn.c_attn.bias
    EXPECT_EQ(load_error(tensors), "model.safetensors: missing tensor 'h.0.attn.c_attn.bias'");
}

TEST(Loader, NamesAnExtraTensor) {
    auto tensors = random_tensors(kSpec);
    tensors.push_back({"h.0.mlp.extra", "F32", {2}, std::vector<uint8_t>(8)});
    EXPECT_EQ(load_error(tensors), "model.safetensors: unexpected tensor 'h.0.mlp.extra'");
    tensors.back().name = "h.2.attn.bias";  // a mask buffer of a layer that does not exist
    EXPECT_EQ(load_error(tensors), "model.safetensors: unexpected tensor 'h.2.attn.bias'");
}

TEST(Loader, NamesAMisShapedTensor) {
    auto tensors = random_tensors(kSpec);
    TensorSpec& fc = find_tensor(tensors, "h.1.mlp.c_fc.weight");
    fc.shape = {20, 79};
    fc.bytes.resize(20 * 79 * 4);
    EXPECT_EQ(load_error(tensors),
              "model.safetensors: tensor 'h.1.mlp.c_fc.weight' has shape [20, 79], expected [20, 80]");
    fc.shape = {80, 20};  // right size, wrong layout (not Conv1D)
    fc.bytes.resize(80 * 20 * 4);
    EXPECT_CONTAINS(load_error(tensors), "'h.1.mlp.c_fc.weight' has shape [80, 20], expected [20, 80]");
}

TEST(Loader, RejectsTheSameParameterTwice) {
    auto tensors = random_tensors(kSpec);
    TensorSpec copy = find_tensor(tensors, "wpe.weight");
    copy.name = "transformer.wpe.weight";
    tensors.push_back(copy);
    EXPECT_EQ(load_error(tensors),
              "model.safetensors: tensors 'wpe.weight' and 'transformer.wpe.weight' are the same parameter");
}

TEST(Loader, RejectsDuplicateNames) {
    const std::string header = "{\"ln_f.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                               "\"ln_f.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}";
    EXPECT_CONTAINS(load_error_raw(safetensors_from_header(header, std::vector<uint8_t>(8))),
                    "duplicate key \"ln_f.bias\"");
}

TEST(Loader, ChecksTheHeaderLength) {
    EXPECT_EQ(load_error_raw(std::vector<uint8_t>(5)),
              "model.safetensors: file is 5 bytes, too short for the 8-byte header length");
    std::vector<uint8_t> file = safetensors_from_header("{}", {});
    file[0] = uint8_t(file.size() - 7);  // one byte more than the file holds
    EXPECT_CONTAINS(load_error_raw(file), "exceeds the file size");
    file[0] = 0;
    file[5] = 1;  // 2^40 bytes: over the cap, rejected before any allocation
    EXPECT_EQ(load_error_raw(file), "model.safetensors: header length 1099511627776 exceeds the 104857600-byte limit");
}

TEST(Loader, RejectsANonJsonHeader) {
    EXPECT_CONTAINS(load_error_raw(safetensors_from_header("{\"a\": nope}", {})),
                    "model.safetensors: header is not valid JSON: unexpected character at byte 6");
    EXPECT_EQ(load_error_raw(safetensors_from_header("[1, 2]", {})), "model.safetensors: header is not a JSON object");
    EXPECT_EQ(load_error_raw(safetensors_from_header("{\"__metadata__\": {\"a\": 1}}", {})),
              "model.safetensors: \"__metadata__\" value for \"a\" is not a string");
}

// A header of one long array of small numbers, under the byte cap, once made the wasm engine
// abort (its tree of values outgrew memory). The values are counted as they are parsed, up to what the config's
// model can need: 16 * (16 * 2 + 8) + 4096 = 4736 for kSpec's 2 layers.
TEST(Loader, AHeaderOfMoreValuesThanTheModelNeedsIsAnErrorNamingTheLimit) {
    EXPECT_EQ(gpt2::safetensors_max_header_values(2), 4736u);
    const auto header_of = [](int numbers) {
        std::string header = "{\"a\": [0";
        for (int i = 1; i < numbers; i++) header += ",0";
        return header + "]}";
    };
    EXPECT_EQ(load_error_raw(safetensors_from_header(header_of(300000), {})),
              "model.safetensors: header has more than 4736 values at byte 9475, more than a 2-layer model needs");
    // the object, the array and 4734 numbers are the limit: that parses (and then fails as the tensor entry it is not)
    EXPECT_EQ(load_error_raw(safetensors_from_header(header_of(4734), {})),
              "model.safetensors: tensor 'a': header entry is not an object");
}

TEST(Loader, RejectsUnknownDtypes) {
    auto tensors = random_tensors(kSpec);
    find_tensor(tensors, "h.0.ln_2.bias").dtype = "F64";
    EXPECT_EQ(load_error(tensors),
              "model.safetensors: tensor 'h.0.ln_2.bias' has unsupported dtype \"F64\" (expected F32, F16 or BF16)");
}

TEST(Loader, ValidatesDataOffsets) {
    auto entry = [](const std::string& body) {
        return safetensors_from_header("{\"wte.weight\":{" + body + "}}", std::vector<uint8_t>(64));
    };
    EXPECT_EQ(load_error_raw(entry("\"dtype\":\"F32\",\"shape\":[2]")),
              "model.safetensors: tensor 'wte.weight': missing or non-array \"data_offsets\"");
    EXPECT_EQ(load_error_raw(entry("\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8]")),
              "model.safetensors: tensor 'wte.weight': \"data_offsets\" must be [begin, end]");
    EXPECT_EQ(load_error_raw(entry("\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]")),
              "model.safetensors: tensor 'wte.weight': data_offsets [8, 0] are inverted");
    EXPECT_EQ(
        load_error_raw(entry("\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[60,68]")),
        "model.safetensors: tensor 'wte.weight': data_offsets [60, 68] run past the end of the data section (64 bytes)");
    EXPECT_EQ(load_error_raw(entry("\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]")),
              "model.safetensors: tensor 'wte.weight': data_offsets cover 8 bytes, but shape and dtype F32 need 12");
    EXPECT_EQ(load_error_raw(entry("\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-1,7]")),
              "model.safetensors: tensor 'wte.weight': \"data_offsets\" must be non-negative integers");
    EXPECT_EQ(load_error_raw(entry("\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]")),
              "model.safetensors: tensor 'wte.weight': shape entries must be non-negative integers");
    EXPECT_EQ(load_error_raw(entry("\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]")),
              "model.safetensors: tensor 'wte.weight': shape entries must be non-negative integers");
    EXPECT_EQ(load_error_raw(entry("\"dtype\":\"F32\",\"data_offsets\":[0,8]")),
              "model.safetensors: tensor 'wte.weight': missing or non-array \"shape\"");
    EXPECT_EQ(load_error_raw(entry("\"shape\":[2],\"data_offsets\":[0,8]")),
              "model.safetensors: tensor 'wte.weight': missing or non-string \"dtype\"");
}

TEST(Loader, ShapeProductsCannotOverflow) {
    // 2^32 * 2^32 * 2 wraps to 0 in 64 bits, which would match data_offsets [0, 0]
    const std::string header =
        "{\"wte.weight\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,2],\"data_offsets\":[0,0]}}";
    EXPECT_EQ(load_error_raw(safetensors_from_header(header, {})),
              "model.safetensors: tensor 'wte.weight': shape element count overflows");
}

TEST(Loader, RejectsOverlappingTensors) {
    const std::string header = "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                               "\"b\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
                               "\"c\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}";
    EXPECT_EQ(load_error_raw(safetensors_from_header(header, std::vector<uint8_t>(16))),
              "model.safetensors: tensors 'a' and 'c' have overlapping data_offsets");
}

TEST(Loader, ChecksShapesAgainstTheConfig) {
    // the same tensors with a config claiming one more position: wpe no longer fits
    ModelSpec other = kSpec;
    other.n_ctx = 41;
    EXPECT_EQ(load_error(random_tensors(kSpec), config_json(other)),
              "model.safetensors: tensor 'wpe.weight' has shape [40, 20], expected [41, 20]");
    other = kSpec;
    other.n_layer = 3;
    EXPECT_EQ(load_error(random_tensors(kSpec), config_json(other)),
              "model.safetensors: missing tensor 'h.2.ln_1.weight'");
}

TEST(Config, ErrorsNameTheKey) {
    EXPECT_EQ(config_error("{\"vocab_size\": 67, \"n_positions\": 40, \"n_head\": 4, \"n_layer\": 2}"),
              "config.json: missing key \"n_embd\"");
    EXPECT_EQ(config_error("{\"vocab_size\": 67, \"n_embd\": 20, \"n_head\": 4, \"n_layer\": 2}"),
              "config.json: missing key \"n_positions\" (or \"n_ctx\")");
    EXPECT_EQ(config_error(
                  "{\"vocab_size\": 67, \"n_positions\": 40, \"n_embd\": \"20\", \"n_head\": 4, \"n_layer\": 2}"),
              "config.json: \"n_embd\" must be an integer");
    EXPECT_EQ(config_error("{\"vocab_size\": 67, \"n_positions\": 40, \"n_embd\": 20, \"n_head\": 0, \"n_layer\": 2}"),
              "config.json: \"n_head\" is 0, expected 1..4096");
    EXPECT_EQ(config_error("{\"vocab_size\": 67, \"n_positions\": 40, \"n_embd\": 20, \"n_head\": 3, \"n_layer\": 2}"),
              "config.json: n_embd 20 is not divisible by n_head 3");
    EXPECT_EQ(config_error("{\"vocab_size\": 67, \"n_positions\": 40, \"n_embd\": 20, \"n_head\": 4, \"n_layer\": 2, "
                           "\"n_inner\": 64}"),
              "config.json: \"n_inner\" 64 is not supported (only 4 * n_embd = 80)");
    EXPECT_EQ(config_error("{\"vocab_size\": 67, \"n_positions\": 40, \"n_embd\": 20, \"n_head\": 4, \"n_layer\": 2, "
                           "\"layer_norm_epsilon\": -1}"),
              "config.json: \"layer_norm_epsilon\" must be a positive number");
    EXPECT_CONTAINS(config_error("{\"vocab_size\": 67,"), "config.json: not valid JSON: ");
    EXPECT_EQ(config_error("[]"), "config.json: top level is not a JSON object");
}

TEST(Config, ContextKeysAndEpsilon) {
    const auto tensors = build_safetensors(random_tensors(kSpec));
    std::string error;
    // only the old "n_ctx" key
    auto model =
        load("{\"vocab_size\": 67, \"n_ctx\": 40, \"n_embd\": 20, \"n_head\": 4, \"n_layer\": 2}", tensors, &error);
    ASSERT_TRUE(model) << error;
    EXPECT_EQ(gpt2::model_config(*model).n_ctx, 40);
    EXPECT_FLOAT_EQ(gpt2::model_config(*model).layer_norm_epsilon, 1e-5f);  // default
    // both keys: n_positions (the rows of wpe) wins
    model = load("{\"vocab_size\": 67, \"n_positions\": 40, \"n_ctx\": 1024, \"n_embd\": 20, \"n_head\": 4, "
                 "\"n_layer\": 2, \"layer_norm_epsilon\": 0.001}",
                 tensors, &error);
    ASSERT_TRUE(model) << error;
    EXPECT_EQ(gpt2::model_config(*model).n_ctx, 40);
    EXPECT_FLOAT_EQ(gpt2::model_config(*model).layer_norm_epsilon, 1e-3f);
}

TEST(Session, ReportsOutOfMemoryForTheKVCache) {
    // 4096 layers x 2^19 positions x 8 channels: a 128 GiB KV cache from a 20 MB model file
    ModelSpec huge;
    huge.n_vocab = 8;
    huge.n_ctx = 1 << 19;
    huge.n_embd = 8;
    huge.n_head = 1;
    huge.n_layer = 4096;
    std::string error;
    auto model = load(config_json(huge), build_safetensors(random_tensors(huge)), &error);
    ASSERT_TRUE(model) << error;
    auto session = gpt2::Session::create(*model, true, &error);
    EXPECT_FALSE(session);
    EXPECT_CONTAINS(error, "out of memory: need ");
    EXPECT_CONTAINS(error, "bytes for the KV cache (137438953472)");
}

// Callers classify errors by their kind, never by their message (the wasm binding hands the kind to JS). Out of
// memory is the one kind a native test cannot provoke cheaply in the loader; the wasm tests refuse a model too
// large for wasm32 from config.json alone (tests/js/faults.test.js).
TEST(ErrorKind, NamesWhatEachLoaderAndSessionErrorIsAbout) {
    const std::vector<uint8_t> file = build_safetensors(random_tensors(kSpec));
    const auto loader_kind = [](const std::string& config, const std::vector<uint8_t>& bytes, int n_threads = 1) {
        gpt2::LoadOptions options;
        options.n_threads = n_threads;
        gpt2::ModelLoader loader(reinterpret_cast<const uint8_t*>(config.data()), config.size(), options);
        loader.feed(bytes.data(), bytes.size());
        const bool loaded = loader.finish() != nullptr;
        EXPECT_EQ(loaded, loader.error_kind() == gpt2::ErrorKind::none) << loader.error();
        return loader.error_kind();
    };
    EXPECT_EQ(loader_kind(config_json(kSpec), file), gpt2::ErrorKind::none);
    EXPECT_EQ(loader_kind("{\"vocab_size\": 67,", file), gpt2::ErrorKind::config);
    EXPECT_EQ(loader_kind(config_json(kSpec), file, 0), gpt2::ErrorKind::input);
    EXPECT_EQ(loader_kind(config_json(kSpec), std::vector<uint8_t>(file.begin(), file.end() - 4)),
              gpt2::ErrorKind::file);
    EXPECT_EQ(loader_kind(config_json(kSpec), std::vector<uint8_t>(64, 'A')), gpt2::ErrorKind::file);

    std::string error;
    auto model = load(config_json(kSpec), file, &error);
    ASSERT_TRUE(model) << error;
    auto session = gpt2::Session::create(*model, true, &error);
    ASSERT_TRUE(session) << error;
    const int32_t out_of_range = kSpec.n_vocab;
    EXPECT_EQ(session->prefill(&out_of_range, 1), -1);
    EXPECT_EQ(session->error_kind(), gpt2::ErrorKind::input);
    EXPECT_EQ(session->prefill(&out_of_range, 0), -1);
    EXPECT_EQ(session->error_kind(), gpt2::ErrorKind::input);
    const int32_t valid = 1;
    EXPECT_GE(session->prefill(&valid, 1), 0);
    EXPECT_EQ(session->error_kind(), gpt2::ErrorKind::none);
}

// The kinds as JS reads them (EngineError.kind): the wasm binding passes these names on.
TEST(ErrorKind, NamesAreTheJsApisKinds) {
    EXPECT_STREQ(gpt2::error_kind_name(gpt2::ErrorKind::config), "config");
    EXPECT_STREQ(gpt2::error_kind_name(gpt2::ErrorKind::file), "file");
    EXPECT_STREQ(gpt2::error_kind_name(gpt2::ErrorKind::memory), "memory");
    EXPECT_STREQ(gpt2::error_kind_name(gpt2::ErrorKind::input), "input");
    EXPECT_STREQ(gpt2::error_kind_name(gpt2::ErrorKind::none), "");
}

// A caller's own failure for a loader (the wasm binding's staging block) fails the load: feed() and finish()
// refuse from then on, and the first failure is the one reported.
TEST(ErrorKind, ALoaderFailsWithItsCallersFailureAndKeepsTheFirst) {
    const std::string config = config_json(kSpec);
    const std::vector<uint8_t> file = build_safetensors(random_tensors(kSpec));
    gpt2::ModelLoader loader(reinterpret_cast<const uint8_t*>(config.data()), config.size(), gpt2::LoadOptions{},
                             file.size());
    ASSERT_FALSE(loader.failed()) << loader.error();
    loader.report_error(gpt2::ErrorKind::memory, "out of memory: need 64 bytes for the loader's staging block");
    EXPECT_TRUE(loader.failed());
    EXPECT_FALSE(loader.feed(file.data(), file.size()));
    loader.report_error(gpt2::ErrorKind::input, "feed: 9 bytes do not fit the 8-byte staging block");
    EXPECT_EQ(loader.finish(), nullptr);
    EXPECT_EQ(loader.error_kind(), gpt2::ErrorKind::memory);
    EXPECT_EQ(loader.error(), "out of memory: need 64 bytes for the loader's staging block");
}

// A caller's own failure for a session (the wasm binding's allocations) is reported by the session until its next
// call clears it.
TEST(ErrorKind, ASessionReportsItsCallersFailureUntilTheNextCall) {
    std::string error;
    auto model = load(config_json(kSpec), build_safetensors(random_tensors(kSpec)), &error);
    ASSERT_TRUE(model) << error;
    auto session = gpt2::Session::create(*model, true, &error);
    ASSERT_TRUE(session) << error;
    session->report_error(gpt2::ErrorKind::memory, "out of memory: need 64 bytes for the scores");
    EXPECT_EQ(session->error_kind(), gpt2::ErrorKind::memory);
    EXPECT_EQ(session->error(), "out of memory: need 64 bytes for the scores");
    const int32_t ids[] = {1, 2};
    EXPECT_GE(session->prefill(ids, 2), 0);
    EXPECT_EQ(session->error_kind(), gpt2::ErrorKind::none);
    EXPECT_EQ(session->error(), "");
}
