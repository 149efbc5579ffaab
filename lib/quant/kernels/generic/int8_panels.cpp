// Scalar int8 panel codes (quant/int8_panels.h): the definition the AVX-512
// kernels are tested against.
#include "quant/int8_panels.h"
#include "quant/packed_stream.h"

#include <cmath>

namespace eq::quant::kernels {

void int8_stream_codes_generic(const uint32_t* qweight, int64_t ld, int64_t k_count, int bits, const uint8_t* table,
                               int64_t panels, uint8_t* out, int64_t out_stride, int64_t) {
  const Int8KOrder order = bits == 4 ? Int8KOrder::kNibble : bits == 2 ? Int8KOrder::kCrumb : Int8KOrder::kNatural;
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t k = 0; k < k_count; ++k) {
      const int64_t slot = k - k % kInt8Unit + int8_slot(order, static_cast<int>(k % kInt8Unit));
      for (int64_t j = 0; j < 16; ++j) {
        const uint32_t code = stream_get(qweight + p * 16, ld, bits, k, j);
        out[p * out_stride + slot / 4 * 64 + j * 4 + slot % 4] = table ? table[code] : static_cast<uint8_t>(code);
      }
    }
}

void int8_row_codes_generic(const int8_t* w, int64_t ld, int64_t nrows, int64_t k_count, uint8_t* out, int64_t) {
  for (int64_t k = 0; k < k_count; ++k)
    for (int64_t j = 0; j < 16; ++j)
      out[k / 4 * 64 + j * 4 + k % 4] = static_cast<uint8_t>(j < nrows ? w[j * ld + k] + 128 : 128);
}

void int8_trellis_codes_generic(const float* panels, int64_t np, int64_t pstride, int64_t k_count, uint8_t* out,
                                int64_t out_stride) {
  for (int64_t p = 0; p < np; ++p)
    for (int64_t k = 0; k < k_count; ++k)
      for (int64_t j = 0; j < 16; ++j) {
        const int y = static_cast<int>(panels[p * pstride + k * 16 + j]);
        out[p * out_stride + k / 4 * 64 + j * 4 + k % 4] = static_cast<uint8_t>(trellis_int8_code(y) + 128);
      }
}

}  // namespace eq::quant::kernels
