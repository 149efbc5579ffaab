// Scalar unsigned-integer panel decoders (value = code * scale + bias).
#include "quant/affine.h"
#include "quant/packed_stream.h"
#include "quant/quant_kernels.h"

namespace eq::quant::kernels {

namespace {
template <int kBits>
void decode_uint(const uint32_t* qweight, int64_t ld, int64_t k_count, const float* scales, const float* biases,
                 int group, float* out) {
  for (int64_t k = 0; k < k_count; ++k) {
    const float* s = scales + (k / group) * kPanelWidth;
    const float* b = biases + (k / group) * kPanelWidth;
    for (int j = 0; j < kPanelWidth; ++j)
      out[k * kPanelWidth + j] = static_cast<float>(stream_get(qweight, ld, kBits, k, j)) * s[j] + b[j];
  }
}
}  // namespace

void decode_uint2_generic(const uint32_t* q, int64_t ld, int64_t k, const float* s, const float* b, const float*, int g,
                         float* o) {
  decode_uint<2>(q, ld, k, s, b, g, o);
}
void decode_uint3_generic(const uint32_t* q, int64_t ld, int64_t k, const float* s, const float* b, const float*, int g,
                         float* o) {
  decode_uint<3>(q, ld, k, s, b, g, o);
}
void decode_uint4_generic(const uint32_t* q, int64_t ld, int64_t k, const float* s, const float* b, const float*, int g,
                         float* o) {
  decode_uint<4>(q, ld, k, s, b, g, o);
}
void decode_uint8_generic(const uint32_t* q, int64_t ld, int64_t k, const float* s, const float* b, const float*, int g,
                         float* o) {
  decode_uint<8>(q, ld, k, s, b, g, o);
}

void search_affine_groups_generic(const float* w, int64_t ld, int64_t count, const float* h, int n, int bits,
                                  float* scales, float* biases, uint8_t* codes) {
  for (int64_t r = 0; r < count; ++r) {
    const AffineGroup p = search_affine_group(w + r * ld, h, n, bits, codes + r * n);
    scales[r] = p.scale;
    biases[r] = p.bias;
  }
}

}  // namespace eq::quant::kernels
