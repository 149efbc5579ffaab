// The trellis formats' RotatedBasis (quant/rotated_basis.h): W = diag(sv) H W' H diag(su)
// with W' the decoded tiles times the row scales.
#include <vector>

#include "quant/hadamard.h"
#include "quant/int8_panels.h"
#include "quant/rotated_basis.h"
#include "quant/trellis/format.h"
#include "quant/trellis/kernels.h"

namespace eq::quant::trellis {
namespace {

const int8_t* input_signs(const PackedMatrix& m) { return static_cast<const int8_t*>(m.parts[1].data); }
const int8_t* output_signs(const PackedMatrix& m) { return static_cast<const int8_t*>(m.parts[2].data); }

void rotate_rows(float* x, int64_t rows, int64_t dim, int64_t block) { kernels().hadamard_rows(x, rows, dim, block); }

void decode_panels(const PackedMatrix& m, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* out) {
  decode_rotated_panels(m, m.format->weight_bits, r0, r1, c0, c1, out);
}

// Codes from decode_rotated_int8_panels; the scale of every 32-k unit is the
// row's scale, times kTrellisInt8Unscale for 1MAD (its codes are y rescaled
// from |y| <= 510) and alone for LUT (the codes are y itself).
void decode_int8_panels(const PackedMatrix& m, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t* codes,
                        float* unit_scales) {
  const int bits = m.format->weight_bits;
  const float unscale = code_of(m) == Code::kLut ? 1.0f : kTrellisInt8Unscale;
  const int64_t np = (r1 - r0) / 16, units = (c1 - c0) / kInt8Unit;
  decode_rotated_int8_panels(m, bits, r0, r1, c0, c1, codes);
  const float* rs = row_scales(m, bits);
  for (int64_t p = 0; p < np; ++p)
    for (int64_t u = 0; u < units; ++u)
      for (int j = 0; j < 16; ++j) unit_scales[(p * units + u) * 16 + j] = rs[r0 + p * 16 + j] * unscale;
}

}  // namespace

const RotatedBasis kRotatedBasis{.block = hadamard_block_size,
                                 .input_signs = input_signs,
                                 .output_signs = output_signs,
                                 .hadamard_rows = rotate_rows,
                                 .decode_panels = decode_panels,
                                 .decode_int8_panels = decode_int8_panels};

}  // namespace eq::quant::trellis
