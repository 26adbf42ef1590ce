// A load that hands the weight matrices to a MatrixReceiver (LoadOptions::matrix_receiver, gpt2.h), as a GPU host
// does: every row of every matrix arrives once, bit for bit the rows a model loaded without one keeps (fp32 and int8
// from safetensors, every GGUF type as the file's blocks), in chunks of any size; the model keeps only the vectors,
// runs recording sessions only, and a receiver's error stops the load with that error. The weights by name give back
// the same rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "formats/gguf.h"
#include "kernels/block_formats.h"
#include "kernels/kernels.h"
#include "model/weights.h"
#include "test_util.h"

namespace {

using gpt2::WeightFormat;

// One matrix as received: its rows' bytes and scales, and how often each row came.
struct ReceivedMatrix {
    WeightFormat format = WeightFormat::fp32;
    int n_out = 0, n_in = 0;
    std::vector<uint8_t> rows;  // (n_out, row bytes)
    std::vector<float> scale;   // (n_out) int8
    std::vector<int> arrivals;  // (n_out)
};

size_t row_bytes(WeightFormat format, int n_in) {
    if (const gpt2::BlockFormat* block = gpt2::block_format(format))
        return size_t(n_in) / block->values_per_block * block->bytes_per_block;
    return size_t(n_in) * (format == WeightFormat::int8 ? 1 : sizeof(float));
}

class CollectingReceiver : public gpt2::MatrixReceiver {
   public:
    std::map<std::pair<int, std::string>, ReceivedMatrix> matrices;
    std::string refuse_at;  // a matrix name: receive() fails there

    bool receive(const gpt2::MatrixRows& r, std::string* error) override {
        if (refuse_at == r.name) {
            *error = std::string("device 'webgpu': no room for ") + r.name;
            return false;
        }
        ReceivedMatrix& m = matrices[{r.layer, r.name}];
        const size_t bytes = row_bytes(r.format, r.n_in);
        if (m.arrivals.empty()) {
            m.format = r.format;
            m.n_out = r.n_out;
            m.n_in = r.n_in;
            m.rows.assign(size_t(r.n_out) * bytes, 0);
            m.scale.assign(size_t(r.n_out), 0.0f);
            m.arrivals.assign(size_t(r.n_out), 0);
        }
        EXPECT_EQ(r.format, m.format);
        EXPECT_TRUE(r.row0 >= 0 && r.n_rows >= 1 && r.row0 + r.n_rows <= r.n_out) << r.name;
        EXPECT_EQ(r.scale != nullptr, r.format == WeightFormat::int8) << r.name;
        std::memcpy(m.rows.data() + size_t(r.row0) * bytes, r.rows, size_t(r.n_rows) * bytes);
        if (r.scale) std::memcpy(m.scale.data() + r.row0, r.scale, size_t(r.n_rows) * sizeof(float));
        for (int i = 0; i < r.n_rows; i++) m.arrivals[size_t(r.row0 + i)]++;
        return true;
    }
};

// The rows model keeps of matrix m, row-major (the file's blocks for a block format).
std::vector<uint8_t> kept_rows(const gpt2::Linear& m) {
    const size_t bytes = row_bytes(m.format, m.n_in);
    std::vector<uint8_t> out(size_t(m.n_out) * bytes);
    if (const gpt2::BlockFormat* block = gpt2::block_format(m.format)) {
        block->file_rows(out.data(), m.weight, m.n_out, m.n_in, 0, m.n_out);
        return out;
    }
    for (int o = 0; o < m.n_out; o++) {
        uint8_t* row = out.data() + size_t(o) * bytes;
        if (m.format == WeightFormat::fp32)
            gpt2::unpack_row(reinterpret_cast<float*>(row), static_cast<const float*>(m.weight), m.n_out, m.n_in, o);
        else gpt2::unpack_row(reinterpret_cast<int8_t*>(row), static_cast<const int8_t*>(m.weight), m.n_out, m.n_in, o);
    }
    return out;
}

// The matrices a model's head and layers multiply, named as MatrixRows names them.
std::vector<std::pair<std::pair<int, std::string>, const gpt2::Linear*>> named_matrices(const gpt2::Weights& w) {
    std::vector<std::pair<std::pair<int, std::string>, const gpt2::Linear*>> out{{{-1, "wte"}, &w.wte}};
    if (w.output.weight) out.push_back({{-1, "lm_head"}, &w.output});
    for (size_t l = 0; l < w.layers.size(); l++) {
        const gpt2::Layer& layer = w.layers[l];
        out.push_back({{int(l), "attn_qkv"}, &layer.attn_qkv});
        out.push_back({{int(l), "attn_proj"}, &layer.attn_proj});
        out.push_back({{int(l), "mlp_fc"}, &layer.mlp_fc});
        out.push_back({{int(l), "mlp_proj"}, &layer.mlp_proj});
    }
    return out;
}

// Feeds file to loader in pieces of `piece` bytes and finishes it.
std::unique_ptr<gpt2::Model> feed_in_pieces(gpt2::ModelLoader& loader, const std::vector<uint8_t>& file, size_t piece) {
    for (size_t at = 0; at < file.size() && !loader.failed(); at += piece)
        loader.feed(file.data() + at, std::min(piece, file.size() - at));
    return loader.finish();
}

// Every matrix of kept (a model loaded without a receiver) arrived at receiver once per row with the same bytes
// (and int8 scales); received (the receiver's model) keeps the same vectors and no matrix.
void expect_handed_over(const gpt2::Model& kept, const gpt2::Model& received, const CollectingReceiver& receiver) {
    const auto matrices = named_matrices(kept.weights());
    EXPECT_EQ(receiver.matrices.size(), matrices.size());
    for (const auto& [key, m] : matrices) {
        const std::string what = key.second + " of layer " + std::to_string(key.first);
        const auto found = receiver.matrices.find(key);
        ASSERT_NE(found, receiver.matrices.end()) << what << " never arrived";
        const ReceivedMatrix& r = found->second;
        EXPECT_EQ(r.format, m->format) << what;
        EXPECT_EQ(r.n_out, m->n_out) << what;
        EXPECT_EQ(r.n_in, m->n_in) << what;
        for (int o = 0; o < r.n_out; o++) ASSERT_EQ(r.arrivals[size_t(o)], 1) << what << " row " << o;
        EXPECT_TRUE(r.rows == kept_rows(*m)) << what << ": rows differ";
        if (m->format == WeightFormat::int8) {
            EXPECT_EQ(std::memcmp(r.scale.data(), m->scale, r.scale.size() * sizeof(float)), 0) << what << " scales";
        }
    }
    const gpt2::Weights &a = kept.weights(), &b = received.weights();
    const gpt2::Config& c = kept.config();
    const size_t C = size_t(c.n_embd);
    auto same = [](const float* x, const float* y, size_t n) { return std::memcmp(x, y, n * sizeof(float)) == 0; };
    EXPECT_TRUE(same(a.wpe, b.wpe, size_t(c.n_ctx) * C));
    EXPECT_TRUE(same(a.ln_f.weight, b.ln_f.weight, C) && same(a.ln_f.bias, b.ln_f.bias, C));
    for (size_t l = 0; l < a.layers.size(); l++) {
        const gpt2::Layer &x = a.layers[l], &y = b.layers[l];
        EXPECT_TRUE(same(x.ln_1.weight, y.ln_1.weight, C) && same(x.ln_2.bias, y.ln_2.bias, C)) << "layer " << l;
        EXPECT_TRUE(same(x.attn_qkv.bias, y.attn_qkv.bias, 3 * C) && same(x.mlp_fc.bias, y.mlp_fc.bias, 4 * C) &&
                    same(x.attn_proj.bias, y.attn_proj.bias, C) && same(x.mlp_proj.bias, y.mlp_proj.bias, C))
            << "layer " << l;
        EXPECT_EQ(y.attn_qkv.weight, nullptr);
        EXPECT_EQ(y.mlp_proj.scale, nullptr);
    }
    EXPECT_EQ(b.wte.weight, nullptr);
    EXPECT_FALSE(received.has_weights());
    EXPECT_LT(gpt2::model_weight_bytes(received), gpt2::model_weight_bytes(kept));
    std::printf("heap weights: %zu bytes kept with the matrices, %zu with them handed over\n",
                gpt2::model_weight_bytes(kept), gpt2::model_weight_bytes(received));

    std::string error;
    EXPECT_EQ(gpt2::Session::create(received, true, gpt2::KvCacheFormat::fp32, &error), nullptr);
    EXPECT_EQ(error, "the model's weights were released (a GPU holds them): only a recording session runs it");
    EXPECT_NE(gpt2::Session::create_recording(received, true, &error), nullptr) << error;
}

TEST(MatrixReceiver, SafetensorsMatricesArriveRowByRowAsTheModelWouldKeepThem) {
    const gpt2_test::ModelSpec spec;  // n_embd 20: Conv1D matrices of 80 rows, wte of 67 rows in blocks of 16
    const std::vector<uint8_t> file = gpt2_test::build_safetensors(gpt2_test::random_tensors(spec));
    const std::string config = gpt2_test::config_json(spec);
    for (const WeightFormat format : {WeightFormat::fp32, WeightFormat::int8}) {
        SCOPED_TRACE(gpt2::weight_format_name(format));
        const std::unique_ptr<gpt2::Model> kept = gpt2_test::make_model(spec, format);
        for (const size_t piece : {size_t(1), size_t(997), file.size()}) {
            CollectingReceiver receiver;
            gpt2::LoadOptions options;
            options.format = format;
            options.matrix_receiver = &receiver;
            gpt2::ModelLoader loader(reinterpret_cast<const uint8_t*>(config.data()), config.size(), options);
            const std::unique_ptr<gpt2::Model> received = feed_in_pieces(loader, file, piece);
            ASSERT_NE(received, nullptr) << loader.error();
            expect_handed_over(*kept, *received, receiver);
        }
    }
}

TEST(MatrixReceiver, GgufMatricesOfEveryTypeArriveAsTheFileStoresThem) {
    const std::vector<uint8_t> file = gpt2_test::read_file(std::string(GPT2_GGUF_FIXTURE_DIR) + "/model.gguf");
    gpt2::ModelLoader plain(gpt2::LoadOptions{}, file.size());
    const std::unique_ptr<gpt2::Model> kept = feed_in_pieces(plain, file, file.size());
    ASSERT_NE(kept, nullptr) << plain.error();
    for (const size_t piece : {size_t(1), size_t(4093), file.size()}) {
        CollectingReceiver receiver;
        gpt2::LoadOptions options;
        options.matrix_receiver = &receiver;
        gpt2::ModelLoader loader(options, file.size());
        const std::unique_ptr<gpt2::Model> received = feed_in_pieces(loader, file, piece);
        ASSERT_NE(received, nullptr) << loader.error();
        expect_handed_over(*kept, *received, receiver);
        EXPECT_EQ(gpt2::model_weight_types(*received), gpt2::model_weight_types(*kept));
    }
}

// The weights by name (weights.h) are the matrices as MatrixRows names them, and a matrix's rows read back by name
// (copy_host_rows, a GPU host's upload from the heap) are the rows a receiver gets; the vectors by name are the
// model's own, and a name or layer the model lacks finds nothing.
TEST(MatrixReceiver, TheWeightsByNameAreTheMatricesAsReceived) {
    const gpt2_test::ModelSpec spec;
    const std::vector<uint8_t> file = gpt2_test::build_safetensors(gpt2_test::random_tensors(spec));
    const std::string config = gpt2_test::config_json(spec);
    const gpt2::WeightNames names = gpt2::weight_names();
    for (const WeightFormat format : {WeightFormat::fp32, WeightFormat::int8}) {
        SCOPED_TRACE(gpt2::weight_format_name(format));
        const std::unique_ptr<gpt2::Model> kept = gpt2_test::make_model(spec, format);
        const gpt2::Weights& w = kept->weights();
        CollectingReceiver receiver;
        gpt2::LoadOptions options;
        options.format = format;
        options.matrix_receiver = &receiver;
        gpt2::ModelLoader loader(reinterpret_cast<const uint8_t*>(config.data()), config.size(), options);
        ASSERT_NE(feed_in_pieces(loader, file, file.size()), nullptr) << loader.error();
        for (const auto& [key, received] : receiver.matrices) {
            const auto& listed = key.first < 0 ? names.model_matrices : names.layer_matrices;
            EXPECT_NE(std::find(listed.begin(), listed.end(), key.second), listed.end()) << key.second;
            const gpt2::Linear* m = gpt2::find_matrix(w, key.first, key.second);
            ASSERT_NE(m, nullptr) << key.second;
            std::unique_ptr<uint8_t[]> staging;
            size_t staging_bytes = 0;
            ASSERT_EQ(gpt2::copy_host_rows(*m, 0, m->n_out, &staging, &staging_bytes), received.rows.size());
            EXPECT_EQ(std::memcmp(staging.get(), received.rows.data(), received.rows.size()), 0) << key.second;
            EXPECT_EQ(gpt2::copy_host_rows(*m, 1, m->n_out, &staging, &staging_bytes), 0u) << "rows past the end";
        }
        bool tied = false;
        EXPECT_EQ(gpt2::find_matrix(w, -1, "lm_head", &tied), &w.wte);
        EXPECT_TRUE(tied);
        size_t n = 0;
        EXPECT_EQ(gpt2::find_vector(w, kept->config(), -1, "wpe", &n), w.wpe);
        EXPECT_EQ(n, size_t(spec.n_ctx) * size_t(spec.n_embd));
        EXPECT_EQ(gpt2::find_vector(w, kept->config(), -1, "ln_f.bias", &n), w.ln_f.bias);
        EXPECT_EQ(gpt2::find_vector(w, kept->config(), 1, "ln_2.weight", &n), w.layers[1].ln_2.weight);
        EXPECT_EQ(n, size_t(spec.n_embd));
        EXPECT_EQ(gpt2::find_vector(w, kept->config(), -1, "ln_1.weight", &n), nullptr);
        EXPECT_EQ(gpt2::find_matrix(w, 0, "wte"), nullptr);
        EXPECT_EQ(gpt2::find_matrix(w, spec.n_layer, "mlp_fc"), nullptr);
    }
}

TEST(MatrixReceiver, AReceiversErrorStopsTheLoadWithThatError) {
    const gpt2_test::ModelSpec spec;
    const std::vector<uint8_t> file = gpt2_test::build_safetensors(gpt2_test::random_tensors(spec));
    const std::string config = gpt2_test::config_json(spec);
    CollectingReceiver receiver;
    receiver.refuse_at = "mlp_fc";
    gpt2::LoadOptions options;
    options.matrix_receiver = &receiver;
    gpt2::ModelLoader loader(reinterpret_cast<const uint8_t*>(config.data()), config.size(), options);
    EXPECT_EQ(feed_in_pieces(loader, file, 997), nullptr);
    EXPECT_EQ(loader.error(), "device 'webgpu': no room for mlp_fc");
    EXPECT_EQ(loader.error_kind(), gpt2::ErrorKind::input);
}

// Where a GGUF file stores the bytes of one tensor: read from its header, then the read stops.
class TensorOffsetSink : public gpt2::GgufSink {
   public:
    explicit TensorOffsetSink(std::string name) : name_(std::move(name)) {}
    uint64_t offset = 0, n_in = 0;
    bool on_header(const gpt2::GgufModelInfo& info, std::string* error) override {
        for (size_t t = 0; t < info.tensors.size(); t++)
            if (info.tensor_name(t) == name_) {
                offset = info.data_offset + info.tensors[t].offset;
                n_in = info.tensors[t].ne[0];
            }
        *error = "read";
        return false;
    }
    bool on_tensor_bytes(size_t, uint64_t, const uint8_t*, size_t, std::string*) override { return false; }

   private:
    std::string name_;
};

TEST(MatrixReceiver, ANonFiniteValueInAGgufF32MatrixIsNamedAsWithoutAReceiver) {
    std::vector<uint8_t> file =
        gpt2_test::read_file(std::string(GPT2_FIXTURE_DIR) + "/../tiny-random-gguf/model-f32.gguf");
    TensorOffsetSink where("blk.1.ffn_up.weight");
    gpt2::GgufReader(&where, file.size()).feed(file.data(), file.size());
    ASSERT_GT(where.offset, 0u);
    const uint64_t element = where.n_in + 3;  // in the second row
    const float nan = std::nanf("");
    std::memcpy(file.data() + where.offset + element * sizeof(float), &nan, sizeof nan);
    gpt2::ModelLoader plain(gpt2::LoadOptions{}, file.size());
    EXPECT_EQ(feed_in_pieces(plain, file, 61), nullptr);
    CollectingReceiver receiver;
    gpt2::LoadOptions options;
    options.matrix_receiver = &receiver;
    gpt2::ModelLoader handing(options, file.size());
    EXPECT_EQ(feed_in_pieces(handing, file, 61), nullptr);
    EXPECT_EQ(handing.error(),
              "model.gguf: tensor 'blk.1.ffn_up.weight' contains NaN at element " + std::to_string(element));
    EXPECT_EQ(handing.error(), plain.error());
}

}  // namespace
