// Replaces the global operator new/delete of the test binary with counting versions (kept in their own file so
// the compiler cannot inline them into call sites and mismatch them with free()).
#include "alloc_counter.h"

#include <atomic>
#include <cstdlib>
#include <new>

static std::atomic<long> g_allocations{0};

namespace gpt2_test {
long allocation_count() { return g_allocations.load(); }
}  // namespace gpt2_test

void* operator new(size_t size) {
    g_allocations++;
    if (void* p = std::malloc(size ? size : 1)) return p;
    std::abort();  // tests only: out of memory ends the run
}
void* operator new[](size_t size) { return operator new(size); }
void* operator new(size_t size, const std::nothrow_t&) noexcept {
    g_allocations++;
    return std::malloc(size ? size : 1);
}
void* operator new[](size_t size, const std::nothrow_t&) noexcept { return operator new(size, std::nothrow); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
