#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "formats/safetensors.h"

namespace gpt2_test {

std::vector<uint8_t> safetensors_from_header(const std::string& header_json, const std::vector<uint8_t>& data) {
    std::string header = header_json;
    while (header.size() % 8) header += ' ';
    std::vector<uint8_t> out;
    out.reserve(8 + header.size() + data.size());
    const uint64_t n = header.size();
    for (int i = 0; i < 8; i++) out.push_back(uint8_t(n >> (8 * i)));
    out.insert(out.end(), header.begin(), header.end());
    out.insert(out.end(), data.begin(), data.end());
    return out;
}

std::vector<uint8_t> build_safetensors(const std::vector<TensorSpec>& tensors, const std::string& metadata_json) {
    std::string header = "{";
    std::vector<uint8_t> data;
    if (!metadata_json.empty()) header += "\"__metadata__\":" + metadata_json;
    for (const TensorSpec& t : tensors) {
        if (header.size() > 1) header += ",";
        header += "\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[";
        for (size_t i = 0; i < t.shape.size(); i++) header += (i ? "," : "") + std::to_string(t.shape[i]);
        header += "],\"data_offsets\":[" + std::to_string(data.size()) + "," +
                  std::to_string(data.size() + t.bytes.size()) + "]}";
        data.insert(data.end(), t.bytes.begin(), t.bytes.end());
    }
    header += "}";
    return safetensors_from_header(header, data);
}

uint32_t float_bits(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
}

TensorSpec& find_tensor(std::vector<TensorSpec>& tensors, const std::string& name) {
    for (TensorSpec& t : tensors)
        if (t.name == name) return t;
    ADD_FAILURE() << "no tensor " << name;
    return tensors[0];
}

namespace {

struct SplitMix {
    uint64_t state;
    uint64_t next() {
        uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    int range(int lo, int hi) { return lo + int(next() % uint64_t(hi - lo + 1)); }
};

// exact for the values used here (|v| = k * 2^-e with k < 256, well inside the F16 normal range)
uint16_t to_f16(float f) {
    uint32_t b = float_bits(f);
    uint32_t sign = (b >> 16) & 0x8000u;
    if ((b & 0x7FFFFFFFu) == 0) return uint16_t(sign);
    int32_t exponent = int32_t((b >> 23) & 0xFF) - 127 + 15;
    return uint16_t(sign | (uint32_t(exponent) << 10) | ((b >> 13) & 0x3FFu));
}

std::vector<uint8_t> encode(const std::vector<float>& values, const std::string& dtype) {
    std::vector<uint8_t> out;
    for (float v : values) {
        if (dtype == "F32") {
            uint32_t b = float_bits(v);
            for (int i = 0; i < 4; i++) out.push_back(uint8_t(b >> (8 * i)));
        } else {
            uint16_t h = dtype == "F16" ? to_f16(v) : uint16_t(float_bits(v) >> 16);
            out.push_back(uint8_t(h));
            out.push_back(uint8_t(h >> 8));
        }
    }
    return out;
}

}  // namespace

std::vector<TensorSpec> random_tensors(const ModelSpec& s, const std::string& dtype, const std::string& prefix) {
    SplitMix rng{s.seed};
    const int64_t C = s.n_embd;
    std::vector<TensorSpec> tensors;
    // k / 256 with |k| <= 80: 8 significant bits at most, exact in BF16 and F16
    auto add = [&](const std::string& name, std::vector<int64_t> shape, int lo, int hi, float unit) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        std::vector<float> values(static_cast<size_t>(n));
        for (float& v : values) v = float(rng.range(lo, hi)) * unit;
        tensors.push_back({prefix + name, dtype, shape, encode(values, dtype)});
    };
    add("wte.weight", {s.n_vocab, C}, -80, 80, 1.0f / 256);
    add("wpe.weight", {s.n_ctx, C}, -40, 40, 1.0f / 256);
    for (int l = 0; l < s.n_layer; l++) {
        const std::string h = "h." + std::to_string(l) + ".";
        add(h + "ln_1.weight", {C}, 48, 80, 1.0f / 64);  // around 1
        add(h + "ln_1.bias", {C}, -8, 8, 1.0f / 64);
        add(h + "attn.c_attn.weight", {C, 3 * C}, -80, 80, 1.0f / 256);
        add(h + "attn.c_attn.bias", {3 * C}, -16, 16, 1.0f / 256);
        add(h + "attn.c_proj.weight", {C, C}, -80, 80, 1.0f / 256);
        add(h + "attn.c_proj.bias", {C}, -16, 16, 1.0f / 256);
        add(h + "ln_2.weight", {C}, 48, 80, 1.0f / 64);
        add(h + "ln_2.bias", {C}, -8, 8, 1.0f / 64);
        add(h + "mlp.c_fc.weight", {C, 4 * C}, -80, 80, 1.0f / 256);
        add(h + "mlp.c_fc.bias", {4 * C}, -16, 16, 1.0f / 256);
        add(h + "mlp.c_proj.weight", {4 * C, C}, -80, 80, 1.0f / 256);
        add(h + "mlp.c_proj.bias", {C}, -16, 16, 1.0f / 256);
    }
    add("ln_f.weight", {C}, 48, 80, 1.0f / 64);
    add("ln_f.bias", {C}, -8, 8, 1.0f / 64);
    return tensors;
}

std::string config_json(const ModelSpec& s) {
    return "{\"model_type\": \"gpt2\", \"vocab_size\": " + std::to_string(s.n_vocab) +
           ", \"n_positions\": " + std::to_string(s.n_ctx) + ", \"n_ctx\": " + std::to_string(s.n_ctx) +
           ", \"n_embd\": " + std::to_string(s.n_embd) + ", \"n_head\": " + std::to_string(s.n_head) +
           ", \"n_layer\": " + std::to_string(s.n_layer) +
           ", \"layer_norm_epsilon\": 1e-05, \"n_inner\": null, \"activation_function\": \"gelu_new\"}";
}

std::unique_ptr<gpt2::Model> load(const std::string& config, const std::vector<uint8_t>& safetensors,
                                  std::string* error, gpt2::WeightFormat format) {
    gpt2::LoadOptions options;
    options.format = format;
    return gpt2::load_model(reinterpret_cast<const uint8_t*>(config.data()), config.size(), safetensors.data(),
                            safetensors.size(), options, error);
}

std::unique_ptr<gpt2::Model> make_model(const ModelSpec& spec, gpt2::WeightFormat format) {
    gpt2::LoadOptions options;
    options.format = format;
    return make_model(spec, options);
}

std::unique_ptr<gpt2::Model> make_model(const ModelSpec& spec, const gpt2::LoadOptions& options) {
    const std::string config = config_json(spec);
    const std::vector<uint8_t> safetensors = build_safetensors(random_tensors(spec));
    std::string error;
    auto model = gpt2::load_model(reinterpret_cast<const uint8_t*>(config.data()), config.size(), safetensors.data(),
                                  safetensors.size(), options, &error);
    EXPECT_TRUE(model) << error;
    return model;
}

std::unique_ptr<gpt2::Model> load_folder(const std::string& dir, const gpt2::LoadOptions& options) {
    const auto config = read_file(dir + "/config.json");
    const auto weights = read_file(dir + "/model.safetensors");
    EXPECT_FALSE(config.empty() || weights.empty()) << dir;
    std::string error;
    auto model = gpt2::load_model(config.data(), config.size(), weights.data(), weights.size(), options, &error);
    EXPECT_TRUE(model) << error;
    return model;
}

std::unique_ptr<gpt2::Session> greedy_session(const gpt2::Model& model, bool use_kv_cache,
                                              gpt2::KvCacheFormat kv_cache) {
    std::string error;
    auto session = gpt2::Session::create(model, use_kv_cache, kv_cache, &error);
    EXPECT_TRUE(session) << error;
    gpt2::SamplingSettings greedy;
    greedy.temperature = 0.0f;
    if (session) session->set_sampling(greedy);
    return session;
}

std::vector<uint8_t> float_bytes(const std::vector<float>& values) {
    std::vector<uint8_t> out(values.size() * 4);
    std::memcpy(out.data(), values.data(), out.size());
    return out;
}

std::vector<uint8_t> read_file(const std::string& path) {
    std::vector<uint8_t> data;
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return data;
    uint8_t buf[1 << 16];
    size_t got;
    while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) data.insert(data.end(), buf, buf + got);
    std::fclose(f);
    return data;
}

std::vector<uint8_t> gguf_u32_bytes(uint32_t v) {
    std::vector<uint8_t> out(4);
    std::memcpy(out.data(), &v, 4);
    return out;
}

std::vector<uint8_t> gguf_u64_bytes(uint64_t v) {
    std::vector<uint8_t> out(8);
    std::memcpy(out.data(), &v, 8);
    return out;
}

std::vector<uint8_t> gguf_string_bytes(const std::string& s) {
    std::vector<uint8_t> out(8 + s.size());
    const uint64_t length = s.size();
    std::memcpy(out.data(), &length, 8);
    if (length) std::memcpy(out.data() + 8, s.data(), s.size());
    return out;
}

GgufKeyValue gguf_u32(const std::string& key, uint32_t v) { return {key, 4, gguf_u32_bytes(v)}; }

GgufKeyValue gguf_f32(const std::string& key, float v) { return {key, 6, float_bytes({v})}; }

GgufKeyValue gguf_string(const std::string& key, const std::string& v) { return {key, 8, gguf_string_bytes(v)}; }

GgufKeyValue gguf_strings(const std::string& key, const std::vector<std::string>& v) {
    std::vector<uint8_t> elements;
    for (const std::string& s : v) {
        const std::vector<uint8_t> e = gguf_string_bytes(s);
        elements.insert(elements.end(), e.begin(), e.end());
    }
    return gguf_array(key, 8, v.size(), elements);
}

GgufKeyValue gguf_array(const std::string& key, uint32_t element_type, uint64_t count,
                        const std::vector<uint8_t>& elements) {
    std::vector<uint8_t> value = gguf_u32_bytes(element_type);
    const std::vector<uint8_t> n = gguf_u64_bytes(count);
    value.insert(value.end(), n.begin(), n.end());
    value.insert(value.end(), elements.begin(), elements.end());
    return {key, 9, value};
}

std::vector<uint8_t> build_gguf(const GgufFile& file, bool with_data) {
    std::vector<uint8_t> out = {'G', 'G', 'U', 'F'};
    auto put = [&out](const std::vector<uint8_t>& bytes) { out.insert(out.end(), bytes.begin(), bytes.end()); };
    put(gguf_u32_bytes(file.version));
    put(gguf_u64_bytes(file.tensors.size()));
    put(gguf_u64_bytes(file.metadata.size()));
    for (const GgufKeyValue& kv : file.metadata) {
        put(gguf_string_bytes(kv.key));
        put(gguf_u32_bytes(kv.type));
        put(kv.value);
    }
    auto pad = [&file](uint64_t n) { return (n + file.alignment - 1) / file.alignment * file.alignment; };
    std::vector<uint64_t> offsets;
    uint64_t next = 0;
    for (const GgufTensorSpec& t : file.tensors) {
        offsets.push_back(t.offset == UINT64_MAX ? next : t.offset);
        next = pad(offsets.back() + t.bytes.size());
        put(gguf_string_bytes(t.name));
        put(gguf_u32_bytes(uint32_t(t.ne.size())));
        for (uint64_t d : t.ne) put(gguf_u64_bytes(d));
        put(gguf_u32_bytes(t.type));
        put(gguf_u64_bytes(offsets.back()));
    }
    if (!with_data) return out;
    const size_t data_start = pad(out.size());
    for (size_t i = 0; i < file.tensors.size(); i++) {
        const std::vector<uint8_t>& bytes = file.tensors[i].bytes;
        if (out.size() < data_start + offsets[i] + bytes.size()) out.resize(data_start + offsets[i] + bytes.size());
        std::memcpy(out.data() + data_start + offsets[i], bytes.data(), bytes.size());
    }
    out.resize(pad(std::max<size_t>(out.size(), data_start)));
    return out;
}

namespace {

// n bytes 0, 7, 14, ... (mod 251) from seed: every tensor's bytes differ.
std::vector<uint8_t> patterned_bytes(size_t n, uint8_t seed) {
    std::vector<uint8_t> out(n);
    for (size_t i = 0; i < n; i++) out[i] = uint8_t((seed + 7 * i) % 251);
    return out;
}

}  // namespace

GgufFile tiny_gguf() {
    GgufFile file;
    file.metadata = {
        gguf_string("general.architecture", "gpt2"),
        gguf_string("general.name", "tiny"),
        gguf_u32("gpt2.context_length", 8),
        gguf_u32("gpt2.embedding_length", 32),
        gguf_u32("gpt2.block_count", 1),
        gguf_u32("gpt2.attention.head_count", 2),
        gguf_f32("gpt2.attention.layer_norm_epsilon", 1e-5f),
        gguf_u32("gpt2.feed_forward_length", 128),
        {"skipped.u8", 0, {1}},
        {"skipped.i8", 1, {0xFF}},
        {"skipped.u16", 2, {1, 2}},
        {"skipped.i16", 3, {3, 4}},
        {"skipped.i32", 5, gguf_u32_bytes(7)},
        {"skipped.bool", 7, {1}},
        {"skipped.u64", 10, gguf_u64_bytes(9)},
        {"skipped.i64", 11, gguf_u64_bytes(10)},
        {"skipped.f64", 12, gguf_u64_bytes(11)},
        gguf_array("skipped.empty_array", 4, 0, {}),
        gguf_array("tokenizer.ggml.token_type", 5, 4, patterned_bytes(16, 1)),
        gguf_strings("skipped.strings", {"x", "", "yz"}),
        gguf_string("tokenizer.ggml.model", "gpt2"),
        gguf_strings("tokenizer.ggml.tokens", {"a", "b", "ab", "<|endoftext|>"}),
        gguf_strings("tokenizer.ggml.merges", {"a b", "ab ab"}),
        gguf_u32("tokenizer.ggml.bos_token_id", 3),
        gguf_u32("tokenizer.ggml.eos_token_id", 3),
    };
    file.tensors = {
        {"token_embd.weight", {32, 4}, 8, patterned_bytes(4 * 34, 1)},       // Q8_0
        {"position_embd.weight", {32, 8}, 0, patterned_bytes(8 * 128, 2)},   // F32
        {"output_norm.weight", {32}, 1, patterned_bytes(64, 3)},             // F16
        {"blk.0.ffn_up.weight", {256, 2}, 12, patterned_bytes(2 * 144, 4)},  // Q4_K
        {"blk.0.ffn_down.weight", {256, 1}, 14, patterned_bytes(210, 5)},    // Q6_K
    };
    return file;
}

std::vector<TensorSpec> read_reference_tensors(const std::string& path, int n_layer) {
    const std::vector<uint8_t> file = read_file(path);
    uint64_t header_len = 0;
    std::string error;
    gpt2::SafetensorsHeader header;
    EXPECT_TRUE(gpt2::parse_safetensors_length(file.data(), file.size(), file.size(), &header_len, &error)) << error;
    const uint64_t data_at = gpt2::kSafetensorsLengthBytes + header_len;
    EXPECT_TRUE(gpt2::parse_safetensors_header(file.data() + gpt2::kSafetensorsLengthBytes, size_t(header_len),
                                               file.size() - data_at, n_layer, &header, &error))
        << error;
    std::vector<TensorSpec> tensors;
    for (const gpt2::TensorInfo& info : header.tensors) {
        std::vector<float> values(info.n_elements);
        gpt2::decode_elements(info.dtype, file.data() + data_at + info.begin, info.n_elements, values.data());
        tensors.push_back({info.name, "F32", info.shape, float_bytes(values)});
    }
    return tensors;
}

}  // namespace gpt2_test
