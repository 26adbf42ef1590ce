// The Model (gpt2.h): what its weights are and its threads; the names the JS API gives weight formats and error
// kinds.
#include <algorithm>
#include <cstdlib>
#include <vector>

#include "gpt2.h"
#include "model/thread_pool.h"
#include "model/vocabulary.h"
#include "model/weights.h"

namespace gpt2 {

Model::~Model() = default;

int Model::n_threads() const { return thread_pool_ ? thread_pool_->n_threads() : 1; }

void Model::release_weights() {
    std::free(weights_->memory);
    weights_->memory = nullptr;
    weights_->bytes = 0;
}

bool Model::has_weights() const { return weights_->memory != nullptr && !weights_->matrices_received; }

const Config& model_config(const Model& model) { return model.config(); }
size_t model_weight_bytes(const Model& model) { return model.weights().bytes; }

const char* weight_format_name(WeightFormat format) {
    switch (format) {
        case WeightFormat::fp32: return "fp32";
        case WeightFormat::int8: return "int8";
        case WeightFormat::f16: return "f16";
        case WeightFormat::q8_0: return "q8_0";
        case WeightFormat::q4_0: return "q4_0";
        case WeightFormat::q4_1: return "q4_1";
        case WeightFormat::q5_0: return "q5_0";
        case WeightFormat::q5_1: return "q5_1";
        case WeightFormat::q4_k: return "q4_k";
        case WeightFormat::q5_k: return "q5_k";
        case WeightFormat::q6_k: return "q6_k";
    }
    return "";
}

const char* error_kind_name(ErrorKind kind) {
    switch (kind) {
        case ErrorKind::config: return "config";
        case ErrorKind::file: return "file";
        case ErrorKind::memory: return "memory";
        case ErrorKind::input: return "input";
        case ErrorKind::none: break;
    }
    return "";
}

std::string model_weight_types(const Model& model) {
    const Weights& w = model.weights();
    std::vector<const Linear*> linears{&w.wte};
    for (const Layer& layer : w.layers)
        for (const Linear* linear : {&layer.attn_qkv, &layer.attn_proj, &layer.mlp_fc, &layer.mlp_proj})
            linears.push_back(linear);
    linears.push_back(&w.lm_head());
    std::string out;
    std::vector<WeightFormat> seen;
    for (const Linear* linear : linears) {
        if (std::find(seen.begin(), seen.end(), linear->format) != seen.end()) continue;
        seen.push_back(linear->format);
        out += (out.empty() ? "" : ", ") + std::string(weight_format_name(linear->format));
    }
    return out;
}

}  // namespace gpt2
