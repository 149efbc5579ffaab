#include "quant/packed_stream.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <vector>

#include "core/error.h"
#include "core/numeric.h"
#include "quant/quant_kernels.h"

namespace eq::quant {

StreamLayout stream_layout_of(const FormatTraits& format) {
  EQ_CHECK(format.stream && format.stream->codes,
           "format " + std::string(format.name) + " does not use the column bit-stream layout");
  const StreamEncoding& e = *format.stream;
  return {format.weight_bits, format.group_size, e.codes, e.scale_kind, e.has_biases, e.has_tensor_scale};
}

const float* e8m0_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[i] = e8m0_to_f32(static_cast<uint8_t>(i));
    return t;
  }();
  return table.data();
}

const float* e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[i] = fp8_e4m3_to_f32(static_cast<uint8_t>(i));
    return t;
  }();
  return table.data();
}

namespace {

float tensor_scale_of(const PackedMatrix& m, const StreamLayout& l) {
  if (!l.has_tensor_scale) return 1.0f;
  float ts;
  std::memcpy(&ts, m.parts[2].data, sizeof(float));
  return ts;
}

// Decodes scales (and biases) of groups [g0, g0 + ng) for columns [n0, n0 + nb)
// into [ng][16] panels, zero-padded past nb.
void decode_scale_panel(const PackedMatrix& m, const StreamLayout& l, int64_t g0, int64_t ng, int64_t n0, int64_t nb,
                        float* scales, float* biases) {
  const int64_t n_cols = m.rows;
  std::fill(scales, scales + ng * kPanelWidth, 0.0f);
  if (biases) std::fill(biases, biases + ng * kPanelWidth, 0.0f);
  for (int64_t g = 0; g < ng; ++g) {
    const int64_t at = (g0 + g) * n_cols + n0;
    float* s = scales + g * kPanelWidth;
    switch (l.scale_kind) {
      case ScaleKind::kF16:
        convert_to_f32(DType::kF16, static_cast<const uint16_t*>(m.parts[1].data) + at, s, static_cast<size_t>(nb));
        break;
      case ScaleKind::kE8M0: {
        const uint8_t* raw = static_cast<const uint8_t*>(m.parts[1].data) + at;
        for (int64_t j = 0; j < nb; ++j) s[j] = e8m0_table()[raw[j]];
        break;
      }
      case ScaleKind::kE4M3: {
        const uint8_t* raw = static_cast<const uint8_t*>(m.parts[1].data) + at;
        const float ts = tensor_scale_of(m, l);
        for (int64_t j = 0; j < nb; ++j) s[j] = e4m3_table()[raw[j]] * ts;
        break;
      }
    }
    if (biases)
      convert_to_f32(DType::kF16, static_cast<const uint16_t*>(m.parts[2].data) + at, biases + g * kPanelWidth,
                     static_cast<size_t>(nb));
  }
}

// Walks 16-column panels and K chunks: decodes each panel with the active
// kernel and hands it to `consume_chunk(n0, nb, k0, k_count, panel)`, with
// begin/end called around each 16-column panel. Single-threaded on purpose:
// callers (pack, the executor) parallelize over experts and column blocks,
// and eq::ThreadPool is not reentrant.
template <typename Consume>
void for_each_panel(const PackedMatrix& m, Consume&& consume_chunk, const std::function<void(int64_t, int64_t)>& begin,
                    const std::function<void(int64_t, int64_t)>& end) {
  const StreamLayout l = stream_layout_of(*m.format);
  const QuantKernels& kern = active_quant_kernels();
  const DecodePanelFn decode = l.codes->panel_decoder(kern, l.bits);
  const int64_t N = m.rows, K = m.cols, G = l.group;
  const int64_t kc = G * std::max<int64_t>(1, 256 / G);
  const uint32_t* qweight = static_cast<const uint32_t*>(m.parts[0].data);
  std::vector<float> panel(static_cast<size_t>(kc * kPanelWidth));
  std::vector<float> scales(static_cast<size_t>(kc / G * kPanelWidth)), biases;
  if (l.has_biases) biases.resize(scales.size());
  std::vector<uint32_t> tail;
  for (int64_t n0 = 0; n0 < N; n0 += kPanelWidth) {
    const int64_t nb = std::min<int64_t>(kPanelWidth, N - n0);
    begin(n0, nb);
    for (int64_t k0 = 0; k0 < K; k0 += kc) {
      const int64_t kcur = std::min(kc, K - k0);
      decode_scale_panel(m, l, k0 / G, kcur / G, n0, nb, scales.data(), l.has_biases ? biases.data() : nullptr);
      const int64_t row0 = k0 * l.bits / 32, word_rows = kcur * l.bits / 32;
      const uint32_t* q = qweight + row0 * N + n0;
      int64_t ld = N;
      if (nb < kPanelWidth) {  // copy the partial panel so kernels always see 16 columns
        tail.assign(static_cast<size_t>(word_rows * kPanelWidth), 0u);
        for (int64_t r = 0; r < word_rows; ++r) std::memcpy(&tail[r * kPanelWidth], q + r * N, nb * sizeof(uint32_t));
        q = tail.data();
        ld = kPanelWidth;
      }
      decode(q, ld, kcur, scales.data(), l.has_biases ? biases.data() : nullptr, l.codes->values, static_cast<int>(G),
             panel.data());
      consume_chunk(n0, nb, k0, kcur, panel.data());
    }
    end(n0, nb);
  }
}

}  // namespace

float stream_scale(const PackedMatrix& m, const StreamLayout& l, int64_t g, int64_t n) {
  const int64_t at = g * m.rows + n;
  switch (l.scale_kind) {
    case ScaleKind::kF16: return f16_to_f32(static_cast<const uint16_t*>(m.parts[1].data)[at]);
    case ScaleKind::kE8M0: return e8m0_to_f32(static_cast<const uint8_t*>(m.parts[1].data)[at]);
    case ScaleKind::kE4M3:
      return fp8_e4m3_to_f32(static_cast<const uint8_t*>(m.parts[1].data)[at]) * tensor_scale_of(m, l);
  }
  return 0.0f;
}

float stream_bias(const PackedMatrix& m, const StreamLayout& l, int64_t g, int64_t n) {
  if (!l.has_biases) return 0.0f;
  return f16_to_f32(static_cast<const uint16_t*>(m.parts[2].data)[g * m.rows + n]);
}

void stream_dequantize_reference(const PackedMatrix& m, float* out) {
  const StreamLayout l = stream_layout_of(*m.format);
  const uint32_t* qweight = static_cast<const uint32_t*>(m.parts[0].data);
  for (int64_t n = 0; n < m.rows; ++n)
    for (int64_t k = 0; k < m.cols; ++k) {
      const uint32_t code = stream_get(qweight, m.rows, l.bits, k, n);
      const float s = stream_scale(m, l, k / l.group, n);
      const float v = l.codes->value(code) * s;
      out[n * m.cols + k] = l.has_biases ? v + stream_bias(m, l, k / l.group, n) : v;
    }
}

void stream_dequantize(const PackedMatrix& m, float* out) {
  const int64_t K = m.cols;
  const QuantKernels& kern = active_quant_kernels();
  auto none = [](int64_t, int64_t) {};
  for_each_panel(
      m,
      [&](int64_t n0, int64_t nb, int64_t k0, int64_t kcur, const float* panel) {
        kern.panel_to_rows(panel, kcur, nb, out + n0 * K + k0, K);
      },
      none, none);
}

void stream_dequantize_block(const PackedMatrix& m, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* out) {
  const StreamLayout l = stream_layout_of(*m.format);
  const int64_t N = m.rows, G = l.group, kcount = c1 - c0;
  if (r0 < 0 || r0 % kPanelWidth || r1 <= r0 || r1 > N || c0 < 0 || c1 <= c0 || c1 > m.cols || c0 % G || c1 % G)
    invalid(std::string(m.format->name) + ": block [" + std::to_string(r0) + ", " + std::to_string(r1) + ") x [" +
            std::to_string(c0) + ", " + std::to_string(c1) + ") not aligned to 16 rows and " + std::to_string(G) +
            " columns");
  const QuantKernels& kern = active_quant_kernels();
  const DecodePanelFn decode = l.codes->panel_decoder(kern, l.bits);
  // Output rows of W are the stream's columns: one 16-column panel of the
  // stream is one output panel, decoded over [c0, c1) in a single call.
  thread_local std::vector<float> scales, biases;
  thread_local std::vector<uint32_t> tail;
  scales.resize(static_cast<size_t>(kcount / G * kPanelWidth));
  biases.resize(l.has_biases ? scales.size() : 0);
  const int64_t word_rows = kcount * l.bits / 32;
  for (int64_t n0 = r0; n0 < r1; n0 += kPanelWidth) {
    const int64_t nb = std::min<int64_t>(kPanelWidth, r1 - n0);
    decode_scale_panel(m, l, c0 / G, kcount / G, n0, nb, scales.data(), l.has_biases ? biases.data() : nullptr);
    const uint32_t* q = static_cast<const uint32_t*>(m.parts[0].data) + c0 * l.bits / 32 * N + n0;
    int64_t ld = N;
    if (nb < kPanelWidth || n0 + kPanelWidth > N) {  // never read past the matrix: copy a partial panel
      tail.assign(static_cast<size_t>(word_rows * kPanelWidth), 0u);
      const int64_t have = std::min<int64_t>(nb, N - n0);
      for (int64_t r = 0; r < word_rows; ++r) std::memcpy(&tail[r * kPanelWidth], q + r * N, have * sizeof(uint32_t));
      q = tail.data();
      ld = kPanelWidth;
    }
    decode(q, ld, kcount, scales.data(), l.has_biases ? biases.data() : nullptr, l.codes->values, static_cast<int>(G),
           out + (n0 - r0) * kcount);
  }
}

void stream_matmul(const PackedMatrix& m, const float* x, int64_t m_rows, float* y, bool accumulate) {
  if (m_rows <= 0) return;
  const int64_t N = m.rows, K = m.cols;
  const QuantKernels& kern = active_quant_kernels();
  std::vector<float> acc(static_cast<size_t>(m_rows * kPanelWidth));
  for_each_panel(
      m,
      [&](int64_t, int64_t, int64_t k0, int64_t kcur, const float* panel) {
        kern.panel_fma(panel, kcur, x + k0, K, m_rows, acc.data());
      },
      [&](int64_t, int64_t) { std::fill(acc.begin(), acc.end(), 0.0f); },
      [&](int64_t n0, int64_t nb) {
        for (int64_t i = 0; i < m_rows; ++i)
          for (int64_t j = 0; j < nb; ++j) {
            float& dst = y[i * N + n0 + j];
            dst = (accumulate ? dst : 0.0f) + acc[i * kPanelWidth + j];
          }
      });
}

}  // namespace eq::quant
