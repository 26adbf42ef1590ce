#include "formats/safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "formats/json.h"
#include "kernels/float16.h"

// Tensor data is read with memcpy into host integers/floats, which is only correct on little-endian
// hosts (x86, ARM, wasm). Refuse to build elsewhere rather than load garbage.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the safetensors reader assumes a little-endian host");

namespace gpt2 {

const char* dtype_name(DType dtype) {
    switch (dtype) {
        case DType::F32: return "F32";
        case DType::F16: return "F16";
        case DType::BF16: return "BF16";
    }
    return "?";
}

size_t dtype_size(DType dtype) { return dtype == DType::F32 ? 4 : 2; }

void decode_elements(DType dtype, const uint8_t* raw, size_t count, float* out) {
    if (dtype == DType::F32) {
        std::memcpy(out, raw, 4 * count);
        return;
    }
    for (size_t i = 0; i < count; i++) {
        uint16_t h;
        std::memcpy(&h, raw + 2 * i, 2);
        out[i] = dtype == DType::F16 ? f16_to_float(h) : bf16_to_float(h);
    }
}

namespace {

bool fail(std::string* error, const std::string& message) {
    if (error) *error = "model.safetensors: " + message;
    return false;
}

std::string quoted(const std::string& name) { return "'" + name + "'"; }

// Offset of the first byte that breaks UTF-8 (RFC 3629: no overlong forms, surrogates or code points above
// U+10FFFF), or len. The format requires a UTF-8 header; the JSON parser itself passes bytes through.
size_t first_invalid_utf8(const uint8_t* s, size_t len) {
    size_t i = 0;
    while (i < len) {
        const uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t n;                      // continuation bytes
        uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the first continuation byte
        if (c >= 0xC2 && c <= 0xDF) n = 1;
        else if (c == 0xE0) n = 2, lo = 0xA0;
        else if (c == 0xED) n = 2, hi = 0x9F;
        else if (c >= 0xE1 && c <= 0xEF) n = 2;
        else if (c == 0xF0) n = 3, lo = 0x90;
        else if (c == 0xF4) n = 3, hi = 0x8F;
        else if (c >= 0xF1 && c <= 0xF3) n = 3;
        else return i;
        if (len - i <= n || s[i + 1] < lo || s[i + 1] > hi) return i;
        for (size_t k = 2; k <= n; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF) return i;
        i += n + 1;
    }
    return len;
}

// True when the 8 length bytes are all printable ASCII: no real header length looks like that (it would be
// over 2^61), but an HTML error page, a Git LFS pointer or a JSON error body saved as model.safetensors does.
bool starts_with_text(const uint8_t* data) {
    for (int i = 0; i < 8; i++)
        if (!((data[i] >= 0x20 && data[i] < 0x7F) || data[i] == '\t' || data[i] == '\n' || data[i] == '\r'))
            return false;
    return true;
}

// The first line of a text file, shortened, for an error message.
std::string first_line(const uint8_t* data, size_t len) {
    std::string line;
    for (size_t i = 0; i < len && line.size() < kSafetensorsQuotedTextBytes && data[i] >= 0x20 && data[i] < 0x7F; i++)
        line += char(data[i]);
    return line;
}

// Tensor names end up in error messages, which are one line; no real checkpoint has control characters in a
// name, so such names are rejected.
bool has_control_character(const std::string& name) {
    for (unsigned char c : name)
        if (c < 0x20 || c == 0x7F) return true;
    return false;
}

std::string u64(uint64_t v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
    return buf;
}

bool parse_dtype(const std::string& s, DType* out) {
    if (s == "F32") *out = DType::F32;
    else if (s == "F16") *out = DType::F16;
    else if (s == "BF16") *out = DType::BF16;
    else return false;
    return true;
}

// One header entry {"dtype", "shape", "data_offsets"} checked against the data section size.
bool parse_tensor_entry(const std::string& name, const JsonValue& entry, uint64_t data_len, TensorInfo* tensor,
                        std::string* error) {
    const std::string who = "tensor " + quoted(name);
    if (entry.type != JsonValue::Type::Object) return fail(error, who + ": header entry is not an object");
    const JsonValue* dtype = entry.find("dtype");
    const JsonValue* shape = entry.find("shape");
    const JsonValue* offsets = entry.find("data_offsets");
    if (!dtype || dtype->type != JsonValue::Type::String) return fail(error, who + ": missing or non-string \"dtype\"");
    if (!parse_dtype(dtype->string, &tensor->dtype))
        return fail(error,
                    who + " has unsupported dtype \"" + printable(dtype->string) + "\" (expected F32, F16 or BF16)");
    if (!shape || shape->type != JsonValue::Type::Array) return fail(error, who + ": missing or non-array \"shape\"");
    if (!offsets || offsets->type != JsonValue::Type::Array)
        return fail(error, who + ": missing or non-array \"data_offsets\"");

    // element count with an overflow bound far below 2^64 (no real tensor comes near it)
    const uint64_t kMaxElements = uint64_t(1) << 48;
    uint64_t n_elements = 1;
    for (const JsonValue& dim : shape->array) {
        // an integral literal beyond int64 (e.g. 18446744073709551614) can only be an overflowing shape
        if (dim.type == JsonValue::Type::Number && !dim.is_integer && dim.number >= 9223372036854775808.0 &&
            std::floor(dim.number) == dim.number)
            return fail(error, who + ": shape element count overflows");
        if (dim.type != JsonValue::Type::Number || !dim.is_integer || dim.integer < 0)
            return fail(error, who + ": shape entries must be non-negative integers");
        uint64_t d = uint64_t(dim.integer);
        if (d != 0 && n_elements > kMaxElements / d) return fail(error, who + ": shape element count overflows");
        n_elements *= d;
        tensor->shape.push_back(dim.integer);
    }

    if (offsets->array.size() != 2) return fail(error, who + ": \"data_offsets\" must be [begin, end]");
    for (const JsonValue& v : offsets->array)
        if (v.type != JsonValue::Type::Number || !v.is_integer || v.integer < 0)
            return fail(error, who + ": \"data_offsets\" must be non-negative integers");
    uint64_t begin = uint64_t(offsets->array[0].integer);
    uint64_t end = uint64_t(offsets->array[1].integer);
    if (begin > end) return fail(error, who + ": data_offsets [" + u64(begin) + ", " + u64(end) + "] are inverted");
    if (data_len != kUnknownFileSize && end > data_len)
        return fail(error, who + ": data_offsets [" + u64(begin) + ", " + u64(end) +
                               "] run past the end of the data section (" + u64(data_len) + " bytes)");
    uint64_t expected_bytes = n_elements * dtype_size(tensor->dtype);
    if (end - begin != expected_bytes)
        return fail(error, who + ": data_offsets cover " + u64(end - begin) + " bytes, but shape and dtype " +
                               dtype->string + " need " + u64(expected_bytes));
    // Over SIZE_MAX only in a 32-bit build with the file size unknown; such a tensor cannot match the config.
    if (n_elements > uint64_t(SIZE_MAX)) return fail(error, who + ": shape element count overflows");
    tensor->name = name;
    tensor->n_elements = size_t(n_elements);
    tensor->begin = begin;
    tensor->end = end;
    return true;
}

}  // namespace

bool safetensors_length_ready(const uint8_t* data, size_t available) {
    if (available < kSafetensorsLengthBytes) return false;
    if (!starts_with_text(data) || available >= kSafetensorsQuotedTextBytes) return true;
    return first_line(data, available).size() < available;  // the line ended before the bytes did
}

bool parse_safetensors_length(const uint8_t* data, size_t available, uint64_t file_size, uint64_t* header_len,
                              std::string* error) {
    if (starts_with_text(data))
        return fail(error, "not a safetensors file: it starts with the text \"" + first_line(data, available) +
                               "\" (an HTML error page or a Git LFS pointer instead of the weights?)");
    uint64_t length = 0;
    for (int i = 7; i >= 0; i--) length = (length << 8) | data[i];
    if (length > kSafetensorsMaxHeaderBytes)
        return fail(error,
                    "header length " + u64(length) + " exceeds the " + u64(kSafetensorsMaxHeaderBytes) + "-byte limit");
    if (file_size != kUnknownFileSize && length > file_size - kSafetensorsLengthBytes)
        return safetensors_ended_early(file_size, &length, error);
    *header_len = length;
    return true;
}

bool safetensors_ended_early(uint64_t file_size, const uint64_t* header_len, std::string* error) {
    if (!header_len) return fail(error, "file is " + u64(file_size) + " bytes, too short for the 8-byte header length");
    return fail(error, "header length " + u64(*header_len) + " exceeds the file size (" + u64(file_size) + " bytes)");
}

bool safetensors_trailing_bytes(uint64_t data_bytes, uint64_t trailing, std::string* error) {
    return fail(error, u64(trailing) + " trailing bytes after the tensor data (data_offsets end at " +
                           u64(data_bytes - trailing) + ", the data section has " + u64(data_bytes) + " bytes)");
}

size_t safetensors_max_header_values(int n_layer) { return 16 * (16 * size_t(n_layer > 0 ? n_layer : 0) + 8) + 4096; }

bool parse_safetensors_header(const uint8_t* data, size_t header_len, uint64_t data_len, int n_layer,
                              SafetensorsHeader* out, std::string* error) {
    *out = SafetensorsHeader();
    const size_t bad_byte = first_invalid_utf8(data, header_len);
    if (bad_byte != header_len) return fail(error, "header is not valid UTF-8 (byte " + u64(bad_byte) + ")");
    JsonValue header;
    std::string json_error;
    const size_t max_values = safetensors_max_header_values(n_layer);
    if (!parse_json(reinterpret_cast<const char*>(data), header_len, &header, &json_error, max_values)) {
        if (json_error.rfind(kJsonTooManyValues, 0) == 0)
            return fail(error,
                        "header has " + json_error + ", more than a " + std::to_string(n_layer) + "-layer model needs");
        return fail(error, "header is not valid JSON: " + json_error);
    }
    if (header.type != JsonValue::Type::Object) return fail(error, "header is not a JSON object");

    for (const auto& member : header.object) {
        if (member.first == "__metadata__") {
            if (member.second.type != JsonValue::Type::Object) return fail(error, "\"__metadata__\" is not an object");
            for (const auto& kv : member.second.object) {
                if (kv.second.type != JsonValue::Type::String)
                    return fail(error, "\"__metadata__\" value for \"" + printable(kv.first) + "\" is not a string");
                out->metadata.emplace_back(kv.first, kv.second.string);
            }
            continue;
        }
        // duplicate names are already rejected by the JSON parser (duplicate key)
        if (has_control_character(member.first))
            return fail(error, "tensor name '" + printable(member.first) + "' contains a control character");
        TensorInfo tensor;
        if (!parse_tensor_entry(member.first, member.second, data_len, &tensor, error)) return false;
        out->tensors.push_back(std::move(tensor));
    }

    // The data section must be exactly the tensors' bytes, back to back in some order: the format forbids
    // aliasing and holes (holes would let a file hide other content), and nothing may follow the last tensor.
    // Empty tensors hold no bytes, so their offsets only have to be in range.
    std::vector<const TensorInfo*> by_offset;
    for (const TensorInfo& tensor : out->tensors) by_offset.push_back(&tensor);
    std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
        return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
    });
    uint64_t covered_end = 0;  // end of the non-empty ranges seen so far
    const TensorInfo* covering = nullptr;
    for (const TensorInfo* tensor : by_offset) {
        if (tensor->begin == tensor->end) continue;
        if (tensor->begin < covered_end)
            return fail(error, "tensors " + quoted(covering->name) + " and " + quoted(tensor->name) +
                                   " have overlapping data_offsets");
        if (tensor->begin > covered_end)
            return fail(error, "the data section has a gap: bytes [" + u64(covered_end) + ", " + u64(tensor->begin) +
                                   ") before tensor " + quoted(tensor->name) + " belong to no tensor");
        covered_end = tensor->end;
        covering = tensor;
    }
    if (data_len != kUnknownFileSize && covered_end != data_len)
        return safetensors_trailing_bytes(data_len, data_len - covered_end, error);
    out->data_bytes = covered_end;
    return true;
}

}  // namespace gpt2
