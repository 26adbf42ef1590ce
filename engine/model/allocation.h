// The sizes of the engine's allocations, checked before they are made: counts that come from a caller are multiplied
// in 64 bits, checked for overflow and compared with what one allocation can hold in this build (size_t is 32 bits
// in wasm32, where a product computed in size_t would wrap around to a small block); and the "out of memory: " error of
// one that fails, which the model and the file readers share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>

namespace gpt2 {

// *bytes = count x size when that many bytes can be one allocation here; false when the product overflows 64 bits
// or exceeds SIZE_MAX (*bytes untouched).
bool array_bytes(uint64_t count, uint64_t size, size_t* bytes);

// new (std::nothrow) T[count], or nullptr when count Ts cannot be one allocation or there is no memory for them.
template <typename T>
T* allocate_array(uint64_t count) {
    size_t bytes = 0;
    if (!array_bytes(count, sizeof(T), &bytes)) return nullptr;
    return new (std::nothrow) T[size_t(count)];
}

// "out of memory: need <bytes> bytes for <what>": the one wording of a failed allocation, for callers that hand the
// message on with a kind rather than write it to a string.
std::string out_of_memory_message(uint64_t bytes, const std::string& what);

// *error = out_of_memory_message(bytes, what) (if error is not null). Returns false.
bool out_of_memory(uint64_t bytes, const std::string& what, std::string* error);

}  // namespace gpt2
