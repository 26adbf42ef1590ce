// gpt2::ModelLoader fed model.safetensors in pieces: every chunking (1 byte, random sizes, the whole file), with
// the file size known or not, gives bit-identical weights and logits to a whole-buffer load, and a truncated or
// malformed stream fails with the same named error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../fuzz/fuzz_model.h"
#include "gpt2.h"
#include "model/weights.h"
#include "test_util.h"

using namespace gpt2_test;

namespace {

const ModelSpec kSpec;  // 67 vocab, 40 ctx, 20 embd, 4 heads, 2 layers
const uint64_t kUnknown = gpt2::ModelLoader::kUnknownFileSize;

enum class Chunking { whole, one_byte, random };

const char* chunking_name(Chunking chunking) {
    return chunking == Chunking::whole ? "whole" : chunking == Chunking::one_byte ? "1-byte" : "random";
}

// Feeds file to a loader in pieces; nullptr + *error on failure.
std::unique_ptr<gpt2::Model> stream_load(const std::string& config, const std::vector<uint8_t>& file, Chunking chunking,
                                         bool size_known, gpt2::WeightFormat format, std::string* error,
                                         uint32_t seed = 1) {
    gpt2::LoadOptions options;
    options.format = format;
    gpt2::ModelLoader loader(reinterpret_cast<const uint8_t*>(config.data()), config.size(), options,
                             size_known ? file.size() : kUnknown);
    std::mt19937 rng(seed);
    size_t offset = 0;
    while (offset < file.size()) {
        size_t n = file.size() - offset;
        if (chunking == Chunking::one_byte) n = 1;
        if (chunking == Chunking::random) n = std::min(n, size_t(1 + rng() % 997));
        if (!loader.feed(file.data() + offset, n)) break;
        offset += n;
    }
    auto model = loader.finish();
    *error = loader.error();
    EXPECT_EQ(bool(model), error->empty());
    return model;
}

// Prefill logits of a fixed prompt.
std::vector<float> prompt_logits(const gpt2::Model& model) {
    std::string error;
    auto session = gpt2::Session::create(model, true, &error);
    EXPECT_TRUE(session) << error;
    const int32_t prompt[5] = {1, 7, 3, 12, 5};
    const size_t n_vocab = size_t(model.config().n_vocab);
    std::vector<float> logits(5 * n_vocab);
    EXPECT_TRUE(session->prefill_logits(prompt, 5, logits.data())) << session->error();
    return logits;
}

void expect_identical(const gpt2::Model& a, const gpt2::Model& b) {
    ASSERT_EQ(gpt2::model_weight_bytes(a), gpt2::model_weight_bytes(b));
    EXPECT_EQ(std::memcmp(a.weights().memory, b.weights().memory, gpt2::model_weight_bytes(a)), 0);
    const std::vector<float> la = prompt_logits(a), lb = prompt_logits(b);
    EXPECT_TRUE(same_bits(la, lb));
}

// A file in an order unlike the engine's (ln_f first, wte last), with mask buffers and a tied lm_head first.
std::vector<TensorSpec> shuffled_tensors(const std::string& dtype) {
    auto tensors = random_tensors(kSpec, dtype, "transformer.");
    std::reverse(tensors.begin(), tensors.end());
    TensorSpec lm_head = find_tensor(tensors, "transformer.wte.weight");
    lm_head.name = "lm_head.weight";
    tensors.insert(tensors.begin(), lm_head);
    tensors.push_back(
        {"transformer.h.0.attn.bias", dtype, {1, 1, 40, 40}, std::vector<uint8_t>(40 * 40 * (dtype == "F32" ? 4 : 2))});
    return tensors;
}

std::string load_whole_error(const std::string& config, const std::vector<uint8_t>& file) {
    std::string error;
    EXPECT_FALSE(load(config, file, &error));
    return error;
}

}  // namespace

TEST(StreamingLoader, EveryChunkingGivesBitIdenticalWeightsAndLogits) {
    const std::string config = config_json(kSpec);
    for (const char* dtype : {"F32", "F16", "BF16"})
        for (const auto& tensors : {random_tensors(kSpec, dtype), shuffled_tensors(dtype)})
            for (gpt2::WeightFormat format : {gpt2::WeightFormat::fp32, gpt2::WeightFormat::int8}) {
                const std::vector<uint8_t> file = build_safetensors(tensors, "{\"format\": \"pt\"}");
                std::string error;
                auto whole = load(config, file, &error, format);
                ASSERT_TRUE(whole) << error;
                for (Chunking chunking : {Chunking::whole, Chunking::one_byte, Chunking::random})
                    for (bool size_known : {true, false}) {
                        SCOPED_TRACE(std::string(dtype) + ", " +
                                     (tensors[0].name == "lm_head.weight" ? "shuffled" : "in order") +
                                     (format == gpt2::WeightFormat::int8 ? ", int8, " : ", fp32, ") +
                                     chunking_name(chunking) + (size_known ? ", size known" : ", size unknown"));
                        auto streamed = stream_load(config, file, chunking, size_known, format, &error);
                        ASSERT_TRUE(streamed) << error;
                        expect_identical(*whole, *streamed);
                    }
            }
}

TEST(StreamingLoader, ManyRandomChunkingsAgree) {
    const std::string config = config_json(kSpec);
    const std::vector<uint8_t> file = build_safetensors(shuffled_tensors("F16"));
    std::string error;
    auto whole = load(config, file, &error, gpt2::WeightFormat::int8);
    ASSERT_TRUE(whole) << error;
    for (uint32_t seed = 2; seed < 22; seed++) {
        auto streamed =
            stream_load(config, file, Chunking::random, seed % 2 == 0, gpt2::WeightFormat::int8, &error, seed);
        ASSERT_TRUE(streamed) << error;
        expect_identical(*whole, *streamed);
    }
}

TEST(StreamingLoader, ATruncatedStreamNamesWhereItEnded) {
    const std::string config = config_json(kSpec);
    const std::vector<uint8_t> file = build_safetensors(random_tensors(kSpec));
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--) header_len = (header_len << 8) | file[size_t(i)];
    const size_t data_start = 8 + size_t(header_len);
    auto cut = [&](size_t n) {
        std::vector<uint8_t> prefix(file.begin(), file.begin() + long(n));
        std::string error;
        EXPECT_FALSE(stream_load(config, prefix, Chunking::one_byte, false, gpt2::WeightFormat::fp32, &error));
        return error;
    };
    EXPECT_EQ(cut(0), "model.safetensors: file is 0 bytes, too short for the 8-byte header length");
    EXPECT_EQ(cut(7), "model.safetensors: file is 7 bytes, too short for the 8-byte header length");
    EXPECT_EQ(cut(100),
              "model.safetensors: header length " + std::to_string(header_len) + " exceeds the file size (100 bytes)");
    // wte is the first tensor: 67 x 20 floats
    EXPECT_EQ(cut(data_start), "model.safetensors: the file is truncated: it ends 0 bytes into the data section, "
                               "inside tensor 'wte.weight' (bytes [0, 5360))");
    EXPECT_EQ(cut(data_start + 5361), "model.safetensors: the file is truncated: it ends 5361 bytes into the data "
                                      "section, inside tensor 'wpe.weight' (bytes [5360, 8560))");
    EXPECT_EQ(cut(file.size() - 1).find("model.safetensors: the file is truncated: it ends "), 0u);
    // with the size known, the whole-buffer load rejects the header's offsets, as before
    std::vector<uint8_t> prefix(file.begin(), file.end() - 4);
    EXPECT_EQ(load_whole_error(config, prefix).find("model.safetensors: tensor 'ln_f.bias': data_offsets ["), 0u);
}

TEST(StreamingLoader, EverySeedFailsWithTheSameMessageWhenStreamed) {
    const std::string dir = GPT2_FUZZ_CORPUS_DIR "/loader/";
    const std::string config = gpt2_fuzz::kModelConfigJson;
    // Without the file size, offsets past the end cannot be seen in the header; that seed's entry also covers
    // fewer bytes than its shape needs, which is then the first fault found.
    const std::string past_end =
        "model.safetensors: tensor 'wte.weight': data_offsets cover 32 bytes, but shape and dtype F32 need 1024";
    int n_seeds = 0;
    for (const char* seed : {"bad_0_byte_file",           "bad_5_byte_file",           "bad_html_error_page",
                             "bad_git_lfs_pointer",       "bad_json_error_body",       "bad_header_longer_than_file",
                             "bad_header_over_cap",       "bad_header_truncated_json", "bad_header_not_utf8",
                             "bad_duplicate_tensor",      "bad_unknown_dtype",         "bad_offsets_past_end",
                             "bad_offsets_size_mismatch", "bad_overlapping_offsets",   "bad_gap_between_tensors",
                             "bad_trailing_bytes",        "bad_shape_overflow",        "bad_missing_layer",
                             "bad_untied_lm_head",        "bad_nan_weight_f32",        "bad_inf_weight_f16",
                             "bad_neg_inf_weight_bf16"}) {
        SCOPED_TRACE(seed);
        const std::vector<uint8_t> file = read_file(dir + seed + ".safetensors");
        const std::string expected = load_whole_error(config, file);
        ASSERT_FALSE(expected.empty());
        for (gpt2::WeightFormat format : {gpt2::WeightFormat::fp32, gpt2::WeightFormat::int8}) {
            std::string error;
            EXPECT_FALSE(stream_load(config, file, Chunking::one_byte, true, format, &error));
            EXPECT_EQ(error, expected);
            EXPECT_FALSE(stream_load(config, file, Chunking::random, false, format, &error));
            EXPECT_EQ(error, std::string(seed) == "bad_offsets_past_end" ? past_end : expected);
        }
        n_seeds++;
    }
    EXPECT_EQ(n_seeds, 22);
}

TEST(StreamingLoader, AnUntiedHeadIsFoundInEitherOrder) {
    const std::string config = config_json(kSpec);
    for (bool head_first : {true, false})
        for (gpt2::WeightFormat format : {gpt2::WeightFormat::fp32, gpt2::WeightFormat::int8}) {
            auto tensors = random_tensors(kSpec, "F16");
            TensorSpec lm_head = find_tensor(tensors, "wte.weight");
            lm_head.name = "lm_head.weight";
            lm_head.bytes[2 * 1000] ^= 1;  // one element differs in its lowest bit
            if (head_first) tensors.insert(tensors.begin(), lm_head);
            else tensors.push_back(lm_head);
            std::string error;
            EXPECT_FALSE(stream_load(config, build_safetensors(tensors), Chunking::random, false, format, &error));
            EXPECT_EQ(error,
                      "model.safetensors: tensor 'lm_head.weight' differs from 'wte.weight' (only a tied LM head is "
                      "supported)");
        }
}

TEST(StreamingLoader, ANonFiniteWeightIsNamedWithItsElementInAnyChunking) {
    auto tensors = random_tensors(kSpec);
    TensorSpec& fc = find_tensor(tensors, "h.1.mlp.c_fc.weight");  // transposed: [20][80]
    const float nan = std::nanf("");
    std::memcpy(fc.bytes.data() + 4 * 1234, &nan, 4);
    const std::vector<uint8_t> file = build_safetensors(tensors);
    for (gpt2::WeightFormat format : {gpt2::WeightFormat::fp32, gpt2::WeightFormat::int8})
        for (Chunking chunking : {Chunking::whole, Chunking::one_byte, Chunking::random}) {
            std::string error;
            EXPECT_FALSE(stream_load(config_json(kSpec), file, chunking, false, format, &error));
            EXPECT_EQ(error, "model.safetensors: tensor 'h.1.mlp.c_fc.weight' contains NaN at element 1234");
        }
}

TEST(StreamingLoader, ErrorsAreFinalAndReportedAtOnce) {
    const std::string config = config_json(kSpec);
    const std::vector<uint8_t> file = build_safetensors(random_tensors(kSpec));
    gpt2::LoadOptions options;

    // config.json is checked when the loader is made, before any byte of the weights
    const std::string bad_config = "{\"vocab_size\": 67}";
    gpt2::ModelLoader bad(reinterpret_cast<const uint8_t*>(bad_config.data()), bad_config.size(), options);
    EXPECT_TRUE(bad.failed());
    EXPECT_EQ(bad.error(), "config.json: missing key \"n_embd\"");
    EXPECT_FALSE(bad.feed(file.data(), file.size()));
    EXPECT_FALSE(bad.finish());
    EXPECT_EQ(bad.error(), "config.json: missing key \"n_embd\"");

    // a text file fails as soon as its first line is in, whatever follows
    const std::string html = "<!DOCTYPE html><html><body>Sign in to continue</body></html>";
    gpt2::ModelLoader text(reinterpret_cast<const uint8_t*>(config.data()), config.size(), options);
    EXPECT_FALSE(text.feed(reinterpret_cast<const uint8_t*>(html.data()), 45));
    EXPECT_EQ(text.error(), "model.safetensors: not a safetensors file: it starts with the text \"<!DOCTYPE "
                            "html><html><body>Sign in to co\" (an HTML error page or a Git LFS pointer instead of "
                            "the weights?)");

    // an empty header is parsed (and rejected) as soon as its length is in
    const std::vector<uint8_t> empty_header(8, 0);
    std::string streamed_error;
    EXPECT_FALSE(
        stream_load(config, empty_header, Chunking::one_byte, false, gpt2::WeightFormat::fp32, &streamed_error));
    EXPECT_EQ(streamed_error, load_whole_error(config, empty_header));
    EXPECT_EQ(streamed_error.find("model.safetensors: header is not valid JSON: "), 0u);

    // with the size announced, a header longer than the file fails with its first 8 bytes
    gpt2::ModelLoader sized(reinterpret_cast<const uint8_t*>(config.data()), config.size(), options, 10);
    EXPECT_FALSE(sized.feed(file.data(), 8));
    EXPECT_EQ(sized.error().find("model.safetensors: header length "), 0u);
    EXPECT_NE(sized.error().find(" exceeds the file size (10 bytes)"), std::string::npos);

    // more bytes than announced
    gpt2::ModelLoader exact(reinterpret_cast<const uint8_t*>(config.data()), config.size(), options, file.size());
    EXPECT_TRUE(exact.feed(file.data(), file.size()));
    EXPECT_FALSE(exact.feed(file.data(), 1));
    EXPECT_EQ(exact.error(), "model.safetensors: more bytes arrived than the announced file size (" +
                                 std::to_string(file.size()) + " bytes)");

    // finish() spends the loader
    gpt2::ModelLoader once(reinterpret_cast<const uint8_t*>(config.data()), config.size(), options);
    EXPECT_TRUE(once.feed(file.data(), file.size()));
    EXPECT_TRUE(once.finish());
    EXPECT_FALSE(once.feed(file.data(), 1));
    EXPECT_EQ(once.error(), "model.safetensors: bytes fed after finish()");
}
