// Counts calls of the global operator new in the test binary (alloc_counter.cpp replaces it).
#pragma once

namespace gpt2_test {
long allocation_count();
}
