// The fuzz seed corpus (tests/fuzz/corpus, written by tests/fuzz/make_corpus.py) as regression tests: every
// ok_* seed loads and generates, every bad_* seed is rejected with exactly the message listed here. A seed
// without an entry fails the test, so a new seed (e.g. a fuzzer finding) comes with its expected message.
#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "../fuzz/fuzz_model.h"
#include "gpt2.h"
#include "test_util.h"

using namespace gpt2_test;

namespace {

const std::string kLoaderSeeds = GPT2_FUZZ_CORPUS_DIR "/loader/";
const std::string kConfigSeeds = GPT2_FUZZ_CORPUS_DIR "/config/";

std::string too_short(int n) {
    return "model.safetensors: file is " + std::to_string(n) + " bytes, too short for the 8-byte header length";
}

const char kNotSafetensors[] = "model.safetensors: not a safetensors file: it starts with the text \"";
const char kDownloadHint[] = "\" (an HTML error page or a Git LFS pointer instead of the weights?)";

// The safetensors decisions beyond the header grammar: the data section is exactly the tensors' bytes (no
// gaps, overlaps or trailing bytes, as the format requires), the header is UTF-8 without control characters
// in names, and every weight is finite.
const std::map<std::string, std::string> kLoaderErrors = {
    {"bad_0_byte_file", too_short(0)},
    {"bad_1_byte_file", too_short(1)},
    {"bad_2_byte_file", too_short(2)},
    {"bad_3_byte_file", too_short(3)},
    {"bad_4_byte_file", too_short(4)},
    {"bad_5_byte_file", too_short(5)},
    {"bad_6_byte_file", too_short(6)},
    {"bad_7_byte_file", too_short(7)},
    {"bad_html_error_page", kNotSafetensors + std::string("<!DOCTYPE html>") + kDownloadHint},
    {"bad_git_lfs_pointer", kNotSafetensors + std::string("version https://git-lfs.github.com/spec/") + kDownloadHint},
    {"bad_json_error_body", kNotSafetensors + std::string("{\"error\":\"Entry not found\"}") + kDownloadHint},
    {"bad_header_longer_than_file", "model.safetensors: header length 11145 exceeds the file size (11152 bytes)"},
    {"bad_header_over_cap", "model.safetensors: header length 104857601 exceeds the 104857600-byte limit"},
    {"bad_header_truncated_json", "model.safetensors: header is not valid JSON: unterminated string at byte 1156"},
    {"bad_header_not_utf8", "model.safetensors: header is not valid UTF-8 (byte 12)"},
    {"bad_header_overlong_utf8", "model.safetensors: header is not valid UTF-8 (byte 2)"},
    {"bad_header_not_json", "model.safetensors: header is not valid JSON: expected a string key at byte 1"},
    {"bad_header_not_object", "model.safetensors: header is not a JSON object"},
    {"bad_header_too_deep", "model.safetensors: header is not valid JSON: nesting deeper than 64 levels at byte 64"},
    {"bad_entry_not_object", "model.safetensors: tensor 'wte.weight': header entry is not an object"},
    {"bad_metadata_not_object", "model.safetensors: \"__metadata__\" is not an object"},
    {"bad_metadata_not_string", "model.safetensors: \"__metadata__\" value for \"format\" is not a string"},
    {"bad_duplicate_tensor", "model.safetensors: header is not valid JSON: duplicate key \"wte.weight\" at byte 63"},
    {"bad_unknown_dtype",
     "model.safetensors: tensor 'ln_f.bias' has unsupported dtype \"F64\" (expected F32, F16 or BF16)"},
    {"bad_integer_dtype",
     "model.safetensors: tensor 'wpe.weight' has unsupported dtype \"I8\" (expected F32, F16 or BF16)"},
    {"bad_missing_data_offsets", "model.safetensors: tensor 'ln_f.bias': missing or non-array \"data_offsets\""},
    {"bad_missing_shape", "model.safetensors: tensor 'ln_f.bias': missing or non-array \"shape\""},
    {"bad_inverted_offsets", "model.safetensors: tensor 'wte.weight': data_offsets [8, 4] are inverted"},
    {"bad_offsets_past_end",
     "model.safetensors: tensor 'wte.weight': data_offsets [8816, 8848] run past the end of the data section "
     "(8832 bytes)"},
    {"bad_offsets_size_mismatch",
     "model.safetensors: tensor 'ln_f.bias': data_offsets cover 32 bytes, but shape and dtype F32 need 36"},
    {"bad_overlapping_offsets", "model.safetensors: tensors 'a' and 'b' have overlapping data_offsets"},
    {"bad_gap_between_tensors",
     "model.safetensors: the data section has a gap: bytes [8, 12) before tensor 'b' belong to no tensor"},
    {"bad_trailing_bytes",
     "model.safetensors: 8 trailing bytes after the tensor data (data_offsets end at 8832, the data section has "
     "8840 bytes)"},
    {"bad_shape_overflow", "model.safetensors: tensor 'wte.weight': shape element count overflows"},
    {"bad_shape_product_wraps", "model.safetensors: tensor 'wte.weight': shape element count overflows"},
    {"bad_negative_dim", "model.safetensors: tensor 'ln_f.bias': shape entries must be non-negative integers"},
    {"bad_fractional_dim", "model.safetensors: tensor 'wte.weight': shape entries must be non-negative integers"},
    {"bad_string_dim", "model.safetensors: tensor 'wte.weight': shape entries must be non-negative integers"},
    {"bad_proto_tensor_name", "model.safetensors: unexpected tensor '__proto__'"},
    {"bad_control_char_name", "model.safetensors: tensor name 'wte\\u000A.weight' contains a control character"},
    {"bad_dtype_with_newline",
     "model.safetensors: tensor 'wpe.weight' has unsupported dtype \"F32\\u000A<b>\" (expected F32, F16 or BF16)"},
    {"bad_duplicate_key_with_newline",
     "model.safetensors: header is not valid JSON: duplicate key \"a\\u000Ab\" at byte 57"},
    {"bad_wrong_architecture_llama", "model.safetensors: unexpected tensor 'model.embed_tokens.weight'"},
    {"bad_wrong_size", "model.safetensors: tensor 'h.0.attn.c_attn.bias' has shape [48], expected [24]"},
    {"bad_missing_layer", "model.safetensors: missing tensor 'h.1.ln_1.weight'"},
    {"bad_same_parameter_twice",
     "model.safetensors: tensors 'wpe.weight' and 'transformer.wpe.weight' are the same parameter"},
    {"bad_untied_lm_head",
     "model.safetensors: tensor 'lm_head.weight' differs from 'wte.weight' (only a tied LM head is supported)"},
    {"bad_nan_weight_f32", "model.safetensors: tensor 'h.0.mlp.c_fc.weight' contains NaN at element 37"},
    {"bad_inf_weight_f16", "model.safetensors: tensor 'wte.weight' contains Inf at element 5"},
    {"bad_neg_inf_weight_bf16", "model.safetensors: tensor 'h.1.attn.c_proj.weight' contains -Inf at element 9"},
};

const std::map<std::string, std::string> kConfigErrors = {
    {"bad_empty", "config.json: not valid JSON: unexpected end of input at byte 0"},
    {"bad_not_json", "config.json: not valid JSON: unexpected character at byte 0"},
    {"bad_truncated", "config.json: not valid JSON: unterminated string at byte 100"},
    {"bad_top_level_array", "config.json: top level is not a JSON object"},
    {"bad_missing_vocab_size", "config.json: missing key \"vocab_size\""},
    {"bad_string_n_embd", "config.json: \"n_embd\" must be an integer"},
    {"bad_fractional_n_head", "config.json: \"n_head\" must be an integer"},
    {"bad_zero_n_layer", "config.json: \"n_layer\" is 0, expected 1..4096"},
    {"bad_huge_vocab_size", "config.json: \"vocab_size\" is 1099511627776, expected 1..16777216"},
    {"bad_n_head_not_dividing", "config.json: n_embd 8 is not divisible by n_head 3"},
    {"bad_n_inner", "config.json: \"n_inner\" 24 is not supported (only 4 * n_embd = 32)"},
    {"bad_negative_epsilon", "config.json: \"layer_norm_epsilon\" must be a positive number"},
    {"bad_duplicate_key", "config.json: not valid JSON: duplicate key \"n_embd\" at byte 99"},
    {"bad_lone_surrogate", "config.json: not valid JSON: unpaired surrogate in \\u escape at byte 111"},
    {"bad_duplicate_key_with_newline", "config.json: not valid JSON: duplicate key \"a\\u000Ab\" at byte 110"},
    {"bad_trailing_garbage", "config.json: not valid JSON: unexpected trailing characters at byte 99"},
    {"bad_too_deep", "config.json: not valid JSON: nesting deeper than 64 levels at byte 320"},
    {"bad_wrong_sizes_for_the_weights",
     "model.safetensors: tensor 'h.0.attn.c_attn.bias' has shape [24], expected [48]"},
};

// Seed names without extension, sorted.
std::vector<std::string> seeds(const std::string& dir) {
    std::vector<std::string> names;
    DIR* d = opendir(dir.c_str());
    EXPECT_TRUE(d) << dir;
    if (!d) return names;
    while (const dirent* entry = readdir(d)) {
        std::string name = entry->d_name;
        if (name[0] == '.') continue;
        names.push_back(name.substr(0, name.rfind('.')));
    }
    closedir(d);
    std::sort(names.begin(), names.end());
    return names;
}

std::string file_of(const std::string& dir, const std::string& seed) {
    return dir + seed + (dir == kConfigSeeds ? ".json" : ".safetensors");
}

// Prompt + 2 greedy steps; the session's error ("" if it generated).
std::string generate(const gpt2::Model& model) {
    std::string error;
    auto session = gpt2::Session::create(model, true, &error);
    EXPECT_TRUE(session) << error;
    gpt2::SamplingSettings greedy;
    greedy.temperature = 0.0f;
    session->set_sampling(greedy);
    const int32_t prompt[3] = {1, 2, 3};
    int next = session->prefill(prompt, 3);
    for (int i = 0; i < 2 && next >= 0; i++) next = session->step(next);
    return next >= 0 ? "" : session->error();
}

// Loads every seed of dir (config.json seeds with the ok F32 model, model seeds with the fuzz config) and checks
// it against errors.
void check_seeds(const std::string& dir, const std::map<std::string, std::string>& errors) {
    const std::vector<std::string> names = seeds(dir);
    const std::vector<uint8_t> model_bytes = read_file(kLoaderSeeds + "ok_gpt2_layout_f32.safetensors");
    int n_ok = 0, n_bad = 0;
    for (const std::string& name : names) {
        SCOPED_TRACE(file_of(dir, name));
        const std::vector<uint8_t> bytes = read_file(file_of(dir, name));
        const std::string config = dir == kConfigSeeds ? std::string(bytes.begin(), bytes.end())
                                                       : std::string(gpt2_fuzz::kModelConfigJson);
        std::string error;
        auto model = load(config, dir == kConfigSeeds ? model_bytes : bytes, &error);
        if (name.compare(0, 3, "ok_") == 0) {
            n_ok++;
            ASSERT_TRUE(model) << error;
            if (name == "ok_overflowing_weights_f32")  // finite weights, but the activations overflow
                EXPECT_EQ(generate(*model), "the model produced non-finite logits (NaN/Inf) at position 2");
            else EXPECT_EQ(generate(*model), "");
        } else {
            n_bad++;
            ASSERT_EQ(name.compare(0, 4, "bad_"), 0) << "seed names start with ok_ or bad_";
            EXPECT_FALSE(model);
            EXPECT_EQ(error.find('\n'), std::string::npos) << "errors are one line";
            auto expected = errors.find(name);
            if (expected == errors.end())
                ADD_FAILURE() << "no expected message for this seed; it fails with: " << error;
            else EXPECT_EQ(error, expected->second);
        }
    }
    EXPECT_GE(n_ok, 1);
    EXPECT_EQ(size_t(n_bad), errors.size()) << "every listed message has its seed";
    for (const auto& entry : errors)
        EXPECT_TRUE(std::binary_search(names.begin(), names.end(), entry.first)) << "missing seed " << entry.first;
}

}  // namespace

TEST(MalformedSeeds, ModelSeedsLoadOrFailWithTheirMessage) { check_seeds(kLoaderSeeds, kLoaderErrors); }

TEST(MalformedSeeds, ConfigSeedsLoadOrFailWithTheirMessage) { check_seeds(kConfigSeeds, kConfigErrors); }
