// The K-quant block formats of engine/block_formats_k.cpp, for block_format()'s table (block_formats.cpp).
#pragma once

#include "block_formats.h"

namespace gpt2 {

extern const BlockFormat kQ4_K;
extern const BlockFormat kQ5_K;
extern const BlockFormat kQ6_K;

}  // namespace gpt2
