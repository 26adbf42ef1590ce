// The K-quant block formats (Q4_K, Q5_K, Q6_K: super-blocks of 256 values) as Linear storage, for
// block_format() (block_formats.h) to hand out. Their storage and kernels are in block_formats_k.cpp.
#pragma once

#include "kernels/block_formats.h"

namespace gpt2 {

extern const BlockFormat kQ4_K;
extern const BlockFormat kQ5_K;
extern const BlockFormat kQ6_K;

}  // namespace gpt2
