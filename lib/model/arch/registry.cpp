#include <algorithm>
#include <array>

#include "model/arch/architecture.h"

namespace eq::model {

#define EQ_ARCHITECTURE(name) const Architecture& architecture_##name();
#include "model/arch/architecture_list.inc"
#undef EQ_ARCHITECTURE

namespace {

// A function-local table: usable from other files' static initializers.
const auto& table() {
#define EQ_ARCHITECTURE(name) &architecture_##name(),
  static const auto rows = [] {
    std::array rows{
#include "model/arch/architecture_list.inc"
    };
    std::sort(rows.begin(), rows.end(),
              [](const Architecture* a, const Architecture* b) { return a->model_type < b->model_type; });
    return rows;
  }();
#undef EQ_ARCHITECTURE
  return rows;
}

}  // namespace

std::span<const Architecture* const> all_architectures() { return table(); }

const Architecture* find_architecture(std::string_view model_type) {
  for (const Architecture* a : table())
    if (a->model_type == model_type) return a;
  return nullptr;
}

}  // namespace eq::model
