// GGUF files as models (ModelLoader's GGUF form, engine/formats/gguf_weights.h): every tensor type in one forward pass
// against the float64 reference of its dequantized weights (tests/fixtures/tiny-gguf,
// gpt2tools.fixtures.make_gguf_fixtures), streaming, caching and threads bit for bit, the file's tokenizer, and files
// that are not a gpt2 model.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <tuple>

#include "formats/gguf.h"
#include "formats/json.h"
#include "gpt2.h"
#include "inspection/inspector.h"
#include "model/weights.h"
#include "test_util.h"

using namespace gpt2_test;

namespace {

const std::string kDir = GPT2_GGUF_FIXTURE_DIR;

// Streams file into a GGUF loader in pieces of `piece` bytes.
std::unique_ptr<gpt2::Model> load_gguf(const std::vector<uint8_t>& file, size_t piece, int n_threads,
                                       std::string* error, gpt2::ErrorKind* kind = nullptr) {
    gpt2::LoadOptions options;
    options.n_threads = n_threads;
    gpt2::ModelLoader loader(options, file.size());
    for (size_t at = 0; at < file.size() && !loader.failed(); at += piece)
        loader.feed(file.data() + at, std::min(piece, file.size() - at));
    std::unique_ptr<gpt2::Model> model = loader.finish();
    *error = loader.error();
    if (kind) *kind = loader.error_kind();
    return model;
}

std::string load_error(const std::vector<uint8_t>& file) {
    std::string error;
    EXPECT_FALSE(load_gguf(file, file.size(), 1, &error));
    return error;
}

struct Fixture {
    std::vector<uint8_t> file;
    std::vector<int32_t> prompt;
    std::vector<float> logits;  // (prompt, n_vocab) the float64 reference on the dequantized weights
};

const Fixture& fixture() {
    static const Fixture f = [] {
        Fixture out;
        out.file = read_file(kDir + "/model.gguf");
        const std::vector<uint8_t> cases = read_file(kDir + "/cases.json");
        gpt2::JsonValue root;
        std::string error;
        EXPECT_TRUE(gpt2::parse_json(reinterpret_cast<const char*>(cases.data()), cases.size(), &root, &error))
            << error;
        for (const gpt2::JsonValue& id : root.find("prompt")->array) out.prompt.push_back(int32_t(id.integer));
        const std::vector<uint8_t> logits = read_file(kDir + "/logits.f32");
        out.logits.resize(logits.size() / 4);
        std::memcpy(out.logits.data(), logits.data(), logits.size());
        return out;
    }();
    return f;
}

std::vector<float> prompt_logits(const gpt2::Model& model, const std::vector<int32_t>& prompt) {
    std::string error;
    auto session = gpt2::Session::create(model, true, &error);
    std::vector<float> logits(prompt.size() * size_t(model.config().n_vocab));
    EXPECT_TRUE(session->prefill_logits(prompt.data(), prompt.size(), logits.data())) << session->error();
    return logits;
}

TEST(GgufModel, AFileWithEveryTensorTypeMatchesTheFloat64ReferenceOfItsDequantizedWeights) {
    const Fixture& f = fixture();
    std::string error;
    auto model = load_gguf(f.file, f.file.size(), 1, &error);
    ASSERT_TRUE(model) << error;
    EXPECT_EQ(gpt2::model_weight_types(*model), "f16, fp32, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k");
    const std::vector<float> logits = prompt_logits(*model, f.prompt);
    ASSERT_EQ(logits.size(), f.logits.size());
    const size_t V = size_t(model->config().n_vocab);
    double max_diff = 0.0, sum_diff = 0.0, sum_sq = 0.0;
    int same_top1 = 0;
    for (size_t t = 0; t < f.prompt.size(); t++) {
        const float* ours = logits.data() + t * V;
        const float* ref = f.logits.data() + t * V;
        for (size_t v = 0; v < V; v++) {
            max_diff = std::max(max_diff, std::fabs(double(ours[v]) - ref[v]));
            sum_diff += std::fabs(double(ours[v]) - ref[v]);
            sum_sq += double(ref[v]) * ref[v];
        }
        same_top1 += std::max_element(ours, ours + V) - ours == std::max_element(ref, ref + V) - ref;
    }
    const double ref_rms = std::sqrt(sum_sq / double(f.logits.size()));
    const double mean_diff = sum_diff / double(f.logits.size());
    std::printf("GGUF (every type) vs float64 reference: |logit diff| max %.4f, mean %.4f (logit rms %.3f), "
                "top-1 %d/%zu\n",
                max_diff, mean_diff, ref_rms, same_top1, f.prompt.size());
    // What remains is the activations' quantization to 8 bits per 32-value block (block_formats.h), as in
    // llama.cpp. The same quantization simulated in NumPy on the reference's matmul inputs moves these logits by
    // 0.12 on average and 0.78 at most (this fixture's weights are wide: logit rms 8.1); measured here: 0.08 and
    // 0.57. Bounds: 2 % and 10 % of the logits' rms.
    EXPECT_LT(mean_diff, 0.02 * ref_rms);
    EXPECT_LT(max_diff, 0.1 * ref_rms);
    EXPECT_GE(same_top1, int(f.prompt.size()) - 1);
}

TEST(GgufModel, TheFileFedOneByteAtATimeGivesTheSameLogitsAsFedWhole) {
    const Fixture& f = fixture();
    std::string error;
    auto whole = load_gguf(f.file, f.file.size(), 1, &error);
    ASSERT_TRUE(whole) << error;
    for (size_t piece : {size_t(1), size_t(7), size_t(4096 + 3)}) {
        auto pieces = load_gguf(f.file, piece, 1, &error);
        ASSERT_TRUE(pieces) << "pieces of " << piece << ": " << error;
        EXPECT_TRUE(same_bits(prompt_logits(*whole, f.prompt), prompt_logits(*pieces, f.prompt)))
            << "pieces of " << piece;
    }
}

TEST(GgufModel, CachedDecodingEqualsTheBatchedPassBitForBit) {
    const Fixture& f = fixture();
    std::string error;
    auto model = load_gguf(f.file, f.file.size(), 1, &error);
    ASSERT_TRUE(model) << error;
    const std::vector<float> batched = prompt_logits(*model, f.prompt);
    auto session = gpt2::Session::create(*model, true, &error);
    const size_t V = size_t(model->config().n_vocab);
    ASSERT_GE(session->prefill(f.prompt.data(), 1), 0);
    EXPECT_TRUE(same_bits(std::vector<float>(session->logits(), session->logits() + V),
                          std::vector<float>(batched.begin(), batched.begin() + V)));
    for (size_t t = 1; t < f.prompt.size(); t++) {
        ASSERT_GE(session->step(f.prompt[t]), 0) << session->error();
        EXPECT_TRUE(same_bits(std::vector<float>(session->logits(), session->logits() + V),
                              std::vector<float>(batched.begin() + t * V, batched.begin() + (t + 1) * V)))
            << "position " << t;
    }
}

TEST(GgufModel, AnyThreadCountGivesTheSameLogitsBitForBit) {
    const Fixture& f = fixture();
    std::string error;
    auto one = load_gguf(f.file, f.file.size(), 1, &error);
    auto three = load_gguf(f.file, f.file.size(), 3, &error);
    ASSERT_TRUE(one && three) << error;
    EXPECT_TRUE(same_bits(prompt_logits(*one, f.prompt), prompt_logits(*three, f.prompt)));
    // one token at a time: the decode is split over output rows
    auto s1 = gpt2::Session::create(*one, true, &error);
    auto s3 = gpt2::Session::create(*three, true, &error);
    for (size_t t = 0; t < f.prompt.size(); t++) {
        const int a = t == 0 ? s1->prefill(f.prompt.data(), 1) : s1->step(f.prompt[t]);
        const int b = t == 0 ? s3->prefill(f.prompt.data(), 1) : s3->step(f.prompt[t]);
        ASSERT_EQ(a, b);
        const size_t V = size_t(one->config().n_vocab);
        ASSERT_TRUE(same_bits(std::vector<float>(s1->logits(), s1->logits() + V),
                              std::vector<float>(s3->logits(), s3->logits() + V)))
            << "position " << t;
    }
}

TEST(GgufModel, TheModelKeepsTheFilesTokenizerAndHyperParameters) {
    const Fixture& f = fixture();
    std::string error;
    auto model = load_gguf(f.file, f.file.size(), 1, &error);
    ASSERT_TRUE(model) << error;
    const gpt2::Config& c = model->config();
    EXPECT_EQ(c.n_vocab, 384);
    EXPECT_EQ(c.n_ctx, 64);
    EXPECT_EQ(c.n_embd, 256);
    EXPECT_EQ(c.n_head, 4);
    EXPECT_EQ(c.n_layer, 2);
    EXPECT_FLOAT_EQ(c.layer_norm_epsilon, 1e-5f);
    const gpt2::Vocabulary* vocabulary = model->vocabulary();
    ASSERT_NE(vocabulary, nullptr);
    ASSERT_EQ(vocabulary->tokens.size(), 384u);
    EXPECT_EQ(vocabulary->tokens[0], "\xC4\x80");  // byte 0 as GPT-2's byte-level character U+0100
    EXPECT_EQ(vocabulary->tokens[33], "!");
    EXPECT_EQ(vocabulary->tokens[383], "<|endoftext|>");
    EXPECT_EQ(vocabulary->merges.size(), 383u - 256u);
    EXPECT_EQ(vocabulary->eos_token_id, 383u);
    EXPECT_TRUE(vocabulary->has_bos_token_id);
}

TEST(GgufModel, ResidentWeightsAreAboutTheFilesSize) {
    const Fixture& f = fixture();
    std::string error;
    auto model = load_gguf(f.file, f.file.size(), 1, &error);
    ASSERT_TRUE(model) << error;
    const double ratio = double(gpt2::model_weight_bytes(*model)) / double(f.file.size());
    std::printf("weights %zu bytes, file %zu bytes: %.3f\n", gpt2::model_weight_bytes(*model), f.file.size(), ratio);
    EXPECT_LT(ratio, 1.15);
}

TEST(GgufModel, ASafetensorsModelHasNoVocabularyOfItsOwn) {
    const std::vector<uint8_t> config = read_file(std::string(GPT2_FIXTURE_DIR) + "/config.json");
    const std::vector<uint8_t> weights = read_file(std::string(GPT2_FIXTURE_DIR) + "/model.safetensors");
    std::string error;
    auto model = gpt2::load_model(config.data(), config.size(), weights.data(), weights.size(), &error);
    ASSERT_TRUE(model) << error;
    EXPECT_EQ(model->vocabulary(), nullptr);
    EXPECT_EQ(gpt2::model_weight_types(*model), "fp32");
}

// A valid gpt2 GGUF of F32 tensors with tiny_gguf()'s metadata (embedding 32, 1 block, 2 heads, 4 tokens,
// context 8), for the errors below.
GgufFile small_model() {
    GgufFile file;
    file.metadata = tiny_gguf().metadata;
    auto floats = [](uint64_t n) { return float_bytes(std::vector<float>(size_t(n), 0.01f)); };
    auto add = [&](const std::string& name, std::vector<uint64_t> ne) {
        uint64_t n = 1;
        for (uint64_t d : ne) n *= d;
        file.tensors.push_back({name, ne, 0, floats(n)});
    };
    add("token_embd.weight", {32, 4});
    add("position_embd.weight", {32, 8});
    for (const char* norm : {"attn_norm", "ffn_norm"}) {
        add(std::string("blk.0.") + norm + ".weight", {32});
        add(std::string("blk.0.") + norm + ".bias", {32});
    }
    for (auto [name, n_in, n_out] : {std::tuple<const char*, uint64_t, uint64_t>{"attn_qkv", 32, 96},
                                     {"attn_output", 32, 32},
                                     {"ffn_up", 32, 128},
                                     {"ffn_down", 128, 32}}) {
        add(std::string("blk.0.") + name + ".weight", {n_in, n_out});
        add(std::string("blk.0.") + name + ".bias", {n_out});
    }
    add("output_norm.weight", {32});
    add("output_norm.bias", {32});
    return file;
}

GgufTensorSpec& tensor(GgufFile& file, const std::string& name) {
    for (GgufTensorSpec& t : file.tensors)
        if (t.name == name) return t;
    ADD_FAILURE() << "no tensor " << name;
    return file.tensors[0];
}

void set_value(GgufFile& file, const GgufKeyValue& value) {
    for (GgufKeyValue& kv : file.metadata)
        if (kv.key == value.key) kv = value;
}

TEST(GgufModel, TheSmallF32ModelLoadsWithAFileOfItsOwnTiedHead) {
    std::string error;
    auto model = load_gguf(build_gguf(small_model()), 1 << 20, 1, &error);
    ASSERT_TRUE(model) << error;
    EXPECT_EQ(model->weights().output.weight, nullptr);  // no output.weight: the head is token_embd
    EXPECT_EQ(&model->weights().lm_head(), &model->weights().wte);
    EXPECT_EQ(gpt2::model_weight_types(*model), "fp32");
}

TEST(GgufModel, AnF16VectorIsWidenedExactlyInPlace) {
    GgufFile file = small_model();
    GgufTensorSpec& bias = tensor(file, "blk.0.ffn_up.bias");
    bias.type = 1;  // F16: 128 halves cycling through these patterns and their values
    const uint16_t halves[] = {0x3C00, 0xC000, 0x3800, 0x0001, 0x7BFF, 0x8000};
    const float values[] = {1.0f, -2.0f, 0.5f, 0x1p-24f, 65504.0f, -0.0f};
    bias.bytes.clear();
    std::vector<float> expected;
    for (int i = 0; i < 128; i++) {
        bias.bytes.push_back(uint8_t(halves[i % 6]));
        bias.bytes.push_back(uint8_t(halves[i % 6] >> 8));
        expected.push_back(values[i % 6]);
    }
    std::string error;
    auto model = load_gguf(build_gguf(file), 7, 1, &error);
    ASSERT_TRUE(model) << error;
    const float* widened = model->weights().layers[0].mlp_fc.bias;
    EXPECT_TRUE(same_bits(std::vector<float>(widened, widened + 128), expected));
}

TEST(GgufModel, AMissingTensorIsNamed) {
    GgufFile file = small_model();
    file.tensors.erase(file.tensors.begin() + 5);  // blk.0.ffn_norm.bias
    EXPECT_EQ(load_error(build_gguf(file)), "model.gguf: missing tensor 'blk.0.ffn_norm.bias'");
}

TEST(GgufModel, AnUnexpectedTensorIsNamed) {
    GgufFile file = small_model();
    file.tensors.push_back({"blk.1.attn_norm.weight", {32}, 0, float_bytes(std::vector<float>(32, 0.0f))});
    EXPECT_EQ(load_error(build_gguf(file)),
              "model.gguf: unexpected tensor 'blk.1.attn_norm.weight' (not one of a gpt2 model with 1 layers)");
}

TEST(GgufModel, ATensorNameWithControlCharactersStaysOnOneLineInTheMessage) {  // found by fuzz_gguf_model
    GgufFile file = small_model();
    file.tensors.push_back({"b\n\x01", {32}, 0, float_bytes(std::vector<float>(32, 0.0f))});
    EXPECT_EQ(load_error(build_gguf(file)),
              "model.gguf: unexpected tensor 'b\\u000A\\u0001' (not one of a gpt2 model with 1 layers)");
}

TEST(GgufModel, AMisShapedTensorIsNamedWithBothShapes) {
    GgufFile file = small_model();
    GgufTensorSpec& qkv = tensor(file, "blk.0.attn_qkv.weight");
    qkv.ne = {96, 32};  // Hugging Face's Conv1D order, not GGUF's
    EXPECT_EQ(load_error(build_gguf(file)),
              "model.gguf: tensor 'blk.0.attn_qkv.weight' has shape [96, 32], expected [32, 96]");
}

TEST(GgufModel, TheTokenEmbeddingMustHaveOneRowPerToken) {
    GgufFile file = small_model();
    set_value(file, gguf_strings("tokenizer.ggml.tokens", {"a", "b", "ab", "<|endoftext|>", "extra"}));
    EXPECT_EQ(load_error(build_gguf(file)),
              "model.gguf: tensor 'token_embd.weight' has shape [32, 4], expected [32, 5]");
}

TEST(GgufModel, AQuantizedVectorIsRefused) {
    GgufFile file = small_model();
    GgufTensorSpec& bias = tensor(file, "output_norm.bias");
    bias.type = 8;  // Q8_0: one 34-byte block of 32 values
    bias.bytes = std::vector<uint8_t>(34, 0);
    EXPECT_EQ(load_error(build_gguf(file)),
              "model.gguf: tensor 'output_norm.bias' has type Q8_0; vectors and position_embd must be F32 or F16");
}

TEST(GgufModel, AnMlpWidthOtherThanFourTimesTheEmbeddingIsRefused) {
    GgufFile file = small_model();
    set_value(file, gguf_u32("gpt2.feed_forward_length", 96));
    EXPECT_EQ(load_error(build_gguf(file)),
              "model.gguf: gpt2.feed_forward_length 96 is not supported (only 4 * embedding_length = 128)");
}

TEST(GgufModel, HyperParametersOutOfRangeAreRefusedBeforeAnyAllocation) {
    GgufFile file = small_model();
    set_value(file, gguf_u32("gpt2.block_count", 0));
    EXPECT_EQ(load_error(build_gguf(file)), "model.gguf: gpt2.block_count is 0, expected 1..4096");
    file = small_model();
    set_value(file, gguf_u32("gpt2.attention.head_count", 3));
    EXPECT_EQ(load_error(build_gguf(file)),
              "model.gguf: gpt2.embedding_length 32 is not divisible by gpt2.attention.head_count 3");
}

TEST(GgufModel, ANonFiniteWeightIsNamedWithItsElement) {
    GgufFile file = small_model();
    GgufTensorSpec& bias = tensor(file, "blk.0.ffn_up.bias");
    std::vector<float> values(128, 0.0f);
    values[17] = std::nanf("");
    bias.bytes = float_bytes(values);
    EXPECT_EQ(load_error(build_gguf(file)), "model.gguf: tensor 'blk.0.ffn_up.bias' contains NaN at element 17");
}

TEST(GgufModel, AskingForInt8IsAnInputError) {
    gpt2::LoadOptions options;
    options.format = gpt2::WeightFormat::int8;
    gpt2::ModelLoader loader(options);
    EXPECT_EQ(loader.error_kind(), gpt2::ErrorKind::input);
    EXPECT_EQ(loader.error(),
              "model.gguf: a GGUF model runs in the types its file stores; re-quantizing it to int8 is not offered");
}

TEST(GgufModel, AFileEndingEarlyIsAFileErrorAndNothingIsLeaked) {
    const Fixture& f = fixture();
    const std::vector<uint8_t> truncated(f.file.begin(), f.file.begin() + f.file.size() / 2);
    gpt2::LoadOptions options;
    gpt2::ModelLoader loader(options);
    EXPECT_TRUE(loader.feed(truncated.data(), truncated.size()));
    EXPECT_EQ(loader.finish(), nullptr);
    EXPECT_EQ(loader.error_kind(), gpt2::ErrorKind::file);
    EXPECT_EQ(loader.error().rfind("model.gguf: the file ended", 0), 0u) << loader.error();
}

}  // namespace

// Inspection reads a GGUF model's passes as any other's: each block type's matrices run in the pass it observes, and
// the logit lens goes through the file's own output matrix (Q6_K here), so its last layer is the pass's logits.
TEST(GgufModel, AnInspectedPassOfEveryTensorTypeGivesItsOwnLogitsAndAttentionRowsOfOne) {
    const Fixture& f = fixture();
    std::string error;
    auto model = load_gguf(f.file, f.file.size(), 1, &error);
    ASSERT_TRUE(model) << error;
    const gpt2::Config& c = model->config();
    for (gpt2::KvCacheFormat kv : {gpt2::KvCacheFormat::fp32, gpt2::KvCacheFormat::int8}) {
        auto session = gpt2::Session::create(*model, true, kv, &error);
        ASSERT_TRUE(session) << error;
        gpt2::Inspector inspector(*session);
        std::vector<int32_t> layers(size_t(c.n_layer)), heads(size_t(c.n_head));
        for (int l = 0; l < c.n_layer; l++) layers[size_t(l)] = l;
        for (int h = 0; h < c.n_head; h++) heads[size_t(h)] = h;
        ASSERT_TRUE(inspector.configure({{}, layers, heads, 5})) << session->error();
        ASSERT_TRUE(inspector.feed_prompt(f.prompt.data(), f.prompt.size(), false)) << session->error();
        EXPECT_EQ(std::memcmp(inspector.last_lens_logits(), session->logits(), sizeof(float) * size_t(c.n_vocab)), 0);
        const int n_keys = inspector.positions()[0] + 1;
        for (size_t row = 0; row < layers.size() * heads.size(); row++) {
            double sum = 0;
            for (int j = 0; j < n_keys; j++) sum += inspector.attention()[row * size_t(inspector.row_stride()) + j];
            EXPECT_NEAR(sum, 1.0, 1e-5) << row;
        }
    }
}
