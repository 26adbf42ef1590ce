// The multi-threaded forward pass (LoadOptions::n_threads) and its pool (engine/model/thread_pool.h): any thread count
// gives bit-identical logits and tokens, for prefill (split by tokens) and step (split by output rows), fp32 and
// int8, cached and uncached, across a window slide; the pool runs every part once, survives many jobs, callers
// on two threads, and destruction at any moment.
#include <gtest/gtest.h>

#include <atomic>
#include <limits>
#include <thread>
#include <vector>

#include "gpt2.h"
#include "model/thread_pool.h"
#include "test_util.h"

using namespace gpt2_test;

namespace {

// Large enough that every matrix is split at 2 to 4 threads (a part gets at least 32768 multiply-adds; attn.c_proj,
// 260 x 260, still splits in two), and odd enough that row ranges end inside GEMV tiles: n_embd 260 (not a multiple
// of 8), head size 65, 3001 LM-head rows. n_ctx 96 makes the 60 steps below slide the window; the uncached steps
// recompute 42 to 96 tokens, split by tokens (at least 32 per thread).
ModelSpec split_spec() {
    ModelSpec spec;
    spec.n_vocab = 3001;
    spec.n_ctx = 96;
    spec.n_embd = 260;
    spec.n_head = 4;
    spec.n_layer = 2;
    spec.seed = 5;
    return spec;
}

std::unique_ptr<gpt2::Model> load_bundled(gpt2::WeightFormat format, int n_threads) {
    gpt2::LoadOptions options;
    options.format = format;
    options.n_threads = n_threads;
    return load_folder(GPT2_BUNDLED_MODEL_DIR, options);
}

std::unique_ptr<gpt2::Model> make_threaded(const ModelSpec& spec, gpt2::WeightFormat format, int n_threads) {
    gpt2::LoadOptions options;
    options.format = format;
    options.n_threads = n_threads;
    return make_model(spec, options);
}

// Everything a model computes for one prompt: the prompt's logits from one batched prefill, then greedy steps
// with the cache (row-split GEMVs) and the same tokens recomputed without it (token-split GEMMs).
struct Trace {
    std::vector<float> prefill_logits;   // (prompt, n_vocab)
    std::vector<int32_t> tokens;         // (steps) greedy continuation
    std::vector<float> cached_logits;    // (steps, n_vocab) after each cached step
    std::vector<float> uncached_logits;  // (steps, n_vocab) after each uncached step
};

Trace trace(const gpt2::Model& model, const std::vector<int32_t>& prompt, int steps,
            gpt2::KvCacheFormat kv = gpt2::KvCacheFormat::fp32) {
    const size_t V = size_t(gpt2::model_config(model).n_vocab);
    Trace t;
    auto cached = greedy_session(model, true, kv);
    auto uncached = greedy_session(model, false, kv);
    if (!cached || !uncached) return t;
    t.prefill_logits.resize(prompt.size() * V);
    EXPECT_TRUE(cached->prefill_logits(prompt.data(), prompt.size(), t.prefill_logits.data())) << cached->error();
    int next = cached->sample();
    EXPECT_EQ(uncached->prefill(prompt.data(), prompt.size()), next);
    for (int i = 0; i < steps && next >= 0; i++) {
        t.tokens.push_back(next);
        const int from_uncached = uncached->step(next);
        next = cached->step(next);
        EXPECT_EQ(from_uncached, next) << "step " << i;
        t.cached_logits.insert(t.cached_logits.end(), cached->logits(), cached->logits() + V);
        t.uncached_logits.insert(t.uncached_logits.end(), uncached->logits(), uncached->logits() + V);
    }
    EXPECT_GE(next, 0) << cached->error();
    return t;
}

void expect_identical(const Trace& single, const Trace& threaded, const std::string& what) {
    ASSERT_FALSE(single.tokens.empty()) << what;
    EXPECT_TRUE(same_bits(single.prefill_logits, threaded.prefill_logits)) << what << ": prefill logits";
    EXPECT_EQ(single.tokens, threaded.tokens) << what << ": tokens";
    EXPECT_TRUE(same_bits(single.cached_logits, threaded.cached_logits)) << what << ": cached step logits";
    EXPECT_TRUE(same_bits(single.uncached_logits, threaded.uncached_logits)) << what << ": uncached step logits";
}

const char* format_name(gpt2::WeightFormat format) { return format == gpt2::WeightFormat::int8 ? "int8" : "fp32"; }

}  // namespace

TEST(Threads, AnyThreadCountIsBitIdenticalToOneThread) {
    std::vector<int32_t> prompt;
    for (int i = 0; i < 41; i++) prompt.push_back((i * 733 + 11) % 3001);
    for (gpt2::WeightFormat format : {gpt2::WeightFormat::fp32, gpt2::WeightFormat::int8}) {
        auto one = make_threaded(split_spec(), format, 1);
        ASSERT_TRUE(one);
        EXPECT_EQ(one->n_threads(), 1);
        const Trace single = trace(*one, prompt, 60);
        for (int n_threads : {2, 3, 4}) {
            auto model = make_threaded(split_spec(), format, n_threads);
            ASSERT_TRUE(model);
            EXPECT_EQ(model->n_threads(), n_threads);
            expect_identical(single, trace(*model, prompt, 60),
                             std::string(format_name(format)) + ", " + std::to_string(n_threads) + " threads");
        }
    }
}

TEST(Threads, AnyThreadCountIsBitIdenticalToOneThreadWithTheInt8KvCache) {
    std::vector<int32_t> prompt;
    for (int i = 0; i < 41; i++) prompt.push_back((i * 733 + 11) % 3001);
    auto one = make_threaded(split_spec(), gpt2::WeightFormat::int8, 1);
    ASSERT_TRUE(one);
    const Trace single = trace(*one, prompt, 60, gpt2::KvCacheFormat::int8);
    for (int n_threads : {2, 3}) {
        auto model = make_threaded(split_spec(), gpt2::WeightFormat::int8, n_threads);
        ASSERT_TRUE(model);
        expect_identical(single, trace(*model, prompt, 60, gpt2::KvCacheFormat::int8),
                         "int8 KV cache, " + std::to_string(n_threads) + " threads");
    }
}

TEST(Threads, BundledModelIsBitIdenticalAtTwoToFourThreads) {
    // 70 tokens: the uncached recomputation splits its batched passes by tokens (at least 32 per thread)
    std::vector<int32_t> prompt;
    for (int i = 0; i < 70; i++) prompt.push_back((i * 7919 + 13) % 50257);
    for (gpt2::WeightFormat format : {gpt2::WeightFormat::fp32, gpt2::WeightFormat::int8}) {
        auto one = load_bundled(format, 1);
        ASSERT_TRUE(one);
        const Trace single = trace(*one, prompt, 24);
        for (int n_threads : {2, 3, 4}) {
            auto model = load_bundled(format, n_threads);
            ASSERT_TRUE(model);
            expect_identical(single, trace(*model, prompt, 24),
                             std::string("bundled ") + format_name(format) + ", " + std::to_string(n_threads) +
                                 " threads");
        }
    }
}

TEST(Threads, SessionsOnTwoThreadsShareOneModel) {
    auto model = make_threaded(split_spec(), gpt2::WeightFormat::fp32, 2);
    ASSERT_TRUE(model);
    const std::vector<int32_t> prompts[2] = {{1, 2, 3, 4, 5}, {2999, 17, 400, 1234}};
    Trace sequential[2], concurrent[2];
    for (int i = 0; i < 2; i++) sequential[i] = trace(*model, prompts[i], 40);
    std::thread other([&] { concurrent[1] = trace(*model, prompts[1], 40); });
    concurrent[0] = trace(*model, prompts[0], 40);
    other.join();
    for (int i = 0; i < 2; i++) expect_identical(sequential[i], concurrent[i], "prompt " + std::to_string(i));
}

TEST(Threads, LoadRejectsThreadCountsOutOfRange) {
    const ModelSpec spec;
    const std::string config = config_json(spec);
    const std::vector<uint8_t> weights = build_safetensors(random_tensors(spec));
    for (int n_threads : {0, -1, 17}) {
        gpt2::LoadOptions options;
        options.n_threads = n_threads;
        std::string error;
        auto model = gpt2::load_model(reinterpret_cast<const uint8_t*>(config.data()), config.size(), weights.data(),
                                      weights.size(), options, &error);
        EXPECT_FALSE(model);
        EXPECT_EQ(error, "n_threads must be 1..16, got " + std::to_string(n_threads));
    }
}

namespace {

// Counts how often each part of each job ran.
struct PartCounter {
    std::atomic<int> runs[16];
    static void task(void* context, int part) { static_cast<PartCounter*>(context)->runs[part]++; }
};

// Runs jobs of 1..16 parts on pool and checks that every part of every job ran exactly once.
void run_counted_jobs(gpt2::ThreadPool* pool, int jobs, int seed) {
    PartCounter counter;
    for (int job = 0; job < jobs; job++) {
        const int n_parts = 1 + (job * 7 + seed) % 16;
        for (auto& runs : counter.runs) runs = 0;
        pool->run(&PartCounter::task, &counter, n_parts);
        for (int part = 0; part < 16; part++)
            ASSERT_EQ(counter.runs[part].load(), part < n_parts ? 1 : 0) << "job " << job << ", part " << part;
    }
}

}  // namespace

TEST(ThreadPool, RunsEveryPartExactlyOnce) {
    auto pool = gpt2::ThreadPool::create(4);
    ASSERT_TRUE(pool);
    EXPECT_EQ(pool->n_threads(), 4);
    run_counted_jobs(pool.get(), 20000, 0);
}

TEST(ThreadPool, CallersOnTwoThreadsEachGetTheirOwnJobsDone) {
    auto pool = gpt2::ThreadPool::create(3);
    ASSERT_TRUE(pool);
    std::thread other([&] { run_counted_jobs(pool.get(), 5000, 3); });
    run_counted_jobs(pool.get(), 5000, 0);
    other.join();
}

TEST(ThreadPool, WorkersSleepBetweenJobsAndWakeUp) {
    auto pool = gpt2::ThreadPool::create(3);
    ASSERT_TRUE(pool);
    for (int round = 0; round < 5; round++) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // longer than the workers spin
        run_counted_jobs(pool.get(), 10, round);
    }
}

TEST(ThreadPool, ThreadCountsAreClampedAndPoolsDestroyCleanlyAtAnyMoment) {
    EXPECT_EQ(gpt2::ThreadPool::create(0)->n_threads(), 1);
    EXPECT_EQ(gpt2::ThreadPool::create(1)->n_threads(), 1);
    for (int i = 0; i < 100; i++) {
        auto pool = gpt2::ThreadPool::create(1 + i % 4);
        ASSERT_TRUE(pool);
        if (i % 2) run_counted_jobs(pool.get(), i % 7, i);
    }  // destroyed while workers start, spin or sleep
}

// Sets the workers' cap for one test, and lifts it again after the test's pools are gone.
struct WorkerCap {
    explicit WorkerCap(int max_workers) { gpt2::ThreadPool::limit_workers(max_workers); }
    ~WorkerCap() { gpt2::ThreadPool::limit_workers(std::numeric_limits<int>::max()); }
};

TEST(ThreadPool, WorkersOfAllPoolsStayWithinTheCapAndReturnToItWhenAPoolEnds) {
    WorkerCap cap(3);
    auto first = gpt2::ThreadPool::create(3);   // 2 workers
    auto second = gpt2::ThreadPool::create(4);  // 1 worker left under the cap
    auto third = gpt2::ThreadPool::create(2);   // none left
    EXPECT_EQ(first->n_threads(), 3);
    EXPECT_EQ(second->n_threads(), 2);
    EXPECT_EQ(third->n_threads(), 1);
    run_counted_jobs(second.get(), 5, 1);
    first.reset();
    EXPECT_EQ(gpt2::ThreadPool::create(4)->n_threads(), 3);  // the first pool's 2 workers are free again
}
