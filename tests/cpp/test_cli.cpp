// The native tool build/native/gpt2, run as a subprocess on models written to a temporary directory.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "decoding/scorer.h"
#include "gpt2.h"
#include "test_util.h"

using namespace gpt2_test;

namespace {

struct Result {
    int status;
    std::string out, err;
};

std::string slurp(const std::string& path) {
    const auto bytes = read_file(path);
    return std::string(bytes.begin(), bytes.end());
}

void write(const std::string& path, const void* data, size_t n) {
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_TRUE(f) << path;
    ASSERT_EQ(std::fwrite(data, 1, n, f), n);
    std::fclose(f);
}

class Cli : public ::testing::Test {
   protected:
    std::string dir_;
    ModelSpec spec_;
    std::vector<TensorSpec> tensors_;

    void SetUp() override {
        char tmpl[] = "/tmp/gpt2_cli_test_XXXXXX";
        ASSERT_TRUE(mkdtemp(tmpl));
        dir_ = tmpl;
        tensors_ = random_tensors(spec_);
        write_model(dir_, spec_, tensors_);
    }
    void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

    static void write_model(const std::string& dir, const ModelSpec& spec, const std::vector<TensorSpec>& tensors) {
        const std::string config = config_json(spec);
        const auto weights = build_safetensors(tensors);
        write(dir + "/config.json", config.data(), config.size());
        write(dir + "/model.safetensors", weights.data(), weights.size());
    }

    Result run(const std::string& args) {
        const std::string cmd = std::string(GPT2_CLI_PATH) + " " + args + " >" + dir_ + "/stdout 2>" + dir_ + "/stderr";
        const int raw = std::system(cmd.c_str());
        return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, slurp(dir_ + "/stdout"), slurp(dir_ + "/stderr")};
    }

    std::unique_ptr<gpt2::Model> model() {
        std::string error;
        auto m = load(config_json(spec_), build_safetensors(tensors_), &error);
        EXPECT_TRUE(m) << error;
        return m;
    }
};

void expect_one_error_line(const Result& r, const std::string& needle) {
    EXPECT_NE(r.status, 0);
    EXPECT_EQ(r.out, "");
    ASSERT_FALSE(r.err.empty());
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "exactly one line expected: " << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

}  // namespace

TEST_F(Cli, GeneratesTheSessionsGreedyTokens) {
    auto m = model();
    std::string error;
    auto session = gpt2::Session::create(*m, true, &error);
    gpt2::SamplingSettings greedy;
    greedy.temperature = 0;
    session->set_sampling(greedy);
    const int32_t prompt[] = {1, 2, 3};
    std::string expected;
    int next = session->prefill(prompt, 3);
    for (int i = 0; i < 50; i++) {  // 50 > n_ctx - 3: also slides
        expected += (i ? "," : "") + std::to_string(next);
        next = session->step(next);
    }
    Result r = run("--model " + dir_ + " --ids 1,2,3 -n 50");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, expected + "\n");
    EXPECT_NE(r.err.find("prefill: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(" ms (3 tokens), decode: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(" ms/token (49 tokens)"), std::string::npos) << r.err;
    EXPECT_EQ(run("--model " + dir_ + " --ids 1,2,3 -n 50 --no-cache").out, expected + "\n");
    EXPECT_EQ(run("--model " + dir_ + " --ids 1,2,3 -n 0").out, "\n");
}

TEST_F(Cli, SamplingIsSeeded) {
    const std::string args = "--model " + dir_ +
                             " --ids 5 -n 30 --temperature 1.2 --top-k 20 --top-p 0.95 "
                             "--repetition-penalty 1.1 --seed ";
    const Result a = run(args + "7"), b = run(args + "7"), c = run(args + "8");
    EXPECT_EQ(a.status, 0) << a.err;
    EXPECT_EQ(a.out, b.out);
    EXPECT_NE(a.out, c.out);
}

TEST_F(Cli, DumpsTheLogitsOfEveryPromptPosition) {
    const Result r = run("--model " + dir_ + " --ids 4,8,15,16,23,42 -n 1 --dump-logits " + dir_ + "/logits.f32");
    ASSERT_EQ(r.status, 0) << r.err;
    const auto bytes = read_file(dir_ + "/logits.f32");
    ASSERT_EQ(bytes.size(), 6u * size_t(spec_.n_vocab) * 4);
    // the library's logits with the CLI's default int8 KV cache, and with --kv-cache fp32 those of an fp32 cache
    auto m = model();
    const int32_t ids[] = {4, 8, 15, 16, 23, 42};
    const auto library_logits = [&](gpt2::KvCacheFormat kv) {
        std::string error;
        auto session = gpt2::Session::create(*m, true, kv, &error);
        std::vector<float> logits(6 * size_t(spec_.n_vocab));
        EXPECT_TRUE(session->prefill_logits(ids, 6, logits.data()));
        return logits;
    };
    const std::vector<float> int8 = library_logits(gpt2::KvCacheFormat::int8);
    EXPECT_EQ(std::memcmp(bytes.data(), int8.data(), bytes.size()), 0);
    ASSERT_EQ(run("--model " + dir_ + " --ids 4,8,15,16,23,42 -n 1 --kv-cache fp32 --dump-logits " + dir_ +
                  "/logits.f32")
                  .status,
              0);
    const std::vector<float> fp32 = library_logits(gpt2::KvCacheFormat::fp32);
    EXPECT_EQ(std::memcmp(read_file(dir_ + "/logits.f32").data(), fp32.data(), bytes.size()), 0);
    EXPECT_NE(std::memcmp(int8.data(), fp32.data(), bytes.size()), 0) << "the two caches give different logits";
}

TEST_F(Cli, EvaluatesTheMeanNegativeLogprobOfTheSessionsScore) {
    // 81 tokens with n_ctx 40: windows [0, 40) [20, 60) [40, 80) [41, 81), 80 predictions
    std::vector<uint16_t> ids(81);
    for (size_t i = 0; i < ids.size(); i++) ids[i] = uint16_t((i * 7 + 3) % size_t(spec_.n_vocab));
    write(dir_ + "/ids.u16", ids.data(), ids.size() * 2);
    const Result r = run("--model " + dir_ + " --eval " + dir_ + "/ids.u16");
    ASSERT_EQ(r.status, 0) << r.err;

    auto m = model();
    std::string error;
    auto session = gpt2::Session::create(*m, true, gpt2::KvCacheFormat::int8, &error);  // the CLI's default
    const std::vector<int32_t> ids32(ids.begin(), ids.end());
    std::vector<gpt2::TokenScore> scores(80);
    ASSERT_TRUE(gpt2::Scorer(*session).score(ids32.data(), 81, 0, scores.data(), nullptr)) << session->error();
    double total = 0;
    for (const gpt2::TokenScore& s : scores) total -= s.logprob;
    char expected[128];
    std::snprintf(expected, sizeof expected, "eval: %.6f nats/token over 80 predictions\n", total / 80);
    EXPECT_EQ(r.out, expected);

    // --eval-tokens 50: the file's first 50 ids, as scored alone
    const Result first = run("--model " + dir_ + " --eval " + dir_ + "/ids.u16 --eval-tokens 50");
    ASSERT_EQ(first.status, 0) << first.err;
    ASSERT_TRUE(gpt2::Scorer(*session).score(ids32.data(), 50, 0, scores.data(), nullptr)) << session->error();
    total = 0;
    for (int i = 0; i < 49; i++) total -= scores[size_t(i)].logprob;
    std::snprintf(expected, sizeof expected, "eval: %.6f nats/token over 49 predictions\n", total / 49);
    EXPECT_EQ(first.out, expected);
    expect_one_error_line(run("--model " + dir_ + " --ids 1,2 --eval-tokens 50"), "--eval-tokens needs --eval");
}

TEST_F(Cli, ScorePrintsEachTokensLogprobAndRankThenTheTotalAndPerplexity) {
    auto m = model();
    std::string error;
    auto session = gpt2::Session::create(*m, true, gpt2::KvCacheFormat::int8, &error);  // the CLI's default
    const int32_t ids[] = {4, 8, 15, 16, 23, 42};
    std::vector<gpt2::TokenScore> scores(5);
    ASSERT_TRUE(gpt2::Scorer(*session).score(ids, 6, 0, scores.data(), nullptr)) << session->error();
    std::string expected;
    double total = 0;
    char line[128];
    for (size_t i = 0; i < scores.size(); i++) {
        std::snprintf(line, sizeof line, "%zu\t%d\t%.6f\t%d\n", i + 1, ids[i + 1], scores[i].logprob, scores[i].rank);
        expected += line;
        total += scores[i].logprob;
    }
    std::snprintf(line, sizeof line, "total %.6f perplexity %.6f\n", total, std::exp(-total / 5));
    expected += line;
    const Result r = run("--model " + dir_ + " --score --ids 4,8,15,16,23,42");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, expected);
    expect_one_error_line(run("--model " + dir_ + " --score --ids 5"),
                          "gpt2: --score: needs at least 2 token ids, got 1");
    expect_one_error_line(run("--model " + dir_ + " --score --ids 5,67"),
                          "gpt2: --score: token id 67 out of range [0, 67)");
    expect_one_error_line(run("--model " + dir_ + " --score --eval " + dir_ + "/ids.u16"), "--score needs --ids");
}

TEST_F(Cli, StopsAtEndOfText) {
    // a 50257-token vocabulary whose LM head always prefers <|endoftext|> (50256)
    ModelSpec spec;
    spec.n_vocab = 50257;
    spec.n_embd = 8;
    spec.n_head = 2;
    auto tensors = random_tensors(spec);
    for (TensorSpec& t : tensors) {
        std::vector<float> v(t.bytes.size() / 4);
        std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
        if (t.name == "ln_f.weight") std::fill(v.begin(), v.end(), 0.0f);
        if (t.name == "ln_f.bias") v = {1, 0, 0, 0, 0, 0, 0, 0};  // final hidden state = e0
        if (t.name == "wte.weight") v[50256 * 8] = 1.0f;          // logit of 50256 = 1 > |others| <= 80/256
        t.bytes = float_bytes(v);
    }
    write_model(dir_, spec, tensors);
    Result r = run("--model " + dir_ + " --ids 1,2 -n 5");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "\n");
    r = run("--model " + dir_ + " --ids 1,2 -n 3 --no-stop");
    EXPECT_EQ(r.out, "50256,50256,50256\n");
}

TEST_F(Cli, ErrorsAreOneLineWithNonZeroStatus) {
    expect_one_error_line(run("--model " + dir_ + " --ids 1,2 --bogus"), "unknown argument \"--bogus\"");
    expect_one_error_line(run("--ids 1,2"), "--model is required");
    expect_one_error_line(run("--model " + dir_), "give exactly one of --ids and --eval");
    expect_one_error_line(run("--model " + dir_ + " --ids 1,x"), "--ids: expected comma-separated");
    expect_one_error_line(run("--model " + dir_ + " --ids 1 -n -4"), "-n: expected an integer");
    expect_one_error_line(run("--model " + dir_ + " --ids 1 --kv-cache fp16"),
                          "--kv-cache: expected int8 or fp32, got \"fp16\"");
    expect_one_error_line(run("--model " + dir_ + " --ids 1 --temperature"), "--temperature: missing value");
    expect_one_error_line(run("--model " + dir_ + "/nope --ids 1"), "nope/config.json: No such file or directory");
    expect_one_error_line(run("--model " + dir_ + " --ids 1,67"), "token id 67 out of range [0, 67)");
    expect_one_error_line(run("--model " + dir_ + " --eval " + dir_ + "/missing.u16"), "missing.u16");
    write(dir_ + "/model.safetensors", "garbage", 7);
    expect_one_error_line(run("--model " + dir_ + " --ids 1"), "model.safetensors: file is 7 bytes");
}

// The line protocol tools/bench/bench.mjs drives: cached and uncached sessions answer "<next token> <ms>", and after
// "release uncached" only the cached one is left (the benchmark then reads the steady-state RSS).
TEST_F(Cli, BenchAnswersEachCommandAndReleasesTheUncachedSession) {
    const std::string commands =
        "prefill cached 1,2\nprefill uncached 1,2\nrelease uncached\nstep cached 3\nstep uncached 3\n";
    write(dir_ + "/commands", commands.data(), commands.size());
    const Result r = run("--model " + dir_ + " --bench <" + dir_ + "/commands");
    const std::string expected_next = run("--model " + dir_ + " --ids 1,2 -n 1 --no-stop").out;  // "<token>\n"
    EXPECT_NE(r.status, 0);
    std::vector<std::string> lines;
    for (size_t begin = 0, end; (end = r.out.find('\n', begin)) != std::string::npos; begin = end + 1)
        lines.push_back(r.out.substr(begin, end - begin));
    ASSERT_EQ(lines.size(), 5u) << r.out;
    EXPECT_EQ(lines[0].rfind("ready ", 0), 0u) << lines[0];
    EXPECT_EQ(lines[1].substr(0, lines[1].find(' ')) + "\n", expected_next);
    EXPECT_EQ(lines[2].substr(0, lines[2].find(' ')) + "\n", expected_next);
    EXPECT_EQ(lines[3], "released");
    EXPECT_NE(r.err.find("--bench: the uncached session was released"), std::string::npos) << r.err;
}

// A .gguf path is one GGUF file (tests/fixtures/tiny-gguf: every tensor type, its own tokenizer and eos 383).
TEST_F(Cli, AGgufFileGeneratesDumpsAndEvaluatesLikeTheLibrary) {
    const std::string file = std::string(GPT2_GGUF_FIXTURE_DIR) + "/model.gguf";
    const auto bytes = read_file(file);
    gpt2::ModelLoader loader(gpt2::LoadOptions{}, bytes.size());
    ASSERT_TRUE(loader.feed(bytes.data(), bytes.size())) << loader.error();
    const auto m = loader.finish();
    ASSERT_TRUE(m) << loader.error();
    std::string error;
    auto session = gpt2::Session::create(*m, true, gpt2::KvCacheFormat::int8, &error);  // the CLI's default
    gpt2::SamplingSettings greedy;
    greedy.temperature = 0;
    session->set_sampling(greedy);
    const int32_t prompt[] = {10, 20, 30};
    std::string expected;
    int next = session->prefill(prompt, 3);
    for (int i = 0; i < 12 && next != 383; i++) {
        expected += (i ? "," : "") + std::to_string(next);
        next = session->step(next);
    }
    Result r = run("--model " + file + " --ids 10,20,30 -n 12");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, expected + "\n");

    r = run("--model " + file + " --ids 10,20,30 -n 1 --dump-logits " + dir_ + "/logits.f32");
    ASSERT_EQ(r.status, 0) << r.err;
    std::vector<float> logits(3 * 384);
    ASSERT_TRUE(session->prefill_logits(prompt, 3, logits.data()));
    const auto dumped = read_file(dir_ + "/logits.f32");
    ASSERT_EQ(dumped.size(), logits.size() * 4);
    EXPECT_EQ(std::memcmp(dumped.data(), logits.data(), dumped.size()), 0);

    std::vector<uint16_t> ids(100);
    for (size_t i = 0; i < ids.size(); i++) ids[i] = uint16_t((i * 7 + 3) % 384);
    write(dir_ + "/ids.u16", ids.data(), ids.size() * 2);
    r = run("--model " + file + " --eval " + dir_ + "/ids.u16");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out.rfind("eval: ", 0), 0u) << r.out;
    EXPECT_NE(r.out.find(" nats/token over 99 predictions"), std::string::npos) << r.out;  // every token but the first
}

TEST_F(Cli, AGgufFileRefusesInt8AndNamesItsErrors) {
    const std::string file = std::string(GPT2_GGUF_FIXTURE_DIR) + "/model.gguf";
    expect_one_error_line(run("--model " + file + " --int8 --ids 1"),
                          "model.gguf: a GGUF model runs in the types its file stores");
    write(dir_ + "/bad.gguf", "GGUF\x02\0\0\0", 8);
    expect_one_error_line(run("--model " + dir_ + "/bad.gguf --ids 1"), "model.gguf: unsupported GGUF version 2");
    expect_one_error_line(run("--model " + dir_ + "/none.gguf --ids 1"), "none.gguf: No such file or directory");
}
