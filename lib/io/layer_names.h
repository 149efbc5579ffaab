// The layer a checkpoint tensor belongs to, from its name: every per-layer
// tensor is "model.layers.N.<rest>" (after an architecture's language-model
// prefix is renamed to "model."). One parser for the passes, the packer's
// plan and the config checks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace eq::io {

// N of "model.layers.N.<rest>"; nullopt for other names (and for an index of
// more than 12 digits).
inline std::optional<int64_t> layer_of(std::string_view name) {
  constexpr std::string_view kPrefix = "model.layers.";
  if (!name.starts_with(kPrefix)) return std::nullopt;
  int64_t n = 0;
  size_t i = kPrefix.size();
  const size_t start = i;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && i - start < 12) n = n * 10 + (name[i++] - '0');
  if (i == start || i >= name.size() || name[i] != '.') return std::nullopt;
  return n;
}

// "model.layers.N.", the prefix of layer N's tensors.
inline std::string layer_prefix(int64_t layer) { return "model.layers." + std::to_string(layer) + "."; }

}  // namespace eq::io
