// A small, strict JSON parser (RFC 8259) for config.json and the safetensors header.
// No exceptions: parse_json() returns false and an error string naming the byte offset.
// Nesting depth is bounded so a hostile header cannot overflow the stack, and the number of values so that it
// cannot make the tree outgrow memory: json_parse_bytes() bounds what a parse can allocate, which the caller can
// check is available first (an allocation failure inside the parse would abort).
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
// The default bound on the values of a document (config.json has about 40).
constexpr size_t kJsonMaxValues = 1 << 16;
// How the error of a document over its bound starts: "more than N values at byte B".
constexpr char kJsonTooManyValues[] = "more than ";

// Parses exactly one JSON value (surrounded by optional whitespace) from text[0, len); more than max_values
// values (every number, string, literal, array and object counts one) is an error.
bool parse_json(const char* text, size_t len, JsonValue* out, std::string* error, size_t max_values = kJsonMaxValues);

// At most the bytes a parse_json of len bytes with max_values holds at once: the values (with a vector's
// doubling slack) and the strings (each up to twice its text's length; an object's keys again in the duplicate
// check).
uint64_t json_parse_bytes(size_t len, size_t max_values);

// s for a one-line error message: control characters written as \u00XX, cut to about max_bytes (at a UTF-8
// character boundary) with "..." appended.
std::string printable(const std::string& s, size_t max_bytes = 64);

}  // namespace gpt2
