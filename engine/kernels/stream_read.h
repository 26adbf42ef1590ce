// The memory-bandwidth ceiling of a decode step: a streaming read, shared by the native probe
// (tools/bench/bandwidth.cpp) and the wasm testing build (wasm/testing_hooks.cpp) so both runtimes time the same loop.
// Written with the vector extensions of engine/kernels/kernels.cpp, so it compiles to SSE natively and to wasm simd128;
// it is a kernel the engine itself never runs, kept here so that wasm/ includes nothing from tools/.
#pragma once

#include <cstddef>

namespace gpt2 {

// Sum of p[0..n). Eight independent f32x4 accumulators: no add latency chain limits it, so its speed is the
// memory system's (an upper bound for a GEMV, which reads the same bytes plus an L1-resident vector).
inline float stream_sum(const float* p, size_t n) {
    typedef float f32x4 __attribute__((vector_size(16)));
    auto load4 = [](const float* q) {
        f32x4 v;
        __builtin_memcpy(&v, q, sizeof v);
        return v;
    };
    f32x4 a0 = {0, 0, 0, 0}, a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    const size_t n32 = n & ~size_t(31);
    for (size_t i = 0; i < n32; i += 32) {
        a0 += load4(p + i);
        a1 += load4(p + i + 4);
        a2 += load4(p + i + 8);
        a3 += load4(p + i + 12);
        a4 += load4(p + i + 16);
        a5 += load4(p + i + 20);
        a6 += load4(p + i + 24);
        a7 += load4(p + i + 28);
    }
    const f32x4 s = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
    float sum = (s[0] + s[1]) + (s[2] + s[3]);
    for (size_t i = n32; i < n; i++) sum += p[i];
    return sum;
}

}  // namespace gpt2
