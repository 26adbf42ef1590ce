#include "formats/config.h"

#include <cmath>
#include <cstdio>

#include "formats/json.h"

namespace gpt2 {

namespace {

bool fail(std::string* error, const std::string& message) {
    if (error) *error = "config.json: " + message;
    return false;
}

// Upper bounds keep every size product far from overflow (also with a 32-bit size_t in wasm, where the
// allocation size checks then report out of memory). GPT-2 XL is 1600 / 48 / 25 / 1024 / 50257.
struct IntKey {
    const char* name;
    int64_t max;
};

bool read_int(const JsonValue& root, const IntKey& key, bool required, int* out, bool* present, std::string* error) {
    const JsonValue* v = root.find(key.name);
    *present = v != nullptr && v->type != JsonValue::Type::Null;
    if (!*present) {
        if (required) return fail(error, std::string("missing key \"") + key.name + "\"");
        return true;
    }
    if (v->type != JsonValue::Type::Number || !v->is_integer)
        return fail(error, std::string("\"") + key.name + "\" must be an integer");
    if (v->integer < 1 || v->integer > key.max) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "\"%s\" is %lld, expected 1..%lld", key.name, (long long)v->integer,
                      (long long)key.max);
        return fail(error, buf);
    }
    *out = int(v->integer);
    return true;
}

}  // namespace

bool parse_config(const uint8_t* json, size_t len, Config* out, std::string* error) {
    JsonValue root;
    std::string json_error;
    if (!parse_json(reinterpret_cast<const char*>(json), len, &root, &json_error))
        return fail(error, "not valid JSON: " + json_error);
    if (root.type != JsonValue::Type::Object) return fail(error, "top level is not a JSON object");

    Config c{};
    bool present = false;
    if (!read_int(root, {"vocab_size", 1 << 24}, true, &c.n_vocab, &present, error)) return false;
    if (!read_int(root, {"n_embd", 1 << 16}, true, &c.n_embd, &present, error)) return false;
    if (!read_int(root, {"n_head", 1 << 12}, true, &c.n_head, &present, error)) return false;
    if (!read_int(root, {"n_layer", 1 << 12}, true, &c.n_layer, &present, error)) return false;
    // The context is the number of learned positions (rows of wpe): "n_positions" wins when both keys are
    // present (HF GPT-2 configs carry both with the same value); older configs only have "n_ctx".
    bool have_positions = false, have_ctx = false;
    int n_positions = 0, n_ctx = 0;
    if (!read_int(root, {"n_positions", 1 << 20}, false, &n_positions, &have_positions, error)) return false;
    if (!read_int(root, {"n_ctx", 1 << 20}, false, &n_ctx, &have_ctx, error)) return false;
    if (!have_positions && !have_ctx) return fail(error, "missing key \"n_positions\" (or \"n_ctx\")");
    c.n_ctx = have_positions ? n_positions : n_ctx;

    if (c.n_embd % c.n_head != 0) {
        char buf[128];
        std::snprintf(buf, sizeof buf, "n_embd %d is not divisible by n_head %d", c.n_embd, c.n_head);
        return fail(error, buf);
    }
    // the MLP width is fixed at 4 * n_embd (GPT-2's n_inner = null)
    int n_inner = 0;
    if (!read_int(root, {"n_inner", 1 << 18}, false, &n_inner, &present, error)) return false;
    if (present && n_inner != 4 * c.n_embd) {
        char buf[128];
        std::snprintf(buf, sizeof buf, "\"n_inner\" %d is not supported (only 4 * n_embd = %d)", n_inner, 4 * c.n_embd);
        return fail(error, buf);
    }

    c.layer_norm_epsilon = 1e-5f;
    if (const JsonValue* eps = root.find("layer_norm_epsilon")) {
        if (eps->type != JsonValue::Type::Number || !(eps->number > 0.0) || !std::isfinite(eps->number) ||
            !(float(eps->number) > 0.0f))
            return fail(error, "\"layer_norm_epsilon\" must be a positive number");
        c.layer_norm_epsilon = float(eps->number);
    }
    *out = c;
    return true;
}

}  // namespace gpt2
