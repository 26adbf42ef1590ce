// The testing build's hooks (GPT2_WASM_TESTING, wasm/CMakeLists.txt), which only tests and tools/bench use:
// session.logits() and HeapBlock with the bandwidth probe. Only the testing build compiles this file, so the
// shipped wasm exports none of it (tests/js/exports.test.js).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "../tools/bench/stream_read.h"
#include "bindings.h"

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
        return gpt2_bench::stream_sum(reinterpret_cast<const float*>(data_.get()), size_ / sizeof(float));
    }

   private:
    std::unique_ptr<uint8_t, decltype(&std::free)> data_;
    size_t size_;
    double requested_;
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
}
