// array_bytes and out_of_memory (allocation.h), and in wasm the nothrow operator new that makes a failed allocation an
// error.
#include "model/allocation.h"

#include <cstdlib>

namespace gpt2 {

bool array_bytes(uint64_t count, uint64_t size, size_t* bytes) {
    uint64_t product = 0;
    if (__builtin_mul_overflow(count, size, &product) || product > uint64_t(SIZE_MAX)) return false;
    *bytes = size_t(product);
    return true;
}

std::string out_of_memory_message(uint64_t bytes, const std::string& what) {
    return "out of memory: need " + std::to_string(bytes) + " bytes for " + what;
}

bool out_of_memory(uint64_t bytes, const std::string& what, std::string* error) {
    if (error) *error = out_of_memory_message(bytes, what);
    return false;
}

}  // namespace gpt2

#ifdef __EMSCRIPTEN__
// Emscripten's libc++ is built without exceptions, and its operator new(size_t, const std::nothrow_t&) calls the
// throwing operator new, which aborts the instance when malloc fails: every "out of memory" branch of the engine
// would be dead code in wasm. These replace libc++'s (weak) definitions with what the standard asks of them,
// nullptr when there is no memory; libc++'s operator delete and delete[] free with free(), so they pair with these.
// They live in this file because the engine calls array_bytes wherever it allocates, so any module that links the
// engine links them (tests/js/engine_limits.test.js checks an out-of-memory error in wasm).
void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return std::malloc(size ? size : 1); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept { return std::malloc(size ? size : 1); }
#endif
