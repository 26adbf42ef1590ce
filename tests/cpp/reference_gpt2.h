// A float64 reference GPT-2 straight from the Hugging Face tensors (Conv1D [in][out]), written from the model's math
// and sharing no code with the engine, for the tests that compare the engine's logits and log-probabilities with it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "test_util.h"

namespace gpt2_test {

class Reference {
   public:
    // tensors: F32, without a name prefix (random_tensors' or read_reference_tensors')
    Reference(const ModelSpec& spec, const std::vector<TensorSpec>& tensors) : s_(spec) {
        for (const TensorSpec& t : tensors) {
            std::vector<double>& v = params_[t.name];
            v.resize(t.bytes.size() / 4);
            for (size_t i = 0; i < v.size(); i++) {
                float f;
                std::memcpy(&f, t.bytes.data() + 4 * i, 4);
                v[i] = f;
            }
        }
    }

    // What the inspection tests compare with: the attention probabilities of every layer and head, and the residual
    // stream after every layer.
    struct Inside {
        std::vector<std::vector<double>> attention;  // [layer * n_head + head] (n, n): row t holds t + 1 values
        std::vector<std::vector<double>> residual;   // [layer] (n, n_embd)
    };

    // logits of every position (n, n_vocab); inside, when not null, receives the intermediates above
    std::vector<double> logits(const std::vector<int32_t>& ids, Inside* inside = nullptr) const {
        const size_t n = ids.size(), C = size_t(s_.n_embd), H = size_t(s_.n_head), hs = C / H;
        const std::vector<double>& wte = p("wte.weight");
        const std::vector<double>& wpe = p("wpe.weight");
        std::vector<double> x(n * C);
        for (size_t t = 0; t < n; t++)
            for (size_t i = 0; i < C; i++) x[t * C + i] = wte[size_t(ids[t]) * C + i] + wpe[t * C + i];
        for (int l = 0; l < s_.n_layer; l++) {
            const std::string h = "h." + std::to_string(l) + ".";
            auto a = linear(layernorm(x, h + "ln_1"), h + "attn.c_attn", C, 3 * C);
            std::vector<double> att(n * C, 0.0);
            for (size_t head = 0; head < H; head++) {
                std::vector<double> probabilities(n * n, 0.0);
                for (size_t t = 0; t < n; t++) {
                    std::vector<double> w(t + 1);
                    double max = -1e300, sum = 0;
                    for (size_t j = 0; j <= t; j++) {
                        double d = 0;
                        for (size_t i = 0; i < hs; i++)
                            d += a[t * 3 * C + head * hs + i] * a[j * 3 * C + C + head * hs + i];
                        w[j] = d / std::sqrt(double(hs));
                        max = std::max(max, w[j]);
                    }
                    for (double& v : w) sum += (v = std::exp(v - max));
                    for (size_t j = 0; j <= t; j++) {
                        probabilities[t * n + j] = w[j] / sum;
                        for (size_t i = 0; i < hs; i++)
                            att[t * C + head * hs + i] += w[j] / sum * a[j * 3 * C + 2 * C + head * hs + i];
                    }
                }
                if (inside) inside->attention.push_back(std::move(probabilities));
            }
            add(&x, linear(att, h + "attn.c_proj", C, C));
            auto f = linear(layernorm(x, h + "ln_2"), h + "mlp.c_fc", C, 4 * C);
            for (double& v : f)
                v = 0.5 * v * (1 + std::tanh(std::sqrt(2 / 3.14159265358979323846) * (v + 0.044715 * v * v * v)));
            add(&x, linear(f, h + "mlp.c_proj", 4 * C, C));
            if (inside) inside->residual.push_back(x);
        }
        return head(x);
    }

    // The final layernorm and the LM head (tied wte) on residual rows (n, n_embd): their logits (n, n_vocab).
    std::vector<double> head(const std::vector<double>& x) const {
        const size_t C = size_t(s_.n_embd), n = x.size() / C;
        const std::vector<double>& wte = p("wte.weight");
        auto xf = layernorm(x, "ln_f");
        std::vector<double> out(n * size_t(s_.n_vocab));
        for (size_t t = 0; t < n; t++)
            for (size_t v = 0; v < size_t(s_.n_vocab); v++) {
                double d = 0;
                for (size_t i = 0; i < C; i++) d += xf[t * C + i] * wte[v * C + i];
                out[t * size_t(s_.n_vocab) + v] = d;
            }
        return out;
    }

   private:
    ModelSpec s_;
    std::map<std::string, std::vector<double>> params_;

    const std::vector<double>& p(const std::string& name) const { return params_.at(name); }
    std::vector<double> layernorm(const std::vector<double>& x, const std::string& name) const {
        const size_t C = size_t(s_.n_embd);
        const std::vector<double>& weight = p(name + ".weight");
        const std::vector<double>& bias = p(name + ".bias");
        std::vector<double> out(x.size());
        for (size_t t = 0; t < x.size() / C; t++) {
            double mean = 0, var = 0;
            for (size_t i = 0; i < C; i++) mean += x[t * C + i] / double(C);
            for (size_t i = 0; i < C; i++) var += (x[t * C + i] - mean) * (x[t * C + i] - mean) / double(C);
            for (size_t i = 0; i < C; i++)
                out[t * C + i] = (x[t * C + i] - mean) / std::sqrt(var + 1e-5) * weight[i] + bias[i];
        }
        return out;
    }
    std::vector<double> linear(const std::vector<double>& x, const std::string& name, size_t n_in, size_t n_out) const {
        const auto& w = p(name + ".weight");
        const auto& b = p(name + ".bias");
        std::vector<double> out(x.size() / n_in * n_out);
        for (size_t t = 0; t < x.size() / n_in; t++)
            for (size_t o = 0; o < n_out; o++) {
                double d = b[o];
                for (size_t i = 0; i < n_in; i++) d += x[t * n_in + i] * w[i * n_out + o];
                out[t * n_out + o] = d;
            }
        return out;
    }
    static void add(std::vector<double>* x, const std::vector<double>& y) {
        for (size_t i = 0; i < x->size(); i++) (*x)[i] += y[i];
    }
};

}  // namespace gpt2_test
