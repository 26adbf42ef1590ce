// The testing build's hooks (GPT2_WASM_TESTING, wasm/CMakeLists.txt), which only tests and tools/bench use:
// session.logits(), HeapBlock with the bandwidth probe, and HeapReserve for out-of-memory tests. Only the testing build
// compiles this file, so the shipped wasm exports none of it (tests/js/exports.test.js).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "bindings.h"
#include "kernels/stream_read.h"

using emscripten::val;

namespace {

// Float32Array over the heap of the last fed position's raw logits (n_vocab), or null when nothing has been fed:
// valid until the next call into the module (memory growth detaches it).
val session_logits(const WasmSession& session) {
    const gpt2::Session* engine = session.session();
    if (!engine || engine->n_cached() == 0) return val::null();
    return val(emscripten::typed_memory_view(session.n_vocab(), engine->logits()));
}

// A block of the heap of any requested size (the benchmark's bandwidth probe reads one as large as a model's
// weights): ok() false with an out-of-memory error when it cannot be allocated, never a wrapped-around size.
class HeapBlock {
   public:
    explicit HeapBlock(double bytes)
        : data_(bytes >= 1 && bytes < 4294967296.0 ? static_cast<uint8_t*>(std::malloc(size_t(bytes))) : nullptr,
                &std::free),
          size_(data_ ? size_t(bytes) : 0),
          requested_(bytes) {}

    bool ok() const { return data_ != nullptr; }
    BindingError error() const {
        char bytes[32];
        std::snprintf(bytes, sizeof bytes, "%.0f", requested_);
        return {"memory", std::string("out of memory: cannot allocate ") + bytes +
                              " bytes in the WebAssembly heap (4 GB at most)"};
    }
    // Uint8Array over the block: valid until the next call into the module (memory growth detaches it).
    val view() const { return val(emscripten::typed_memory_view(size_, data_.get())); }

    // One streaming read of the block's floats: tools/bench/bench.mjs times it over as many bytes as the model's
    // weights as the memory-bandwidth ceiling of a decode step, in the same engine build. Returns the sum so the
    // read cannot be optimized away.
    double stream_read() const {
        return gpt2::stream_sum(reinterpret_cast<const float*>(data_.get()), size_ / sizeof(float));
    }

   private:
    std::unique_ptr<uint8_t, decltype(&std::free)> data_;
    size_t size_;
    double requested_;
};

// Takes the heap until at most about bytes_to_leave can still be allocated in one block (the heap grows to its 4 GB
// maximum meanwhile), so that a test can see what an allocation larger than that does; deleting it gives it all back.
// The blocks are never written: in Node the memory they span stays virtual. Tests run it in an instance of their own
// (the heap never shrinks).
class HeapReserve {
   public:
    explicit HeapReserve(double bytes_to_leave) {
        // The block to leave is taken first and freed last, so that the fill cannot take it and what runs next
        // (the engine's messages, embind's arguments) finds it.
        void* leave = bytes_to_leave >= 1 && bytes_to_leave < 4294967296.0 ? std::malloc(size_t(bytes_to_leave))
                                                                           : nullptr;
        for (size_t size = size_t(1) << 31; size >= kSmallestBlock; size /= 2) {
            while (n_blocks_ < kMaxBlocks) {
                void* block = std::malloc(size);
                if (!block) break;
                blocks_[n_blocks_++] = block;
                bytes_ += double(size);
            }
        }
        std::free(leave);
    }
    ~HeapReserve() {
        for (int i = 0; i < n_blocks_; i++) std::free(blocks_[i]);
    }
    HeapReserve(const HeapReserve&) = delete;
    HeapReserve& operator=(const HeapReserve&) = delete;

    double bytes() const { return bytes_; }  // what it holds

   private:
    static constexpr size_t kSmallestBlock = 64;
    static constexpr int kMaxBlocks = 4096;
    void* blocks_[kMaxBlocks] = {};
    int n_blocks_ = 0;
    double bytes_ = 0;
};

}  // namespace

void register_testing_hooks(emscripten::class_<WasmSession>& session) {
    session.function("logits", &session_logits);
    emscripten::class_<HeapBlock>("HeapBlock")
        .constructor<double>()
        .function("ok", &HeapBlock::ok)
        .function("error", &HeapBlock::error)
        .function("view", &HeapBlock::view)
        .function("streamRead", &HeapBlock::stream_read);
    emscripten::class_<HeapReserve>("HeapReserve").constructor<double>().function("bytes", &HeapReserve::bytes);
}
