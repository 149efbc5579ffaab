// FormatTraits::int8_panels of the bit-stream formats and int8_row: the codes
// through the active ISA's kernels (kernels/*/int8_panels.cpp), the per-unit
// scales (and biases) here in scalar code, once per 16 rows x 32 k.
#include "quant/int8_panels.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/numeric.h"
#include "quant/packed_stream.h"
#include "quant/quant_kernels.h"

namespace eq::quant {

const Int8PanelKernels& int8_panel_kernels(Isa isa) {
  static const Int8PanelKernels generic{kernels::int8_stream_codes_generic, kernels::int8_row_codes_generic};
  static const Int8PanelKernels avx512{kernels::int8_stream_codes_avx512, kernels::int8_row_codes_avx512};
  // AVX2 has no vpdpbusd, and the batch kernel keeps the fp32 path there
  // (docs/design.md): the scalar builder serves tests and the reference.
  return std::min(isa, detected_isa()) == Isa::kAvx512 ? avx512 : generic;
}

namespace {

void check_block(const PackedMatrix& m, int64_t r0, int64_t r1, int64_t c0, int64_t c1, int64_t group) {
  const int64_t align = std::max<int64_t>(kInt8Unit, group);
  if (r0 < 0 || r0 % kPanelWidth || r1 <= r0 || r1 > m.rows || c0 < 0 || c1 <= c0 || c1 > m.cols || c0 % align ||
      c1 % align)
    invalid(std::string(m.format->name) + ": int8 panel block [" + std::to_string(r0) + ", " + std::to_string(r1) +
            ") x [" + std::to_string(c0) + ", " + std::to_string(c1) + ") not aligned to 16 rows and " +
            std::to_string(align) + " columns");
}

// Scales (biases) of groups [c0, c1) for rows [r0, r1) into [p][u][16],
// one contiguous row of the scale part converted per group.
void stream_unit_scales(const PackedMatrix& m, const StreamLayout& l, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                        float scale_mul, float* scales, float* biases) {
  const int64_t N = m.rows, nr = r1 - r0, np = (nr + kPanelWidth - 1) / kPanelWidth;
  const int64_t units = (c1 - c0) / kInt8Unit;
  thread_local std::vector<float> row, bias_row;
  row.assign(static_cast<size_t>(np * kPanelWidth), 0.0f);
  bias_row.assign(row.size(), 0.0f);
  int64_t have = -1;
  for (int64_t u = 0; u < units; ++u) {
    const int64_t g = (c0 + u * kInt8Unit) / l.group;
    if (g != have) {
      have = g;
      if (l.scale_kind == ScaleKind::kF16) {
        convert_to_f32(DType::kF16, static_cast<const uint16_t*>(m.parts[1].data) + g * N + r0, row.data(),
                       static_cast<size_t>(nr));
        for (int64_t j = 0; j < nr; ++j) row[j] *= scale_mul;
      } else if (l.scale_kind == ScaleKind::kE8M0) {
        const uint8_t* raw = static_cast<const uint8_t*>(m.parts[1].data) + g * N + r0;
        for (int64_t j = 0; j < nr; ++j) row[j] = e8m0_table()[raw[j]] * scale_mul;
      } else {
        for (int64_t j = 0; j < nr; ++j) row[j] = stream_scale(m, l, g, r0 + j) * scale_mul;
      }
      if (l.has_biases)
        convert_to_f32(DType::kF16, static_cast<const uint16_t*>(m.parts[2].data) + g * N + r0, bias_row.data(),
                       static_cast<size_t>(nr));
    }
    for (int64_t p = 0; p < np; ++p) {
      std::memcpy(scales + (p * units + u) * kPanelWidth, row.data() + p * kPanelWidth, kPanelWidth * sizeof(float));
      if (l.has_biases && biases)
        std::memcpy(biases + (p * units + u) * kPanelWidth, bias_row.data() + p * kPanelWidth,
                    kPanelWidth * sizeof(float));
    }
  }
}

inline void prefetch_run(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(c + b, 0, 2);
}

// Slice s of n: word rows [w * s / n, w * (s + 1) / n) of the block, each a
// run of (r1 - r0) words, and the same share of its scale (bias) rows.
void stream_prefetch(const PackedMatrix& m, int64_t r0, int64_t r1, int64_t c0, int64_t c1, int s, int n) {
  const StreamLayout l = stream_layout_of(*m.format);
  if (r0 < 0 || r1 > m.rows || c0 < 0 || c1 > m.cols || r1 <= r0 || c1 <= c0) return;
  const int64_t N = m.rows, w0 = c0 * l.bits / 32, words = (c1 - c0) * l.bits / 32;
  const uint32_t* q = static_cast<const uint32_t*>(m.parts[0].data);
  for (int64_t w = words * s / n; w < words * (s + 1) / n; ++w) prefetch_run(q + (w0 + w) * N + r0, (r1 - r0) * 4);
  const int64_t g0 = c0 / l.group, groups = (c1 - c0 + l.group - 1) / l.group;
  const int64_t esize = l.scale_kind == ScaleKind::kF16 ? 2 : 1;
  for (int64_t g = g0 + groups * s / n; g < g0 + groups * (s + 1) / n; ++g) {
    prefetch_run(static_cast<const uint8_t*>(m.parts[1].data) + (g * N + r0) * esize, (r1 - r0) * esize);
    if (l.has_biases) prefetch_run(static_cast<const uint16_t*>(m.parts[2].data) + g * N + r0, (r1 - r0) * 2);
  }
}

void stream_build(const PackedMatrix& m, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t* codes,
                  float* scales, float* biases, int64_t next_r0, int64_t next_c0) {
  const StreamLayout l = stream_layout_of(*m.format);
  check_block(m, r0, r1, c0, c1, l.group);
  const uint8_t* table = l.codes->int8_bytes;
  const int64_t N = m.rows, nk = c1 - c0, word_rows = nk * l.bits / 32;
  const Int8PanelKernels& kern = int8_panel_kernels(active_isa());
  const uint32_t* q = static_cast<const uint32_t*>(m.parts[0].data) + c0 * l.bits / 32 * N;
  // Whole panels in one call (word row by word row: long contiguous reads).
  const int64_t full = (r1 - r0) / kPanelWidth;
  const int64_t prefetch = next_r0 < 0 ? 0 : (next_r0 - r0) + (next_c0 - c0) * l.bits / 32 * N;
  if (full) kern.stream_codes(q + r0, N, nk, l.bits, table, full, codes, nk * kPanelWidth, prefetch);
  if (const int64_t nb = r1 - r0 - full * kPanelWidth; nb > 0) {
    // A partial last panel: copied, so nothing past the matrix is read. The
    // padding rows then get the zero weight's byte (code 0 need not be zero).
    thread_local std::vector<uint32_t> tail;
    tail.assign(static_cast<size_t>(word_rows * kPanelWidth), 0u);
    const uint32_t* src = q + r0 + full * kPanelWidth;
    for (int64_t r = 0; r < word_rows; ++r) std::memcpy(&tail[r * kPanelWidth], src + r * N, nb * sizeof(uint32_t));
    uint8_t* last = codes + full * nk * kPanelWidth;
    kern.stream_codes(tail.data(), kPanelWidth, nk, l.bits, table, 1, last, 0, 0);
    const uint8_t zero = static_cast<uint8_t>(l.codes->int8_offset);
    for (int64_t d = 0; d < nk / 4; ++d) std::memset(last + d * 64 + nb * 4, zero, static_cast<size_t>((16 - nb) * 4));
  }
  // Codes read as scaled integers (E2M1: doubled values) take int8_scale (exact, a power of two).
  stream_unit_scales(m, l, r0, r1, c0, c1, l.codes->int8_scale, scales, biases);
}

void int8_row_build(const PackedMatrix& m, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t* codes,
                    float* scales, float*, int64_t next_r0, int64_t next_c0) {
  check_block(m, r0, r1, c0, c1, 1);
  const int8_t* q = static_cast<const int8_t*>(m.parts[0].data);
  const float* row_scales = static_cast<const float*>(m.parts[1].data);
  const int64_t nk = c1 - c0, units = nk / kInt8Unit;
  const Int8PanelKernels& kern = int8_panel_kernels(active_isa());
  for (int64_t n0 = r0; n0 < r1; n0 += kPanelWidth) {
    const int64_t nb = std::min<int64_t>(kPanelWidth, r1 - n0), p = (n0 - r0) / kPanelWidth;
    kern.row_codes(q + n0 * m.cols + c0, m.cols, nb, nk, codes + p * nk * kPanelWidth,
                   next_r0 < 0 ? 0 : (next_r0 - r0) * m.cols + (next_c0 - c0));
    float* s = scales + p * units * kPanelWidth;
    for (int64_t u = 0; u < units; ++u)
      for (int64_t j = 0; j < kPanelWidth; ++j) s[u * kPanelWidth + j] = j < nb ? row_scales[n0 + j] : 0.0f;
  }
}

}  // namespace

const Int8Panels kFp4Int8Panels{.build = stream_build, .prefetch = stream_prefetch, .offset = 12, .has_biases = false, .order = Int8KOrder::kNibble};
const Int8Panels kOffset128Table4Int8Panels{.build = stream_build, .prefetch = stream_prefetch, .offset = 128, .has_biases = false, .order = Int8KOrder::kNibble};
const Int8Panels kAffine2Int8Panels{.build = stream_build, .prefetch = stream_prefetch, .offset = 0, .has_biases = true, .order = Int8KOrder::kCrumb};
const Int8Panels kAffine4Int8Panels{.build = stream_build, .prefetch = stream_prefetch, .offset = 0, .has_biases = true, .order = Int8KOrder::kNibble};
const Int8Panels kAffine8Int8Panels{.build = stream_build, .prefetch = stream_prefetch, .offset = 0, .has_biases = true, .order = Int8KOrder::kNatural};
const Int8Panels kInt8RowInt8Panels{.build = int8_row_build, .offset = 128, .has_biases = false,
                                    .order = Int8KOrder::kNatural};

}  // namespace eq::quant
