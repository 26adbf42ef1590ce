#include "weights.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "kernels.h"

namespace gpt2 {

Weights::~Weights() { std::free(memory); }

bool weights_file_error(std::string* error, const std::string& message) {
    if (error) *error = "model.safetensors: " + message;
    return false;
}

bool out_of_memory(uint64_t bytes, const std::string& what, std::string* error) {
    if (error) *error = "out of memory: need " + std::to_string(bytes) + " bytes for " + what;
    return false;
}

namespace {

std::string shape_string(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); i++) {
        if (i) s += ", ";
        s += std::to_string(shape[i]);
    }
    return s + "]";
}

// "h.{i}.attn.bias" / "h.{i}.attn.masked_bias" with i < n_layer: the causal-mask buffers some exports
// include; the engine builds its own mask, so they are ignored.
bool is_mask_buffer(const std::string& name, int n_layer) {
    if (name.compare(0, 2, "h.") != 0) return false;
    size_t pos = 2;
    int64_t layer = 0;
    size_t digits = 0;
    while (pos < name.size() && name[pos] >= '0' && name[pos] <= '9' && digits < 9) {
        layer = layer * 10 + (name[pos] - '0');
        pos++;
        digits++;
    }
    if (digits == 0 || layer >= n_layer) return false;
    std::string rest = name.substr(pos);
    return rest == ".attn.bias" || rest == ".attn.masked_bias";
}

// Optional prefix of every tensor name (checkpoints saved from GPT2LMHeadModel). A char array, not a static
// std::string: that would allocate on first use, which heap-leak checks would count against a failed load.
constexpr char kTransformerPrefix[] = "transformer.";

}  // namespace

WeightsLayout weights_layout(const Config& config, WeightFormat format, Weights* w) {
    const int64_t C = config.n_embd, L = config.n_layer, V = config.n_vocab, T = config.n_ctx;
    const bool int8 = format == WeightFormat::int8;
    // Each parameter is one contiguous (n_layer, ...) array inside a single allocation.
    WeightsLayout layout;
    std::vector<ParameterSlot>& slots = layout.slots;
    uint64_t& total = layout.n_floats;
    uint64_t& total_q = layout.n_int8;
    auto add_global = [&](const char* name, std::vector<int64_t> shape, float** field) {
        uint64_t n = 1;
        for (int64_t d : shape) n *= uint64_t(d);
        slots.push_back({name, shape, field, total, true, false});
        total += n;
    };
    auto add_layered = [&](const char* suffix, std::vector<int64_t> shape, bool transpose, float** field,
                           int8_t** qfield = nullptr, float** sfield = nullptr) {
        uint64_t n = 1;
        for (int64_t d : shape) n *= uint64_t(d);
        if (int8 && qfield) {
            const uint64_t rows = uint64_t(transpose ? shape[1] : shape[0]);
            for (int l = 0; l < L; l++) {
                ParameterSlot e{"h." + std::to_string(l) + "." + suffix, shape, sfield, total + rows * uint64_t(l),
                                l == 0, transpose};
                e.quantized = true;
                e.qfield = qfield;
                e.q_offset = total_q + n * uint64_t(l);
                slots.push_back(e);
            }
            total += rows * uint64_t(L);
            total_q += n * uint64_t(L);
            return;
        }
        for (int l = 0; l < L; l++)
            slots.push_back(
                {"h." + std::to_string(l) + "." + suffix, shape, field, total + n * uint64_t(l), l == 0, transpose});
        total += n * uint64_t(L);
    };
    if (int8) {
        ParameterSlot e{"wte.weight", {V, C}, &w->wte_scale, total, true, false};
        e.quantized = true;
        e.qfield = &w->wte_q;
        e.q_offset = total_q;
        slots.push_back(e);
        total += uint64_t(V);
        total_q += uint64_t(V) * uint64_t(C);
    } else {
        add_global("wte.weight", {V, C}, &w->wte);
    }
    add_global("wpe.weight", {T, C}, &w->wpe);
    add_layered("ln_1.weight", {C}, false, &w->ln_1_weight);
    add_layered("ln_1.bias", {C}, false, &w->ln_1_bias);
    add_layered("attn.c_attn.weight", {C, 3 * C}, true, &w->qkv_weight, &w->qkv_q, &w->qkv_scale);
    add_layered("attn.c_attn.bias", {3 * C}, false, &w->qkv_bias);
    add_layered("attn.c_proj.weight", {C, C}, true, &w->attn_proj_weight, &w->attn_proj_q, &w->attn_proj_scale);
    add_layered("attn.c_proj.bias", {C}, false, &w->attn_proj_bias);
    add_layered("ln_2.weight", {C}, false, &w->ln_2_weight);
    add_layered("ln_2.bias", {C}, false, &w->ln_2_bias);
    add_layered("mlp.c_fc.weight", {C, 4 * C}, true, &w->fc_weight, &w->fc_q, &w->fc_scale);
    add_layered("mlp.c_fc.bias", {4 * C}, false, &w->fc_bias);
    add_layered("mlp.c_proj.weight", {4 * C, C}, true, &w->mlp_proj_weight, &w->mlp_proj_q,
                &w->mlp_proj_scale);
    add_layered("mlp.c_proj.bias", {C}, false, &w->mlp_proj_bias);
    add_global("ln_f.weight", {C}, &w->ln_f_weight);
    add_global("ln_f.bias", {C}, &w->ln_f_bias);
    return layout;
}

bool match_tensors(const Config& config, const std::vector<TensorInfo>& tensors, const WeightsLayout& layout,
                   std::vector<TensorRole>* roles, std::string* error) {
    const int64_t C = config.n_embd, V = config.n_vocab;
    std::unordered_map<std::string, size_t> index;
    for (size_t i = 0; i < layout.slots.size(); i++) index[layout.slots[i].name] = i;
    std::vector<const TensorInfo*> found(layout.slots.size(), nullptr);
    roles->assign(tensors.size(), TensorRole());

    for (size_t t = 0; t < tensors.size(); t++) {
        const TensorInfo& tensor = tensors[t];
        const size_t prefix_len = sizeof kTransformerPrefix - 1;
        std::string name = tensor.name.compare(0, prefix_len, kTransformerPrefix) == 0 ? tensor.name.substr(prefix_len)
                                                                                       : tensor.name;
        auto it = index.find(name);
        if (it != index.end()) {
            const ParameterSlot& slot = layout.slots[it->second];
            if (found[it->second])
                return weights_file_error(error,
                            "tensors '" + found[it->second]->name + "' and '" + tensor.name + "' are the same parameter");
            if (tensor.shape != slot.shape)
                return weights_file_error(error, "tensor '" + tensor.name + "' has shape " + shape_string(tensor.shape) +
                                       ", expected " + shape_string(slot.shape));
            found[it->second] = &tensor;
            (*roles)[t] = {TensorRole::Kind::parameter, it->second};
        } else if (is_mask_buffer(name, config.n_layer)) {
            continue;
        } else if (name == "lm_head.weight") {
            if (tensor.shape != std::vector<int64_t>{V, C})
                return weights_file_error(error, "tensor '" + tensor.name + "' has shape " + shape_string(tensor.shape) +
                                       ", expected " + shape_string({V, C}));
            (*roles)[t].kind = TensorRole::Kind::lm_head;
        } else {
            return weights_file_error(error, "unexpected tensor '" + tensor.name + "'");
        }
    }
    for (size_t i = 0; i < layout.slots.size(); i++)
        if (!found[i]) return weights_file_error(error, "missing tensor '" + layout.slots[i].name + "'");
    return true;
}

bool allocate_weights(const WeightsLayout& layout, WeightFormat format, Weights* w, std::string* error) {
    const uint64_t bytes = layout.bytes();
    if (bytes > kMaxWeightsBytes || !(w->memory = static_cast<float*>(std::malloc(size_t(bytes)))))
        return out_of_memory(bytes, "the weights", error);
    w->bytes = size_t(bytes);
    w->format = format;
    int8_t* const q_base = reinterpret_cast<int8_t*>(w->memory + layout.n_floats);
    for (const ParameterSlot& slot : layout.slots) {
        if (!slot.first_layer) continue;
        *slot.field = w->memory + slot.offset;
        if (slot.quantized) *slot.qfield = q_base + slot.q_offset;
    }
    return true;
}

namespace {

// Packs `layers` consecutive (n_out, n_in) matrices starting at w.
template <typename T>
void pack_layers(T* w, int layers, int n_out, int n_in, T* scratch) {
    for (int l = 0; l < layers; l++) pack_panels(w + size_t(l) * n_out * n_in, n_out, n_in, scratch);
}

}  // namespace

bool pack_weight_panels(const Config& c, Weights* w, std::string* error) {
    const int C = c.n_embd, L = c.n_layer;
    const uint64_t scratch_bytes = uint64_t(kPanelRows) * 4 * uint64_t(C) * sizeof(float);  // widest rows: 4 * n_embd
    std::unique_ptr<float, decltype(&std::free)> scratch(static_cast<float*>(std::malloc(size_t(scratch_bytes))),
                                                         &std::free);
    if (!scratch) return out_of_memory(scratch_bytes, "the weight packing", error);
    if (w->format == WeightFormat::int8) {
        int8_t* s = reinterpret_cast<int8_t*>(scratch.get());
        pack_layers(w->wte_q, 1, c.n_vocab, C, s);
        pack_layers(w->qkv_q, L, 3 * C, C, s);
        pack_layers(w->attn_proj_q, L, C, C, s);
        pack_layers(w->fc_q, L, 4 * C, C, s);
        pack_layers(w->mlp_proj_q, L, C, 4 * C, s);
    } else {
        float* s = scratch.get();
        pack_layers(w->wte, 1, c.n_vocab, C, s);
        pack_layers(w->qkv_weight, L, 3 * C, C, s);
        pack_layers(w->attn_proj_weight, L, C, C, s);
        pack_layers(w->fc_weight, L, 4 * C, C, s);
        pack_layers(w->mlp_proj_weight, L, C, 4 * C, s);
    }
    return true;
}

// The scan over all values is branch-free so that it vectorizes: checking every weight once at load is cheap
// next to the conversion itself.
size_t first_non_finite(const float* v, size_t n) {
    const uint32_t kExponentMask = 0x7F800000u;  // all exponent bits set: inf or nan
    uint32_t any = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        std::memcpy(&bits, v + i, 4);
        any |= uint32_t((bits & kExponentMask) == kExponentMask);
    }
    if (!any) return n;
    size_t i = 0;
    while (std::isfinite(v[i])) i++;
    return i;
}

bool non_finite_weight(const std::string& tensor, uint64_t element, float value, std::string* error) {
    const char* what = std::isnan(value) ? "NaN" : value > 0 ? "Inf" : "-Inf";
    return weights_file_error(error, "tensor '" + tensor + "' contains " + what + " at element " + std::to_string(element));
}

void quantize_rows(const float* src, size_t rows, size_t cols, int8_t* q, float* scale) {
    for (size_t r = 0; r < rows; r++) {
        const float* w = src + r * cols;
        float m = 0.0f;
        for (size_t i = 0; i < cols; i++) m = std::fabs(w[i]) > m ? std::fabs(w[i]) : m;
        const float s = m / 127.0f;
        scale[r] = s;
        for (size_t i = 0; i < cols; i++) {
            float v = s > 0.0f ? std::nearbyint(w[i] / s) : 0.0f;
            v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
            q[r * cols + i] = int8_t(v);
        }
    }
}

}  // namespace gpt2
