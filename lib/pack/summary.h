// A packed folder's summary (what `expertquant inspect` prints for the output
// of pack or merge), as data: read from its manifest.json alone.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace eq::pack {

// True when `path` is a packed folder (a folder holding manifest.json) or a
// manifest.json itself.
bool is_packed(const std::string& path);

// Loads and validates the manifest (load_manifest: a damaged one is one error
// naming the field) and summarizes it: model type and dims, the policy, per
// layer and overall the experts per class and per format, the bit groups,
// bits per expert weight split into the codes' payload and the overhead of
// scales and side data, and the sizes on disk against the source's.
nlohmann::ordered_json summarize_packed(const std::string& path);

}  // namespace eq::pack
