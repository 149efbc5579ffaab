// The lines `expertquant inspect` prints about a checkpoint's architecture,
// rendered from the "architecture" object of summarize_checkpoint
// (summary.h): its size, then one line per attention feature it has (latent,
// gated delta net, sliding windows and sinks) and its multi-token-prediction
// layers. A feature's JSON and its line are both written here and in
// summary.cpp, so a new one edits no command.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace eq::model {

// "model_type  qwen3_moe", "layers      ...", "attention   ...": a 12-column label, then the text.
std::vector<std::string> describe_architecture(const nlohmann::ordered_json& architecture);

}  // namespace eq::model
