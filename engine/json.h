// A small, strict JSON parser (RFC 8259) for config.json and the safetensors header.
// No exceptions: parse_json() returns false and an error string naming the byte offset.
// Nesting depth is bounded so a hostile header cannot overflow the stack.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gpt2 {

struct JsonValue {
    enum class Type { Null, Bool, Number, String, Array, Object };
    Type type = Type::Null;
    bool boolean = false;
    double number = 0.0;
    // set when the literal has no fraction/exponent and fits in int64 (exact sizes and offsets)
    bool is_integer = false;
    int64_t integer = 0;
    std::string string;
    std::vector<JsonValue> array;
    // members in file order; keys are unique (duplicates are a parse error)
    std::vector<std::pair<std::string, JsonValue>> object;

    // member lookup for objects; nullptr when absent or not an object
    const JsonValue* find(const std::string& key) const;
};

const char* json_type_name(JsonValue::Type type);

constexpr int kJsonMaxDepth = 64;

// Parses exactly one JSON value (surrounded by optional whitespace) from text[0, len).
bool parse_json(const char* text, size_t len, JsonValue* out, std::string* error);

// s for a one-line error message: control characters written as \u00XX, cut to about max_bytes (at a UTF-8
// character boundary) with "..." appended.
std::string printable(const std::string& s, size_t max_bytes = 64);

}  // namespace gpt2
