// Strict parser for the safetensors container: 8-byte little-endian header length N, N bytes of JSON
// header, then the raw tensor data. Only views into the caller's buffer are produced (no copies).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gpt2 {

enum class DType { F32, F16, BF16 };

const char* dtype_name(DType dtype);
size_t dtype_size(DType dtype);

struct TensorView {
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;
    const uint8_t* data = nullptr;  // into the file buffer, possibly unaligned
    size_t n_elements = 0;
};

struct SafetensorsFile {
    std::vector<TensorView> tensors;                               // in header order
    std::vector<std::pair<std::string, std::string>> metadata;    // optional "__metadata__"
};

// A JSON header larger than this is rejected before anything is parsed or allocated.
constexpr uint64_t kSafetensorsMaxHeaderBytes = 100u * 1024u * 1024u;

// Errors are one line starting with "model.safetensors: ".
bool parse_safetensors(const uint8_t* data, size_t len, SafetensorsFile* out, std::string* error);

// Elements [first, first + count) of a tensor as float32 (F16/BF16 are widened exactly).
void tensor_elements(const TensorView& tensor, size_t first, size_t count, float* out);

}  // namespace gpt2
