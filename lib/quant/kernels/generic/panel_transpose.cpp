#include "quant/panel_transpose.h"

namespace eq::quant::kernels {

void rows_to_panel_generic(const float* rows, int64_t ld, int64_t count, float* out) {
  for (int64_t c = 0; c < count; ++c)
    for (int64_t j = 0; j < 16; ++j) out[c * 16 + j] = rows[j * ld + c];
}

}  // namespace eq::quant::kernels
