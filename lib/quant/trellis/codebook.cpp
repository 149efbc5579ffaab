#include "quant/trellis/codebook.h"

#include <cstddef>
#include <vector>

namespace eq::quant::trellis {

const float* code_table_1mad() {
  static const std::vector<float> table = [] {
    std::vector<float> t(size_t{1} << kStateBits);
    for (uint32_t s = 0; s < t.size(); ++s) t[s] = static_cast<float>(code_1mad(s));
    return t;
  }();
  return table.data();
}

}  // namespace eq::quant::trellis
