#include "safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "float16.h"
#include "json.h"

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

void tensor_elements(const TensorView& tensor, size_t first, size_t count, float* out) {
    if (tensor.dtype == DType::F32) {
        std::memcpy(out, tensor.data + 4 * first, 4 * count);
        return;
    }
    const uint8_t* p = tensor.data + 2 * first;
    for (size_t i = 0; i < count; i++) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = tensor.dtype == DType::F16 ? f16_to_float(h) : bf16_to_float(h);
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
        size_t n;  // continuation bytes
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
    for (size_t i = 0; i < len && line.size() < 40 && data[i] >= 0x20 && data[i] < 0x7F; i++) line += char(data[i]);
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
bool parse_tensor_entry(const std::string& name, const JsonValue& entry, uint64_t data_len, TensorView* tensor,
                        uint64_t* begin_out, uint64_t* end_out, std::string* error) {
    const std::string who = "tensor " + quoted(name);
    if (entry.type != JsonValue::Type::Object) return fail(error, who + ": header entry is not an object");
    const JsonValue* dtype = entry.find("dtype");
    const JsonValue* shape = entry.find("shape");
    const JsonValue* offsets = entry.find("data_offsets");
    if (!dtype || dtype->type != JsonValue::Type::String) return fail(error, who + ": missing or non-string \"dtype\"");
    if (!parse_dtype(dtype->string, &tensor->dtype))
        return fail(error, who + " has unsupported dtype \"" + printable(dtype->string) +
                               "\" (expected F32, F16 or BF16)");
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
    if (end > data_len)
        return fail(error, who + ": data_offsets [" + u64(begin) + ", " + u64(end) +
                               "] run past the end of the data section (" + u64(data_len) + " bytes)");
    uint64_t expected_bytes = n_elements * dtype_size(tensor->dtype);
    if (end - begin != expected_bytes)
        return fail(error, who + ": data_offsets cover " + u64(end - begin) + " bytes, but shape and dtype " +
                               dtype->string + " need " + u64(expected_bytes));
    tensor->name = name;
    tensor->n_elements = size_t(n_elements);  // <= data_len, so it fits in size_t
    *begin_out = begin;
    *end_out = end;
    return true;
}

}  // namespace

bool parse_safetensors(const uint8_t* data, size_t len, SafetensorsFile* out, std::string* error) {
    *out = SafetensorsFile();
    if (len < 8) return fail(error, "file is " + u64(len) + " bytes, too short for the 8-byte header length");
    if (starts_with_text(data))
        return fail(error, "not a safetensors file: it starts with the text \"" + first_line(data, len) +
                               "\" (an HTML error page or a Git LFS pointer instead of the weights?)");
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--) header_len = (header_len << 8) | data[i];
    if (header_len > kSafetensorsMaxHeaderBytes)
        return fail(error, "header length " + u64(header_len) + " exceeds the " + u64(kSafetensorsMaxHeaderBytes) +
                               "-byte limit");
    if (header_len > uint64_t(len) - 8)
        return fail(error, "header length " + u64(header_len) + " exceeds the file size (" + u64(len) + " bytes)");

    const size_t bad_byte = first_invalid_utf8(data + 8, size_t(header_len));
    if (bad_byte != header_len) return fail(error, "header is not valid UTF-8 (byte " + u64(bad_byte) + ")");
    JsonValue header;
    std::string json_error;
    if (!parse_json(reinterpret_cast<const char*>(data + 8), size_t(header_len), &header, &json_error))
        return fail(error, "header is not valid JSON: " + json_error);
    if (header.type != JsonValue::Type::Object) return fail(error, "header is not a JSON object");

    const uint8_t* data_section = data + 8 + header_len;
    const uint64_t data_len = uint64_t(len) - 8 - header_len;
    struct Range {
        uint64_t begin, end;
        size_t tensor;
    };
    std::vector<Range> ranges;
    for (const auto& member : header.object) {
        if (member.first == "__metadata__") {
            if (member.second.type != JsonValue::Type::Object)
                return fail(error, "\"__metadata__\" is not an object");
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
        TensorView tensor;
        uint64_t begin = 0, end = 0;
        if (!parse_tensor_entry(member.first, member.second, data_len, &tensor, &begin, &end, error)) return false;
        tensor.data = data_section + begin;
        ranges.push_back({begin, end, out->tensors.size()});
        out->tensors.push_back(std::move(tensor));
    }

    // The data section must be exactly the tensors' bytes, back to back in some order: the format forbids
    // aliasing and holes (holes would let a file hide other content), and nothing may follow the last tensor.
    // Empty tensors hold no bytes, so their offsets only have to be in range.
    std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    uint64_t covered_end = 0;  // end of the non-empty ranges seen so far
    const TensorView* covering = nullptr;
    for (const Range& range : ranges) {
        if (range.begin == range.end) continue;
        const TensorView& tensor = out->tensors[range.tensor];
        if (range.begin < covered_end)
            return fail(error, "tensors " + quoted(covering->name) + " and " + quoted(tensor.name) +
                                   " have overlapping data_offsets");
        if (range.begin > covered_end)
            return fail(error, "the data section has a gap: bytes [" + u64(covered_end) + ", " + u64(range.begin) +
                                   ") before tensor " + quoted(tensor.name) + " belong to no tensor");
        covered_end = range.end;
        covering = &tensor;
    }
    if (covered_end != data_len)
        return fail(error, u64(data_len - covered_end) + " trailing bytes after the tensor data (data_offsets end at " +
                               u64(covered_end) + ", the data section has " + u64(data_len) + " bytes)");
    return true;
}

}  // namespace gpt2
