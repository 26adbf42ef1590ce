#include "formats/json.h"

#include <cstdio>
#include <cstdlib>
#include <unordered_set>

namespace gpt2 {

const JsonValue* JsonValue::find(const std::string& key) const {
    if (type != Type::Object) return nullptr;
    for (const auto& member : object)
        if (member.first == key) return &member.second;
    return nullptr;
}

const char* json_type_name(JsonValue::Type type) {
    switch (type) {
        case JsonValue::Type::Null: return "null";
        case JsonValue::Type::Bool: return "boolean";
        case JsonValue::Type::Number: return "number";
        case JsonValue::Type::String: return "string";
        case JsonValue::Type::Array: return "array";
        case JsonValue::Type::Object: return "object";
    }
    return "?";
}

namespace {

class Parser {
   public:
    Parser(const char* text, size_t len, size_t max_values) : text_(text), len_(len), max_values_(max_values) {}

    bool parse_document(JsonValue* out, std::string* error) {
        skip_whitespace();
        if (!parse_value(out, 0)) return fail_out(error);
        skip_whitespace();
        if (pos_ != len_) {
            fail("unexpected trailing characters");
            return fail_out(error);
        }
        return true;
    }

   private:
    const char* text_;
    size_t len_;
    size_t max_values_;
    size_t values_ = 0;
    size_t pos_ = 0;
    std::string message_;

    bool fail(const char* what) {
        if (message_.empty()) {
            char buf[160];
            std::snprintf(buf, sizeof buf, "%s at byte %zu", what, pos_);
            message_ = buf;
        }
        return false;
    }
    bool fail_out(std::string* error) {
        if (error) *error = message_;
        return false;
    }

    void skip_whitespace() {
        while (pos_ < len_ && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
            pos_++;
    }

    bool consume_literal(const char* word) {
        size_t n = 0;
        while (word[n]) n++;
        if (len_ - pos_ < n) return false;
        for (size_t i = 0; i < n; i++)
            if (text_[pos_ + i] != word[i]) return false;
        pos_ += n;
        return true;
    }

    bool parse_value(JsonValue* out, int depth) {
        if (depth >= kJsonMaxDepth) return fail("nesting deeper than 64 levels");
        if (++values_ > max_values_) {
            const std::string what = kJsonTooManyValues + std::to_string(max_values_) + " values";
            return fail(what.c_str());
        }
        if (pos_ >= len_) return fail("unexpected end of input");
        char c = text_[pos_];
        if (c == '{') return parse_object(out, depth);
        if (c == '[') return parse_array(out, depth);
        if (c == '"') {
            out->type = JsonValue::Type::String;
            return parse_string(&out->string);
        }
        if (c == '-' || (c >= '0' && c <= '9')) return parse_number(out);
        if (consume_literal("true")) {
            out->type = JsonValue::Type::Bool;
            out->boolean = true;
            return true;
        }
        if (consume_literal("false")) {
            out->type = JsonValue::Type::Bool;
            out->boolean = false;
            return true;
        }
        if (consume_literal("null")) {
            out->type = JsonValue::Type::Null;
            return true;
        }
        return fail("unexpected character");
    }

    bool parse_object(JsonValue* out, int depth) {
        out->type = JsonValue::Type::Object;
        pos_++;                                // '{'
        std::unordered_set<std::string> keys;  // duplicate check in O(1): a header may have ~10^5 tensors
        skip_whitespace();
        if (pos_ < len_ && text_[pos_] == '}') {
            pos_++;
            return true;
        }
        for (;;) {
            skip_whitespace();
            if (pos_ >= len_ || text_[pos_] != '"') return fail("expected a string key");
            std::string key;
            size_t key_pos = pos_;
            if (!parse_string(&key)) return false;
            if (!keys.insert(key).second) {
                pos_ = key_pos;
                std::string what = "duplicate key \"" + printable(key) + "\"";
                return fail(what.c_str());
            }
            skip_whitespace();
            if (pos_ >= len_ || text_[pos_] != ':') return fail("expected ':'");
            pos_++;
            skip_whitespace();
            out->object.emplace_back(std::move(key), JsonValue());
            if (!parse_value(&out->object.back().second, depth + 1)) return false;
            skip_whitespace();
            if (pos_ >= len_) return fail("unexpected end of input in object");
            if (text_[pos_] == ',') {
                pos_++;
                continue;
            }
            if (text_[pos_] == '}') {
                pos_++;
                return true;
            }
            return fail("expected ',' or '}'");
        }
    }

    bool parse_array(JsonValue* out, int depth) {
        out->type = JsonValue::Type::Array;
        pos_++;  // '['
        skip_whitespace();
        if (pos_ < len_ && text_[pos_] == ']') {
            pos_++;
            return true;
        }
        for (;;) {
            skip_whitespace();
            out->array.emplace_back();
            if (!parse_value(&out->array.back(), depth + 1)) return false;
            skip_whitespace();
            if (pos_ >= len_) return fail("unexpected end of input in array");
            if (text_[pos_] == ',') {
                pos_++;
                continue;
            }
            if (text_[pos_] == ']') {
                pos_++;
                return true;
            }
            return fail("expected ',' or ']'");
        }
    }

    bool parse_hex4(uint32_t* out) {
        if (len_ - pos_ < 4) return fail("truncated \\u escape");
        uint32_t v = 0;
        for (int i = 0; i < 4; i++) {
            char c = text_[pos_++];
            v <<= 4;
            if (c >= '0' && c <= '9') v |= uint32_t(c - '0');
            else if (c >= 'a' && c <= 'f') v |= uint32_t(c - 'a' + 10);
            else if (c >= 'A' && c <= 'F') v |= uint32_t(c - 'A' + 10);
            else return fail("invalid \\u escape");
        }
        *out = v;
        return true;
    }

    static void append_utf8(std::string* s, uint32_t cp) {
        if (cp < 0x80) {
            s->push_back(char(cp));
        } else if (cp < 0x800) {
            s->push_back(char(0xC0 | (cp >> 6)));
            s->push_back(char(0x80 | (cp & 0x3F)));
        } else if (cp < 0x10000) {
            s->push_back(char(0xE0 | (cp >> 12)));
            s->push_back(char(0x80 | ((cp >> 6) & 0x3F)));
            s->push_back(char(0x80 | (cp & 0x3F)));
        } else {
            s->push_back(char(0xF0 | (cp >> 18)));
            s->push_back(char(0x80 | ((cp >> 12) & 0x3F)));
            s->push_back(char(0x80 | ((cp >> 6) & 0x3F)));
            s->push_back(char(0x80 | (cp & 0x3F)));
        }
    }

    bool parse_string(std::string* out) {
        pos_++;  // opening quote
        for (;;) {
            if (pos_ >= len_) return fail("unterminated string");
            unsigned char c = (unsigned char)text_[pos_];
            if (c == '"') {
                pos_++;
                return true;
            }
            if (c < 0x20) return fail("control character in string");
            if (c != '\\') {
                out->push_back(char(c));
                pos_++;
                continue;
            }
            pos_++;
            if (pos_ >= len_) return fail("unterminated string");
            char e = text_[pos_++];
            switch (e) {
                case '"': out->push_back('"'); break;
                case '\\': out->push_back('\\'); break;
                case '/': out->push_back('/'); break;
                case 'b': out->push_back('\b'); break;
                case 'f': out->push_back('\f'); break;
                case 'n': out->push_back('\n'); break;
                case 'r': out->push_back('\r'); break;
                case 't': out->push_back('\t'); break;
                case 'u': {
                    uint32_t cp;
                    if (!parse_hex4(&cp)) return false;
                    if (cp >= 0xD800 && cp <= 0xDBFF) {  // high surrogate: a low one must follow
                        uint32_t low;
                        if (len_ - pos_ < 2 || text_[pos_] != '\\' || text_[pos_ + 1] != 'u')
                            return fail("unpaired surrogate in \\u escape");
                        pos_ += 2;
                        if (!parse_hex4(&low)) return false;
                        if (low < 0xDC00 || low > 0xDFFF) return fail("unpaired surrogate in \\u escape");
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                    } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                        return fail("unpaired surrogate in \\u escape");
                    }
                    append_utf8(out, cp);
                    break;
                }
                default: pos_--; return fail("invalid escape in string");
            }
        }
    }

    bool parse_number(JsonValue* out) {
        size_t start = pos_;
        bool integral = true;
        if (text_[pos_] == '-') pos_++;
        if (pos_ >= len_) return fail("invalid number");
        if (text_[pos_] == '0') {
            pos_++;
        } else if (text_[pos_] >= '1' && text_[pos_] <= '9') {
            while (pos_ < len_ && text_[pos_] >= '0' && text_[pos_] <= '9') pos_++;
        } else {
            return fail("invalid number");
        }
        if (pos_ < len_ && text_[pos_] == '.') {
            integral = false;
            pos_++;
            if (pos_ >= len_ || text_[pos_] < '0' || text_[pos_] > '9') return fail("invalid number");
            while (pos_ < len_ && text_[pos_] >= '0' && text_[pos_] <= '9') pos_++;
        }
        if (pos_ < len_ && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
            integral = false;
            pos_++;
            if (pos_ < len_ && (text_[pos_] == '+' || text_[pos_] == '-')) pos_++;
            if (pos_ >= len_ || text_[pos_] < '0' || text_[pos_] > '9') return fail("invalid number");
            while (pos_ < len_ && text_[pos_] >= '0' && text_[pos_] <= '9') pos_++;
        }
        // the grammar is checked above, so strtod sees a well-formed literal (NUL-terminated copy)
        std::string literal(text_ + start, pos_ - start);
        out->type = JsonValue::Type::Number;
        out->number = std::strtod(literal.c_str(), nullptr);
        out->is_integer = false;
        if (integral) {
            bool negative = literal[0] == '-';
            uint64_t magnitude = 0;
            bool fits = true;
            for (size_t i = negative ? 1 : 0; i < literal.size(); i++) {
                uint64_t digit = uint64_t(literal[i] - '0');
                if (magnitude > (uint64_t(INT64_MAX) - digit) / 10) {
                    fits = false;
                    break;
                }
                magnitude = magnitude * 10 + digit;
            }
            if (fits) {
                out->is_integer = true;
                out->integer = negative ? -int64_t(magnitude) : int64_t(magnitude);
            }
        }
        return true;
    }
};

}  // namespace

std::string printable(const std::string& s, size_t max_bytes) {
    std::string out;
    size_t end = s.size();
    if (end > max_bytes) {
        end = max_bytes;
        while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) end--;  // not inside a character
    }
    for (size_t i = 0; i < end; i++) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c < 0x20 || c == 0x7F) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04X", c);
            out += buf;
        } else {
            out += char(c);
        }
    }
    return end < s.size() ? out + "..." : out;
}

bool parse_json(const char* text, size_t len, JsonValue* out, std::string* error, size_t max_values) {
    *out = JsonValue();
    Parser parser(text, len, max_values);
    return parser.parse_document(out, error);
}

uint64_t json_parse_bytes(size_t len, size_t max_values) {
    // a value takes at least one byte of text; a member also its key's pair and hash-set node
    const uint64_t values = len < max_values ? len : max_values;
    const uint64_t per_value = 2 * (sizeof(JsonValue) + sizeof(std::pair<std::string, JsonValue>)) + 4 * sizeof(void*);
    // strings grow by doubling (up to twice their text), and keys are copied into the duplicate check
    return values * per_value + 4 * uint64_t(len);
}

}  // namespace gpt2
