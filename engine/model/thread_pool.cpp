#include "model/thread_pool.h"

#include <limits>
#include <new>
#include <thread>

namespace gpt2 {

namespace {

// claim_ = job id (32 bits) | number of parts (16 bits) | next unclaimed part (16 bits)
constexpr uint64_t kPartMask = 0xffff;
inline uint64_t job_of(uint64_t claim) { return claim >> 32; }
inline int parts_of(uint64_t claim) { return int((claim >> 16) & kPartMask); }
inline int part_of(uint64_t claim) { return int(claim & kPartMask); }

// How long a worker polls for the next job before it sleeps: the gaps between the matrix products of one
// token (layernorm, attention) are short, and a futex wake-up costs tens of microseconds in a browser. Natively
// each poll pauses (x86 pause); wasm has no pause instruction, a poll there is only an atomic load, and it takes
// many more of them to cover those gaps (measured in Node on the 124M shape: int8 decode on 2 threads
// went from 1.57x to 1.78x of one thread, fp32 from 1.87x to 2.0x, when 4000 polls let the worker fall asleep
// between the products of a token).
#if defined(__wasm__)
constexpr int kSpinsBeforeSleep = 64000;
#else
constexpr int kSpinsBeforeSleep = 4000;
#endif
// How long the calling thread polls for the last parts before yielding its core to the workers.
constexpr int kSpinsBeforeYield = 200;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

// Workers run the engine's kernels only: small stacks (emscripten takes thread stacks from the heap).
constexpr size_t kWorkerStackBytes = size_t(1) << 20;

// The workers of all pools, and their cap (ThreadPool::limit_workers).
std::atomic<int> g_live_workers{0};
std::atomic<int> g_max_workers{std::numeric_limits<int>::max()};

// Counts one more worker, unless that would pass the cap.
bool reserve_worker() {
    int live = g_live_workers.load();
    do {
        if (live >= g_max_workers.load()) return false;
    } while (!g_live_workers.compare_exchange_weak(live, live + 1));
    return true;
}

void release_worker() { g_live_workers.fetch_sub(1); }

}  // namespace

void ThreadPool::limit_workers(int max_workers) { g_max_workers.store(max_workers < 0 ? 0 : max_workers); }

std::unique_ptr<ThreadPool> ThreadPool::create(int n_threads) {
    std::unique_ptr<ThreadPool> pool(new (std::nothrow) ThreadPool());
    if (!pool) return nullptr;
    if (n_threads < 1) n_threads = 1;
    if (n_threads > kMaxThreads) n_threads = kMaxThreads;
    pool->workers_.reserve(size_t(n_threads - 1));
    pthread_attr_t attributes;
    if (pthread_attr_init(&attributes) != 0) return pool;
    pthread_attr_setstacksize(&attributes, kWorkerStackBytes);
    for (int i = 1; i < n_threads; i++) {
        pthread_t thread;
        if (!reserve_worker()) break;
        if (pthread_create(&thread, &attributes, &ThreadPool::worker_main, pool.get()) != 0) {
            release_worker();
            break;
        }
        pool->workers_.push_back(thread);
    }
    pthread_attr_destroy(&attributes);
    return pool;
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(sleep_mutex_);
        stop_.store(true);
    }
    wake_.notify_all();
    for (pthread_t thread : workers_) {
        pthread_join(thread, nullptr);
        release_worker();
    }
}

void* ThreadPool::worker_main(void* pool) {
    static_cast<ThreadPool*>(pool)->work_loop();
    return nullptr;
}

void ThreadPool::work_loop() {
    uint64_t seen_job = 0;
    for (;;) {
        auto has_news = [&] {
            return stop_.load(std::memory_order_acquire) || job_of(claim_.load(std::memory_order_acquire)) != seen_job;
        };
        bool news = false;
        for (int i = 0; i < kSpinsBeforeSleep && !(news = has_news()); i++) cpu_relax();
        if (!news) {
            std::unique_lock<std::mutex> lock(sleep_mutex_);
            sleepers_++;
            wake_.wait(lock, has_news);
            sleepers_--;
        }
        if (stop_.load(std::memory_order_acquire)) return;
        seen_job = job_of(claim_.load(std::memory_order_acquire));
        run_parts(seen_job);
    }
}

void ThreadPool::run_parts(uint64_t job) {
    uint64_t claim = claim_.load(std::memory_order_acquire);
    while (job_of(claim) == job && part_of(claim) < parts_of(claim)) {
        if (claim_.compare_exchange_weak(claim, claim + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
            // Claimed: the job cannot end before this part does, so its task and context are still in place.
            task_(context_, part_of(claim));
            parts_done_.fetch_add(1, std::memory_order_release);
            claim = claim_.load(std::memory_order_acquire);
        }
    }
}

void ThreadPool::run(Task task, void* context, int n_parts) {
    if (workers_.empty() || n_parts <= 1 || n_parts > kMaxParts || busy_.exchange(true, std::memory_order_acquire)) {
        for (int part = 0; part < n_parts; part++) task(context, part);
        return;
    }
    task_ = task;
    context_ = context;
    parts_done_.store(0, std::memory_order_relaxed);
    const uint64_t job = ++last_job_ & 0xffffffff;
    claim_.store(job << 32 | uint64_t(n_parts) << 16, std::memory_order_release);
    {
        // Under the mutex, so a worker between its last check and its wait cannot miss the wake-up.
        std::lock_guard<std::mutex> lock(sleep_mutex_);
        if (sleepers_ > 0) wake_.notify_all();
    }
    run_parts(job);
    for (int spins = 0; parts_done_.load(std::memory_order_acquire) < n_parts; spins++) {
        if (spins < kSpinsBeforeYield) cpu_relax();
        else std::this_thread::yield();
    }
    busy_.store(false, std::memory_order_release);
}

}  // namespace gpt2
