// Helpers for building GPT-2 models, safetensors files and config.json in memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpt2.h"

namespace gpt2_test {

struct TensorSpec {
    std::string name;
    std::string dtype;  // "F32", "F16", "BF16" (or anything, for error tests)
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
};

// A little-endian u64 header length, the JSON header (space padded to 8 bytes), then the data.
std::vector<uint8_t> safetensors_from_header(const std::string& header_json, const std::vector<uint8_t>& data);
// Tensors stored back to back in the given order; metadata_json (an object literal) is added when non-empty.
std::vector<uint8_t> build_safetensors(const std::vector<TensorSpec>& tensors, const std::string& metadata_json = "");

struct ModelSpec {
    int n_vocab = 67;
    int n_ctx = 40;
    int n_embd = 20;  // not a multiple of 8 and head_size 5: exercises every kernel tail
    int n_head = 4;
    int n_layer = 2;
    uint64_t seed = 1;
};

// Hugging Face GPT-2 tensors (Conv1D [in, out] layouts) with random values exactly representable in F16 and
// BF16, encoded as dtype, names prefixed by prefix.
std::vector<TensorSpec> random_tensors(const ModelSpec& spec, const std::string& dtype = "F32",
                                       const std::string& prefix = "");
std::string config_json(const ModelSpec& spec);

// Loads spec (fails the current test on error).
std::unique_ptr<gpt2::Model> make_model(const ModelSpec& spec, gpt2::WeightFormat format = gpt2::WeightFormat::fp32);
std::unique_ptr<gpt2::Model> make_model(const ModelSpec& spec, const gpt2::LoadOptions& options);
// Loads a Hugging Face folder's config.json and model.safetensors, e.g. the bundled model (fails the current test
// on error).
std::unique_ptr<gpt2::Model> load_folder(const std::string& dir, const gpt2::LoadOptions& options = {});
// A session with greedy sampling (temperature 0), with or without the KV cache (fails the current test on error).
std::unique_ptr<gpt2::Session> greedy_session(const gpt2::Model& model, bool use_kv_cache,
                                              gpt2::KvCacheFormat kv_cache = gpt2::KvCacheFormat::fp32);
std::unique_ptr<gpt2::Model> load(const std::string& config, const std::vector<uint8_t>& safetensors,
                                  std::string* error, gpt2::WeightFormat format = gpt2::WeightFormat::fp32);

// The tensor called name (the first tensor, and the current test fails, if there is none).
TensorSpec& find_tensor(std::vector<TensorSpec>& tensors, const std::string& name);

std::vector<uint8_t> float_bytes(const std::vector<float>& values);
uint32_t float_bits(float f);
// Same length and the same bits in every element (NaNs and signed zeros included).
bool same_bits(const std::vector<float>& a, const std::vector<float>& b);
std::vector<uint8_t> read_file(const std::string& path);
// A safetensors file's tensors as F32 TensorSpecs without a name prefix, for the float64 reference
// (reference_gpt2.h), e.g. the bundled model's.
std::vector<TensorSpec> read_reference_tensors(const std::string& path, int n_layer);

// GGUF v3 files written field by field (little-endian), for the GGUF reader's tests.
struct GgufKeyValue {
    std::string key;
    uint32_t type;               // GGUF value type: 0 u8 ... 4 u32, 5 i32, 6 f32, 8 string, 9 array, 10 u64 ...
    std::vector<uint8_t> value;  // the value's encoding after its type
};
struct GgufTensorSpec {
    std::string name;
    std::vector<uint64_t> ne;  // ggml order, ne[0] innermost
    uint32_t type;             // ggml type number
    std::vector<uint8_t> bytes;
    uint64_t offset = UINT64_MAX;  // UINT64_MAX: right after the previous tensor, padded to the alignment
};
struct GgufFile {
    uint32_t version = 3;
    std::vector<GgufKeyValue> metadata;
    std::vector<GgufTensorSpec> tensors;
    uint32_t alignment = 32;  // of the layout (general.alignment must be in metadata to differ from 32)
};

std::vector<uint8_t> gguf_u32_bytes(uint32_t v);
std::vector<uint8_t> gguf_u64_bytes(uint64_t v);
std::vector<uint8_t> gguf_string_bytes(const std::string& s);  // u64 length, bytes
GgufKeyValue gguf_u32(const std::string& key, uint32_t v);
GgufKeyValue gguf_f32(const std::string& key, float v);
GgufKeyValue gguf_string(const std::string& key, const std::string& v);
GgufKeyValue gguf_strings(const std::string& key, const std::vector<std::string>& v);  // array of strings
// An array of count elements of element_type whose encodings are elements (concatenated).
GgufKeyValue gguf_array(const std::string& key, uint32_t element_type, uint64_t count,
                        const std::vector<uint8_t>& elements);
// The header, metadata and tensor infos; then, with_data, the padding and each tensor's bytes at its offset and
// the last tensor's padding.
std::vector<uint8_t> build_gguf(const GgufFile& file, bool with_data = true);
// A valid GPT-2 GGUF: 4 tokens, 2 merges, context 8, embedding 32, 1 block, 2 heads, ffn 128, epsilon 1e-5, and
// tensors of several types (F32, F16, Q8_0, Q4_K, Q6_K) with patterned bytes; plus skipped keys of every value
// type.
GgufFile tiny_gguf();

}  // namespace gpt2_test
