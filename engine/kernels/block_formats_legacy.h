// The block formats of engine/kernels/block_formats_legacy.cpp, for block_format()'s table (block_formats.cpp).
#pragma once

#include "kernels/block_formats.h"

namespace gpt2 {

extern const BlockFormat kF16;
extern const BlockFormat kQ8_0;
extern const BlockFormat kQ4_0;
extern const BlockFormat kQ4_1;
extern const BlockFormat kQ5_0;
extern const BlockFormat kQ5_1;

}  // namespace gpt2
