// Strict parser for the safetensors container: 8-byte little-endian header length N, N bytes of JSON
// header, then the raw tensor data. The front of the file (length and header) is parsed on its own, before
// any tensor data has arrived, so that the data can be converted as it streams in (engine/formats/model_loader.cpp).
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

// One tensor of the header. Its bytes are [begin, end) of the data section (the file after the header).
struct TensorInfo {
    std::string name;  // as in the file
    DType dtype = DType::F32;
    std::vector<int64_t> shape;  // dims, outermost first
    size_t n_elements = 0;       // product of shape (fits in size_t: checked against the file size or the config)
    uint64_t begin = 0;          // first byte in the data section
    uint64_t end = 0;            // one past the last byte; end - begin = n_elements * dtype_size(dtype)
};

struct SafetensorsHeader {
    std::vector<TensorInfo> tensors;                            // in header order
    std::vector<std::pair<std::string, std::string>> metadata;  // optional "__metadata__"
    uint64_t data_bytes = 0;  // size of the data section the tensors cover (back to back, no gaps)
};

// The size of a file that is streamed without a known length (e.g. a compressed HTTP response).
constexpr uint64_t kUnknownFileSize = UINT64_MAX;
// The little-endian u64 header length that starts the file.
constexpr size_t kSafetensorsLengthBytes = 8;
// A JSON header larger than this is rejected before anything is parsed or allocated.
constexpr uint64_t kSafetensorsMaxHeaderBytes = 100u * 1024u * 1024u;
// The most JSON values the header of a model of n_layer layers can need, so that more are rejected while it is
// parsed: a tensor's entry takes about 10 (its object, dtype, shape and dims, data_offsets), 16 are allowed, for up
// to 16 tensors a layer (a Hugging Face GPT-2 file has 12 and 1 or 2 attention mask buffers) and 8 others, plus 4096
// for "__metadata__". This bounds the parsed tree (json_parse_bytes) by the model's size (GPT-2 124M: 7,296 values),
// where a header of one array of 50 million small numbers, under the byte cap, would need gigabytes.
size_t safetensors_max_header_values(int n_layer);

// Errors are one line starting with "model.safetensors: ". file_size may be kUnknownFileSize: the checks that
// need it are then left to the caller, once the stream has ended (safetensors_ended_early, trailing bytes).

// At most this many bytes of a text file are quoted in the error that rejects it.
constexpr size_t kSafetensorsQuotedTextBytes = 40;

// Whether the first `available` bytes of the file (8 or more) suffice for parse_safetensors_length: a file that
// starts with text needs the first line of its first kSafetensorsQuotedTextBytes, for the message.
bool safetensors_length_ready(const uint8_t* data, size_t available);

// The first bytes of the file (at least 8, see safetensors_length_ready) -> *header_len: rejects text files (an
// HTML page, a Git LFS pointer), a length over kSafetensorsMaxHeaderBytes, and (file size known) a header
// longer than the file.
bool parse_safetensors_length(const uint8_t* data, size_t available, uint64_t file_size, uint64_t* header_len,
                              std::string* error);

// The JSON header -> *out: UTF-8, JSON object, every entry's dtype, shape and data_offsets, and a data section
// that is exactly the tensors' bytes. data_bytes: the data section's size (file size - 8 - header length), or
// kUnknownFileSize, in which case offsets past the end and trailing bytes are not checked here. n_layer: the
// config's, which bounds the header's JSON values (safetensors_max_header_values).
bool parse_safetensors_header(const uint8_t* header, size_t header_len, uint64_t data_bytes, int n_layer,
                              SafetensorsHeader* out, std::string* error);

// The error of a file that ended, after file_size bytes, before its header was complete. header_len: the
// header length once its 8 bytes have arrived, else nullptr. Always returns false.
bool safetensors_ended_early(uint64_t file_size, const uint64_t* header_len, std::string* error);

// The error of a data section with `trailing` bytes after the last tensor's (data_bytes in all). Returns false.
bool safetensors_trailing_bytes(uint64_t data_bytes, uint64_t trailing, std::string* error);

// count elements of the given dtype at raw (possibly unaligned) as float32 (F16/BF16 are widened exactly).
void decode_elements(DType dtype, const uint8_t* raw, size_t count, float* out);

}  // namespace gpt2
