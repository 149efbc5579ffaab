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

// The decimal index at name[pos] (at most 12 digits) followed by '.', and
// the position of that '.'; nullopt otherwise.
struct IndexAt {
  int64_t value = 0;
  size_t end = 0;
};
inline std::optional<IndexAt> index_at(std::string_view name, size_t pos) {
  IndexAt r{0, pos};
  while (r.end < name.size() && name[r.end] >= '0' && name[r.end] <= '9' && r.end - pos < 12)
    r.value = r.value * 10 + (name[r.end++] - '0');
  if (r.end == pos || r.end >= name.size() || name[r.end] != '.') return std::nullopt;
  return r;
}

// N of "model.layers.N.<rest>"; nullopt for other names (and for an index of
// more than 12 digits).
inline std::optional<int64_t> layer_of(std::string_view name) {
  constexpr std::string_view kPrefix = "model.layers.";
  if (!name.starts_with(kPrefix)) return std::nullopt;
  const auto index = index_at(name, kPrefix.size());
  if (!index) return std::nullopt;
  return index->value;
}

// "model.layers.N.", the prefix of layer N's tensors.
inline std::string layer_prefix(int64_t layer) { return "model.layers." + std::to_string(layer) + "."; }

}  // namespace eq::io
