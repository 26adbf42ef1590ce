// Counts the malloc / calloc / realloc calls made from the engine's code: the test binary is linked with
// -Wl,--wrap for them (tests/cpp/CMakeLists.txt). Eigen allocates with malloc, not operator new, so the
// operator new counter of alloc_counter.cpp alone would not notice an Eigen temporary in engine/kernels/ops.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>

#include "decoding/beam_search.h"
#include "decoding/sequences.h"
#include "decoding/speculation.h"
#include "gpt2.h"
#include "inspection/inspector.h"
#include "test_util.h"

namespace {
std::atomic<long> g_engine_mallocs{0};
}

extern "C" {
void* __real_malloc(size_t size);
void* __real_calloc(size_t count, size_t size);
void* __real_realloc(void* p, size_t size);
void* __wrap_malloc(size_t size) {
    g_engine_mallocs++;
    return __real_malloc(size);
}
void* __wrap_calloc(size_t count, size_t size) {
    g_engine_mallocs++;
    return __real_calloc(count, size);
}
void* __wrap_realloc(void* p, size_t size) {
    g_engine_mallocs++;
    return __real_realloc(p, size);
}
}

TEST(Session, NoMallocPerToken) {
    gpt2_test::ModelSpec odd;  // rows of 6 floats: most rows start off a 16-byte boundary (Eigen's unaligned paths)
    odd.n_embd = 6;
    odd.n_head = 3;
    odd.n_ctx = 16;                                                         // slides the window below
    for (const gpt2_test::ModelSpec& spec : {gpt2_test::ModelSpec(), odd})  // x both weight formats
        for (gpt2::WeightFormat format : {gpt2::WeightFormat::fp32, gpt2::WeightFormat::int8}) {
            auto model = gpt2_test::make_model(spec, format);
            ASSERT_TRUE(model);
            const long at_load = g_engine_mallocs;
            EXPECT_GT(at_load, 0) << "the malloc wrappers are not linked in";
            for (bool cache : {true, false})
                for (gpt2::KvCacheFormat kv : {gpt2::KvCacheFormat::fp32, gpt2::KvCacheFormat::int8}) {
                    std::string error;
                    auto session = gpt2::Session::create(*model, cache, kv, &error);
                    ASSERT_TRUE(session) << error;
                    gpt2::SamplingSettings settings;
                    settings.top_k = 10;
                    settings.top_p = 0.9f;
                    settings.repetition_penalty = 1.2f;
                    session->set_sampling(settings);
                    const int32_t prompt[5] = {1, 2, 3, 4, 5};
                    const long before = g_engine_mallocs;
                    int next = session->prefill(prompt, 5);
                    for (int i = 0; i < 40 && next >= 0; i++) next = session->step(next);
                    EXPECT_GE(next, 0) << session->error();
                    EXPECT_EQ(g_engine_mallocs - before, 0)
                        << (cache ? "cached, " : "uncached, ") << gpt2::kv_cache_format_name(kv) << " KV cache";
                }
        }
}

TEST(Session, NoMallocPerTokenWithThreads) {
    gpt2_test::ModelSpec spec;  // large enough that the matrix products are split between 3 threads
    spec.n_vocab = 3001;
    spec.n_embd = 260;
    spec.n_ctx = 80;  // the uncached steps recompute up to 80 tokens (split by tokens from 64), then slide
    for (gpt2::WeightFormat format : {gpt2::WeightFormat::fp32, gpt2::WeightFormat::int8}) {
        gpt2::LoadOptions options;
        options.format = format;
        options.n_threads = 3;
        auto model = gpt2_test::make_model(spec, options);
        ASSERT_TRUE(model);
        ASSERT_EQ(model->n_threads(), 3);
        for (bool cache : {true, false})
            for (gpt2::KvCacheFormat kv : {gpt2::KvCacheFormat::fp32, gpt2::KvCacheFormat::int8}) {
                std::string error;
                auto session = gpt2::Session::create(*model, cache, kv, &error);
                ASSERT_TRUE(session) << error;
                const int32_t prompt[20] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
                const long before = g_engine_mallocs;
                int next = session->prefill(prompt, 20);
                for (int i = 0; i < 70 && next >= 0; i++) next = session->step(next);
                EXPECT_GE(next, 0) << session->error();
                EXPECT_EQ(g_engine_mallocs - before, 0)
                    << (cache ? "cached, " : "uncached, ") << gpt2::kv_cache_format_name(kv) << " KV cache";
            }
    }
}

// Inspection allocates its results once per request (Inspector::configure); the inspected passes and draws then
// allocate nothing either, across a window slide.
TEST(Session, NoMallocPerInspectedToken) {
    gpt2_test::ModelSpec spec;
    spec.n_ctx = 16;
    auto model = gpt2_test::make_model(spec, gpt2::WeightFormat::int8);
    ASSERT_TRUE(model);
    for (gpt2::KvCacheFormat kv : {gpt2::KvCacheFormat::fp32, gpt2::KvCacheFormat::int8}) {
        std::string error;
        auto session = gpt2::Session::create(*model, true, kv, &error);
        ASSERT_TRUE(session) << error;
        gpt2::SamplingSettings settings;
        settings.top_k = 10;
        settings.top_p = 0.9f;
        settings.repetition_penalty = 1.2f;
        session->set_sampling(settings);
        gpt2::Inspector inspector(*session);
        ASSERT_TRUE(inspector.configure({{}, {0, 1}, {0, 1, 2, 3}, 8})) << session->error();
        const int32_t prompt[5] = {1, 2, 3, 4, 5};
        const long before = g_engine_mallocs;
        ASSERT_TRUE(inspector.feed_prompt(prompt, 5, true));
        int next = inspector.sample();
        for (int i = 0; i < 40 && next >= 0; i++) {
            ASSERT_TRUE(inspector.feed_step(next)) << session->error();
            next = inspector.sample();
        }
        EXPECT_GE(next, 0) << session->error();
        EXPECT_EQ(g_engine_mallocs - before, 0) << gpt2::kv_cache_format_name(kv) << " KV cache";
    }
}

TEST(Session, NoMallocInPrefillReusing) {
    gpt2_test::ModelSpec spec;
    spec.n_ctx = 100;  // the rest of a prompt spans two 64-token batches
    auto model = gpt2_test::make_model(spec);
    ASSERT_TRUE(model);
    for (gpt2::KvCacheFormat kv : {gpt2::KvCacheFormat::fp32, gpt2::KvCacheFormat::int8}) {
        std::string error;
        auto session = gpt2::Session::create(*model, true, kv, &error);
        ASSERT_TRUE(session) << error;
        int32_t prompt[90];
        for (int i = 0; i < 90; i++) prompt[i] = (i * 7 + 1) % spec.n_vocab;
        const long before = g_engine_mallocs;
        EXPECT_GE(session->prefill_reusing(prompt, 10), 0) << session->error();
        EXPECT_GE(session->prefill_reusing(prompt, 90), 0) << session->error();
        EXPECT_EQ(session->reused_tokens(), 10);
        prompt[40] = (prompt[40] + 1) % spec.n_vocab;
        EXPECT_GE(session->prefill_reusing(prompt, 90), 0) << session->error();
        EXPECT_EQ(session->reused_tokens(), 40);
        EXPECT_EQ(g_engine_mallocs - before, 0) << gpt2::kv_cache_format_name(kv) << " KV cache";
    }
}

TEST(Session, NoMallocPerTokenInARecordingSession) {
    gpt2_test::ModelSpec spec;
    spec.n_ctx = 16;  // slides the window below
    auto model = gpt2_test::make_model(spec);
    ASSERT_TRUE(model);
    std::string error;
    auto session = gpt2::Session::create_recording(*model, true, &error);
    ASSERT_TRUE(session) << error;
    const int32_t prompt[5] = {1, 2, 3, 4, 5};
    // the host's half (running the commands, writing the logits) is elsewhere: the logits stay these
    std::fill(session->host_logits(), session->host_logits() + spec.n_vocab, 0.0f);
    const long before = g_engine_mallocs;
    ASSERT_TRUE(session->feed_prompt(prompt, 5, true));
    int next = session->sample();
    for (int i = 0; i < 40 && next >= 0; i++) {
        ASSERT_TRUE(session->feed_step(next)) << session->error();
        int n = 0;
        EXPECT_TRUE(session->recorded_commands(&n) && n > 0);
        next = session->sample();
    }
    EXPECT_GE(next, 0) << session->error();
    EXPECT_EQ(g_engine_mallocs - before, 0) << "recording a pass allocated";
}

TEST(Session, NoMallocPerTokenWhenVerifyingDrafts) {
    gpt2_test::ModelSpec spec;
    spec.n_ctx = 30;  // slides the window below
    auto model = gpt2_test::make_model(spec);
    ASSERT_TRUE(model);
    for (gpt2::KvCacheFormat kv : {gpt2::KvCacheFormat::fp32, gpt2::KvCacheFormat::int8}) {
        std::string error;
        auto session = gpt2::Session::create(*model, true, kv, &error);
        ASSERT_TRUE(session) << error;
        const int32_t prompt[8] = {1, 2, 3, 4, 1, 2, 3, 4};
        gpt2::Speculation speculation(*session);
        int32_t draft[gpt2::Speculation::kMaxDraftTokens] = {}, out[gpt2::Speculation::kMaxDraftTokens + 1];
        int next = session->prefill(prompt, 8);
        draft[0] = 5;
        ASSERT_GE(speculation.step(next, draft, 1, out), 1);  // the first verification allocates its logits
        next = out[0];
        const long before = g_engine_mallocs;
        for (int i = 0; i < 60; i++) {
            const int k = speculation.lookup_draft(next, 8, draft);
            const int got = speculation.step(next, draft, k == 0 ? 3 : k, out);  // wrong drafts when none
            ASSERT_GE(got, 1) << session->error();
            next = out[got - 1];
        }
        EXPECT_EQ(g_engine_mallocs - before, 0) << gpt2::kv_cache_format_name(kv) << " KV cache";
    }
}

TEST(Session, NoMallocPerTokenWhenSteppingSeveralSequences) {
    gpt2_test::ModelSpec spec;
    spec.n_ctx = 30;  // slides the windows below
    auto model = gpt2_test::make_model(spec);
    ASSERT_TRUE(model);
    for (gpt2::KvCacheFormat kv : {gpt2::KvCacheFormat::fp32, gpt2::KvCacheFormat::int8}) {
        std::string error;
        std::unique_ptr<gpt2::Session> sessions[3];
        gpt2::Session* batch[3];
        for (int i = 0; i < 3; i++) {
            sessions[i] = gpt2::Session::create(*model, true, kv, &error);
            ASSERT_TRUE(sessions[i]) << error;
            batch[i] = sessions[i].get();
        }
        const int32_t prompt[4] = {1, 2, 3, 4};
        int32_t ids[3], out[3];
        ids[0] = sessions[0]->prefill(prompt, 4);
        for (int i = 1; i < 3; i++) {
            ASSERT_GE(gpt2::Sequences::fork(*sessions[i], *sessions[0]), 0) << sessions[i]->error();
            ids[i] = (ids[0] + i) % spec.n_vocab;
        }
        gpt2::Sequences sequences;
        ASSERT_TRUE(sequences.step(batch, ids, 3, out));  // the first allocates the pass's logits
        const long before = g_engine_mallocs;
        for (int step = 0; step < 60; step++) {
            std::memcpy(ids, out, sizeof(ids));
            ASSERT_TRUE(sequences.step(batch, ids, 3, out)) << sessions[0]->error();
        }
        EXPECT_EQ(g_engine_mallocs - before, 0) << gpt2::kv_cache_format_name(kv) << " KV cache";
    }
}

TEST(BeamSearch, NoMallocPerStepBetweenTheFirstAndTheLast) {
    gpt2_test::ModelSpec spec;
    spec.n_ctx = 30;  // slides the windows below
    auto model = gpt2_test::make_model(spec);
    ASSERT_TRUE(model);
    for (float temperature : {0.0f, 0.8f}) {  // beam search and beam sampling
        std::string error;
        std::unique_ptr<gpt2::Session> sessions[4];
        gpt2::Session* beams[4];
        gpt2::SamplingSettings sampling;
        sampling.temperature = temperature;
        sampling.top_k = 20;
        sampling.no_repeat_ngram_size = 3;
        for (int i = 0; i < 4; i++) {
            sessions[i] = gpt2::Session::create(*model, true, gpt2::KvCacheFormat::int8, &error);
            ASSERT_TRUE(sessions[i]) << error;
            sessions[i]->set_sampling(sampling);
            beams[i] = sessions[i].get();
        }
        gpt2::BeamSettings settings;
        settings.num_beams = 4;
        settings.max_new_tokens = 30;  // a whole context after a prompt of 10
        auto search = gpt2::BeamSearch::create(beams, settings, &error);
        ASSERT_TRUE(search) << error;
        const int32_t prompt[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
        ASSERT_TRUE(search->start(prompt, 10)) << search->error();
        ASSERT_EQ(search->step(), 1) << search->error();  // the first allocates the pass's logits
        const long before = g_engine_mallocs;
        for (int step = 0; step < 28; step++) ASSERT_EQ(search->step(), 1) << search->error();
        EXPECT_EQ(g_engine_mallocs - before, 0) << "temperature " << temperature;
        ASSERT_EQ(search->step(), 0);  // the last collects the hypotheses
        EXPECT_EQ(search->hypotheses().size(), 4u);
    }
}
