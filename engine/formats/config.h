// config.json (Hugging Face GPT2Config) -> Config.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "gpt2.h"

namespace gpt2 {

// Errors are one line starting with "config.json: ".
bool parse_config(const uint8_t* json, size_t len, Config* out, std::string* error);

}  // namespace gpt2
