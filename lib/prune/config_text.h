// config.json of an export: the source's text with only the expert count
// changed. The text is edited in place (not parsed and dumped again), so the
// key order, the spacing and every other value's digits stay as the source
// wrote them (a float such as 1e-06 is not re-printed as 1e-6).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace eq::prune {

// `text` with every expert-count field (model::kExpertCountFields) of the
// decoder's object set to `experts`: the top-level object, or the object
// under `text_config_key` when not empty (a multimodal wrapper). Invalid
// (exit 2, naming `label`) when the text is not JSON, when no such field is
// there, or when one is not an integer. The result is checked by parsing
// both texts: they differ in those fields alone.
std::string set_expert_count(std::string_view text, std::string_view text_config_key, int64_t experts,
                             const std::string& label);

}  // namespace eq::prune
