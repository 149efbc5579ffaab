// A checkpoint summary (what `expertquant inspect` prints), as data.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "model/config.h"

namespace eq::model {

// Opens `path` (folder or .safetensors), validates it, and summarizes it:
// architecture (when config.json is present), parameter/byte breakdown,
// dtypes, shards, and optionally every tensor.
nlohmann::ordered_json summarize_checkpoint(const std::string& path, bool list_tensors);

}  // namespace eq::model
