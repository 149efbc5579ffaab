#include "exec/packed_linear.h"

#include <algorithm>

#include "core/thread_pool.h"
#include "exec/expert_mlp.h"

namespace eq::exec {
namespace {
// Rows per matmul call; the split depends only on n.
constexpr int64_t kRowsPerMatmul = 32;
}  // namespace

void PackedLinear::apply(const float* x, int64_t n, float* y) const {
  if (n <= kRowsPerMatmul || m_.format->matmul_uses_pool) {
    m_.format->matmul(m_, x, n, y, false);
    return;
  }
  const int64_t chunks = (n + kRowsPerMatmul - 1) / kRowsPerMatmul;
  default_pool().run(static_cast<size_t>(chunks), [&](size_t c) {
    const int64_t r0 = static_cast<int64_t>(c) * kRowsPerMatmul, r1 = std::min(n, r0 + kRowsPerMatmul);
    m_.format->matmul(m_, x + r0 * m_.cols, r1 - r0, y + r0 * m_.rows, false);
  });
}

}  // namespace eq::exec
