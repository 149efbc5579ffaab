// Decode kernels of the column bit-stream formats (fp4, mxfp4, nvfp4, nl4, affine):
// the int8 path (per-ISA kernels, gemv_kernels.h) and the fp32 path through
// decoded panels, kept for affine 3-bit (codes straddle words) and for
// measuring one against the other (docs/design.md, "Decode kernels").
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/numeric.h"
#include "quant/gemv.h"
#include "quant/gemv_kernels.h"
#include "quant/packed_stream.h"
#include "quant/quant_kernels.h"

namespace eq::quant {

namespace {

StreamGemvArgs stream_args(const PackedMatrix& m, int64_t row_begin, int64_t row_end) {
  const StreamLayout l = stream_layout_of(*m.format);
  StreamGemvArgs a;
  a.qweight = static_cast<const uint32_t*>(m.parts[0].data) + row_begin;
  a.ld = m.rows;
  a.cols = m.cols;
  a.nb = row_end - row_begin;
  a.bits = l.bits;
  a.group = l.group;
  a.code_bytes = l.codes->int8_bytes;
  a.code_offset = l.codes->int8_offset;
  a.scale_mul = l.codes->int8_scale;
  switch (l.scale_kind) {
    case ScaleKind::kF16: a.scales_f16 = static_cast<const uint16_t*>(m.parts[1].data) + row_begin; break;
    case ScaleKind::kE8M0:
      a.scales_u8 = static_cast<const uint8_t*>(m.parts[1].data) + row_begin;
      a.scale_table = e8m0_table();
      break;
    case ScaleKind::kE4M3: {
      a.scales_u8 = static_cast<const uint8_t*>(m.parts[1].data) + row_begin;
      a.scale_table = e4m3_table();
      float tensor_scale;
      std::memcpy(&tensor_scale, m.parts[2].data, sizeof(float));
      a.scale_mul *= tensor_scale;
      break;
    }
  }
  if (l.has_biases) a.biases_f16 = static_cast<const uint16_t*>(m.parts[2].data) + row_begin;
  return a;
}

void stream_gemv_int8(const PackedMatrix& m, const GemvInput& x, int64_t row_begin, int64_t row_end, float* y) {
  if (row_end <= row_begin) return;
  StreamGemvArgs a = stream_args(m, row_begin, row_end);
  a.in = &x;
  a.y = y;
  stream_gemv_int8_for(active_gemv_kernels(), *m.format).run(a);
}

void stream_gemv_int8_rows(const PackedMatrix& m, const GemvInput* const* xs, int n, int64_t row_begin,
                           int64_t row_end, float* const* ys) {
  if (row_end <= row_begin || n <= 0) return;
  StreamGemvArgs a = stream_args(m, row_begin, row_end);
  const StreamGemvChoice k = stream_gemv_int8_for(active_gemv_kernels(), *m.format);
  if (k.run_multi) return k.run_multi(a, xs, ys, n);
  for (int i = 0; i < n; ++i) {
    a.in = xs[i];
    a.y = ys[i];
    k.run(a);
  }
}

// fp32: decode 16-column panels (the batch kernels' decoders) and dot them with x.
void stream_gemv_float(const PackedMatrix& m, const GemvInput& x, int64_t row_begin, int64_t row_end, float* y) {
  const StreamLayout l = stream_layout_of(*m.format);
  const QuantKernels& kern = active_quant_kernels();
  const DecodePanelFn decode = l.codes->panel_decoder(kern, l.bits);
  const int64_t N = m.rows, K = m.cols, G = l.group;
  const int64_t kc = G * std::max<int64_t>(1, 256 / G);
  const uint32_t* qweight = static_cast<const uint32_t*>(m.parts[0].data);
  thread_local std::vector<float> panel, scales, biases;
  thread_local std::vector<uint32_t> tail;
  panel.resize(static_cast<size_t>(kc * kPanelWidth));
  scales.resize(static_cast<size_t>(kc / G * kPanelWidth));
  biases.resize(scales.size());
  for (int64_t n0 = row_begin; n0 < row_end; n0 += kPanelWidth) {
    const int64_t nb = std::min<int64_t>(kPanelWidth, row_end - n0);
    float acc[kPanelWidth] = {};
    for (int64_t k0 = 0; k0 < K; k0 += kc) {
      const int64_t kcur = std::min(kc, K - k0);
      std::fill(scales.begin(), scales.end(), 0.0f);
      std::fill(biases.begin(), biases.end(), 0.0f);
      for (int64_t g = 0; g < kcur / G; ++g)
        for (int64_t j = 0; j < nb; ++j) {
          scales[g * kPanelWidth + j] = stream_scale(m, l, k0 / G + g, n0 + j);
          biases[g * kPanelWidth + j] = stream_bias(m, l, k0 / G + g, n0 + j);
        }
      const int64_t word_rows = kcur * l.bits / 32;
      const uint32_t* q = qweight + (k0 * l.bits / 32) * N + n0;
      int64_t ld = N;
      if (nb < kPanelWidth) {
        tail.assign(static_cast<size_t>(word_rows * kPanelWidth), 0u);
        for (int64_t r = 0; r < word_rows; ++r) std::memcpy(&tail[r * kPanelWidth], q + r * N, nb * sizeof(uint32_t));
        q = tail.data();
        ld = kPanelWidth;
      }
      decode(q, ld, kcur, scales.data(), l.has_biases ? biases.data() : nullptr, l.codes->values, static_cast<int>(G),
             panel.data());
      kern.panel_fma(panel.data(), kcur, x.x + k0, K, 1, acc);
    }
    std::copy(acc, acc + nb, y + (n0 - row_begin));
  }
}

}  // namespace

const GemvKernel kStreamGemvInt8{.run = stream_gemv_int8, .row_align = 1, .preferred_rows = 1024, .int8_activation = true,
                                 .run_rows = stream_gemv_int8_rows};
const GemvKernel kStreamGemvFloat{.run = stream_gemv_float, .row_align = 1, .preferred_rows = 256, .int8_activation = false};

}  // namespace eq::quant
