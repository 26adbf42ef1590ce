// The testing build's hooks (GPT2_WASM_TESTING, wasm/CMakeLists.txt), for tests and tools/bench only, so that the
// shipped wasm exports none of them (tests/js/exports.test.js): a heap block with the bandwidth probe, and a heap
// reserve for out-of-memory tests.
#include <emscripten/bind.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "host/host_numbers.h"
#include "kernels/stream_read.h"
#include "model/allocation.h"

using emscripten::val;

namespace {

// A block of any requested size (the bandwidth probe reads one as large as a model's weights): ok() false with an
// out-of-memory error when it cannot be allocated, never a wrapped-around size.
class HeapBlock {
   public:
    explicit HeapBlock(double bytes)
        : data_(bytes >= 1 ? gpt2::allocate_array<uint8_t>(uint64_t(bytes)) : nullptr),
          size_(data_ ? size_t(bytes) : 0),
          requested_(bytes) {}

    bool ok() const { return data_ != nullptr; }
    val error() const {
        val error = val::object();
        error.set("kind", std::string("memory"));
        error.set("message", "out of memory: cannot allocate " + gpt2::js_number(requested_) +
                                 " bytes in the WebAssembly heap (4 GB at most)");
        return error;
    }
    val view() const { return val(emscripten::typed_memory_view(size_, data_.get())); }
    // One streaming read of the block's floats, the ceiling of a decode step's bandwidth in this build; the sum
    // keeps the read from being optimized away.
    double stream_read() const {
        return gpt2::stream_sum(reinterpret_cast<const float*>(data_.get()), size_ / sizeof(float));
    }

   private:
    std::unique_ptr<uint8_t[]> data_;  // (size_)
    size_t size_;
    double requested_;
};

// Takes the heap (grown to its 4 GB maximum) until at most about bytes_to_leave can still be allocated in one block;
// deleting it gives it all back. Its blocks are never written, so in Node they stay virtual memory.
class HeapReserve {
   public:
    explicit HeapReserve(double bytes_to_leave) {
        // the block to leave is taken first and freed last, so that what runs next (the engine's messages, embind's
        // arguments) finds it
        void* leave = bytes_to_leave >= 1 && bytes_to_leave < 4294967296.0 ? std::malloc(size_t(bytes_to_leave))
                                                                           : nullptr;
        for (size_t size = size_t(1) << 31; size >= 64; size /= 2)
            for (; n_blocks_ < kMaxBlocks && (blocks_[n_blocks_] = std::malloc(size)); n_blocks_++)
                bytes_ += double(size);
        std::free(leave);
    }
    ~HeapReserve() {
        for (int i = 0; i < n_blocks_; i++) std::free(blocks_[i]);
    }
    HeapReserve(const HeapReserve&) = delete;
    HeapReserve& operator=(const HeapReserve&) = delete;
    double bytes() const { return bytes_; }

   private:
    static constexpr int kMaxBlocks = 4096;
    void* blocks_[kMaxBlocks] = {};
    int n_blocks_ = 0;
    double bytes_ = 0;
};

}  // namespace

EMSCRIPTEN_BINDINGS(gpt2_wasm_testing) {
    emscripten::class_<HeapBlock>("HeapBlock")
        .constructor<double>()
        .function("ok", &HeapBlock::ok)
        .function("error", &HeapBlock::error)
        .function("view", &HeapBlock::view)
        .function("streamRead", &HeapBlock::stream_read);
    emscripten::class_<HeapReserve>("HeapReserve").constructor<double>().function("bytes", &HeapReserve::bytes);
}
