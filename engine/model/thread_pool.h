// A persistent pool of worker threads for splitting one matrix product into parts (engine/model/forward.cpp).
// Workers are started once, when the model is loaded, and wait between jobs (spinning briefly, then sleeping on a
// condition variable), so running a job allocates nothing and creates no thread.
//
// Threads are pthreads rather than std::thread: in WebAssembly a thread can only start on a Web Worker that the
// runtime preloaded, and when none is left pthread_create fails with EAGAIN, where std::thread would need an
// exception (the engine is built without them). The pool then simply has fewer workers.
#pragma once

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace gpt2 {

class ThreadPool {
   public:
    // The work of one part: task(context, part) for part in [0, n_parts).
    using Task = void (*)(void* context, int part);

    // Each thread of the wasm build is a Web Worker with a stack of its own, started with the module; a GPT-2
    // forward pass splits its products into parts of at least 32768 multiply-adds, and on more threads than this
    // the parts of a decode step get too small to gain anything.
    static constexpr int kMaxThreads = 16;
    static constexpr int kMaxParts = 0xffff;

    // Starts n_threads - 1 workers (the thread calling run() is the n-th); n_threads is clamped to
    // [1, kMaxThreads]. If the system refuses to start a thread the pool keeps the ones it got: n_threads() says
    // how many there are. nullptr only when the pool object itself cannot be allocated.
    static std::unique_ptr<ThreadPool> create(int n_threads);
    ~ThreadPool();  // stops and joins the workers

    // Caps the workers of all pools together (default: no cap); pools created beyond it get fewer workers. In
    // wasm a thread can only start on one of the Web Workers the module was started with, and Emscripten
    // 3.1.6's pthread_create, finding none free, returns an error without freeing the new thread's stack
    // (1 MiB of heap per call): the binding caps the workers at their number, so it is never asked then.
    static void limit_workers(int max_workers);
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int n_threads() const { return int(workers_.size()) + 1; }

    // Runs every part once, on the calling thread and the workers, and returns when all are done. Parts are
    // handed out first come, first served, so a worker that wakes late does not hold up the others. When
    // another thread is already running a job on this pool (sessions of one model used from two threads), the
    // caller runs all parts itself (also when n_parts > kMaxParts).
    void run(Task task, void* context, int n_parts);

   private:
    ThreadPool() = default;
    static void* worker_main(void* pool);
    void work_loop();
    // Claims and runs parts of the job with id `job` until none is left or a newer job replaced it.
    void run_parts(uint64_t job);

    std::vector<pthread_t> workers_;

    // The current job. claim_ = (job id << 32) | (number of parts << 16) | next unclaimed part: a part is claimed
    // by a compare-exchange on it, which fails if the job changed in between, and a claim can only succeed while
    // the job is unfinished, so a worker that claimed a part reads the task and context of that job. (A job id
    // repeats after 2^32 jobs; a worker would have to stall across exactly that many to be confused.)
    std::atomic<uint64_t> claim_{0};
    Task task_ = nullptr;             // written by the caller before it publishes the job in claim_
    void* context_ = nullptr;         // likewise
    std::atomic<int> parts_done_{0};  // parts of the current job finished
    uint64_t last_job_ = 0;           // id of the last job posted (by the thread holding busy_)
    std::atomic<bool> busy_{false};   // a thread is running a job

    // Sleeping workers: woken when claim_ moves to a new job or stop_ is set.
    std::mutex sleep_mutex_;
    std::condition_variable wake_;
    int sleepers_ = 0;  // guarded by sleep_mutex_
    std::atomic<bool> stop_{false};
};

}  // namespace gpt2
