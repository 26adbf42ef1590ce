#include "test_util.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

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

std::unique_ptr<gpt2::Session> greedy_session(const gpt2::Model& model, bool use_kv_cache) {
    std::string error;
    auto session = gpt2::Session::create(model, use_kv_cache, &error);
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

}  // namespace gpt2_test
