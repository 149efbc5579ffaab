// AVX-512 VNNI decode (gemv) kernels. Bit-stream formats: one zmm holds one
// 32-bit word of 16 columns; a shift and a byte mask leave one code per byte
// (table codes go through their 16-entry byte table, vpshufb), and vpdpbusd
// multiplies the 4 codes of each column by 4 int8 x broadcast from the
// reordered copy (GemvInput::q_nib / q_crumb). Units of min(group, 32) k keep
// int32 sums; each unit ends with one convert and one FMA per 16 columns.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "quant/gemv_kernels.h"

namespace eq::quant::kernels {

namespace {

inline __m512i broadcast_dword(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

inline __m512 load_scales(const StreamGemvArgs& a, int64_t g, int64_t col, __mmask16 m) {
  if (a.scales_f16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, a.scales_f16 + g * a.ld + col));
  const __m512i idx = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, a.scales_u8 + g * a.ld + col));
  return _mm512_i32gather_ps(idx, a.scale_table, 4);
}

// Software prefetch distance in units: the hardware prefetchers do not
// follow the many short strided runs (one per word row) far enough.
#ifndef EQ_GEMV_PREFETCH_UNITS
#define EQ_GEMV_PREFETCH_UNITS 4
#endif
constexpr int kPrefetchUnits = EQ_GEMV_PREFETCH_UNITS;

// Bits in {2, 4, 8}; Unit = k per int32 sum (32, or 16 for groups that are
// not a multiple of 32: a unit never spans two groups); R prepared inputs
// (1 = decode, up to kMaxGemvRows = the small-batch variant). Each word is
// loaded and its codes unpacked once for all R inputs; every input then runs
// exactly the integer sums and float steps of R = 1, so its outputs have the
// same bits whatever R and whichever other inputs share the call.
template <int Bits, bool Table, int Unit, int R>
void stream_kernel(const StreamGemvArgs& a, const GemvInput* const* ins, float* const* ys) {
  constexpr int kRows = Unit * Bits / 32;  // word rows per unit
  const int8_t* xq[R];
  for (int i = 0; i < R; ++i) xq[i] = Bits == 4 ? ins[i]->q_nib : Bits == 2 ? ins[i]->q_crumb : ins[i]->q;
  const int64_t panels = (a.nb + 15) / 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (a.nb - (panels - 1) * 16)) - 1u);
  thread_local std::vector<float> acc_buf;
  acc_buf.assign(static_cast<size_t>(R * panels * 16), 0.0f);
  float* acc = acc_buf.data();
  const __m512i low_mask = _mm512_set1_epi8(static_cast<char>((1 << Bits) - 1));
  const __m512i lut = Table ? _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.code_bytes)))
                            : _mm512_setzero_si512();

  for (int64_t k0 = 0; k0 < a.cols; k0 += Unit) {
    const int64_t g = k0 / a.group;
    __m512i offset[R];
    __m512 x_scale[R], x_sum_v[R];
    for (int i = 0; i < R; ++i) {
      const GemvInput& in = *ins[i];
      int32_t q_sum = in.q_sum16[k0 / 16];
      float x_sum = in.x_sum16[k0 / 16];
      if (Unit == 32) q_sum += in.q_sum16[k0 / 16 + 1], x_sum += in.x_sum16[k0 / 16 + 1];
      offset[i] = _mm512_set1_epi32(Table ? a.code_offset * q_sum : 0);
      x_scale[i] = _mm512_set1_ps(a.scale_mul * in.q_scale[k0 / kGemvBlock]);
      x_sum_v[i] = _mm512_set1_ps(x_sum);
    }
    const uint32_t* rows = a.qweight + (k0 * Bits / 32) * a.ld;

    for (int64_t p = 0; p < panels; ++p) {
      const __mmask16 m = p == panels - 1 ? tail : static_cast<__mmask16>(0xFFFF);
      __m512i s0[R], s1[R];
      for (int i = 0; i < R; ++i) s0[i] = _mm512_setzero_si512(), s1[i] = _mm512_setzero_si512();
      for (int r = 0; r < kRows; ++r) {
        if (k0 + kPrefetchUnits * Unit < a.cols)
          _mm_prefetch(reinterpret_cast<const char*>(rows + (kPrefetchUnits * kRows + r) * a.ld + p * 16), _MM_HINT_T0);
        const __m512i w = _mm512_maskz_loadu_epi32(m, rows + r * a.ld + p * 16);
        if constexpr (Bits == 4) {
          __m512i lo = _mm512_and_si512(w, low_mask);
          __m512i hi = _mm512_and_si512(_mm512_srli_epi32(w, 4), low_mask);
          if constexpr (Table) {
            lo = _mm512_shuffle_epi8(lut, lo);
            hi = _mm512_shuffle_epi8(lut, hi);
          }
          for (int i = 0; i < R; ++i) {
            s0[i] = _mm512_dpbusd_epi32(s0[i], lo, broadcast_dword(xq[i] + k0 + 8 * r));
            s1[i] = _mm512_dpbusd_epi32(s1[i], hi, broadcast_dword(xq[i] + k0 + 8 * r + 4));
          }
        } else if constexpr (Bits == 2) {
          for (int s = 0; s < 4; ++s) {
            const __m512i c = _mm512_and_si512(_mm512_srli_epi32(w, 2 * s), low_mask);
            for (int i = 0; i < R; ++i) {
              const __m512i xb = broadcast_dword(xq[i] + k0 + 16 * r + 4 * s);
              if (s & 1) s1[i] = _mm512_dpbusd_epi32(s1[i], c, xb);
              else s0[i] = _mm512_dpbusd_epi32(s0[i], c, xb);
            }
          }
        } else {
          for (int i = 0; i < R; ++i) {
            const __m512i xb = broadcast_dword(xq[i] + k0 + 4 * r);
            if (r & 1) s1[i] = _mm512_dpbusd_epi32(s1[i], w, xb);
            else s0[i] = _mm512_dpbusd_epi32(s0[i], w, xb);
          }
        }
      }
      if (k0 + kPrefetchUnits * Unit < a.cols) {  // the scale (and bias) rows are streams of their own
        const int64_t ga = (k0 + kPrefetchUnits * Unit) / a.group * a.ld + p * 16;
        if (a.scales_f16) _mm_prefetch(reinterpret_cast<const char*>(a.scales_f16 + ga), _MM_HINT_T0);
        else _mm_prefetch(reinterpret_cast<const char*>(a.scales_u8 + ga), _MM_HINT_T0);
        if (a.biases_f16) _mm_prefetch(reinterpret_cast<const char*>(a.biases_f16 + ga), _MM_HINT_T0);
      }
      const __m512 w_scale = load_scales(a, g, p * 16, m);
      __m512 bias = _mm512_setzero_ps();
      if (a.biases_f16) bias = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, a.biases_f16 + g * a.ld + p * 16));
      for (int i = 0; i < R; ++i) {
        float* acc_i = acc + (i * panels + p) * 16;
        const __m512i dot = _mm512_sub_epi32(_mm512_add_epi32(s0[i], s1[i]), offset[i]);
        const __m512 scale = _mm512_mul_ps(w_scale, x_scale[i]);
        __m512 sum = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, _mm512_loadu_ps(acc_i));
        if (a.biases_f16) sum = _mm512_fmadd_ps(bias, x_sum_v[i], sum);
        _mm512_storeu_ps(acc_i, sum);
      }
    }
  }
  for (int i = 0; i < R; ++i) std::copy(acc + i * panels * 16, acc + i * panels * 16 + a.nb, ys[i]);
}

template <int Unit, int R>
void stream_dispatch_unit(const StreamGemvArgs& a, const GemvInput* const* ins, float* const* ys) {
  if (a.code_bytes) return stream_kernel<4, true, Unit, R>(a, ins, ys);
  switch (a.bits) {
    case 2: return stream_kernel<2, false, Unit, R>(a, ins, ys);
    case 4: return stream_kernel<4, false, Unit, R>(a, ins, ys);
    case 8: return stream_kernel<8, false, Unit, R>(a, ins, ys);
  }
}

// False for a layout these kernels do not take (gemv_stream_int8_takes_simd).
template <int R>
bool stream_dispatch(const StreamGemvArgs& a, const GemvInput* const* ins, float* const* ys) {
  if (!gemv_stream_int8_takes_simd(a.bits, a.code_bytes, a.code_offset, a.group)) return false;
  if (a.group % 32 == 0) stream_dispatch_unit<32, R>(a, ins, ys);
  else stream_dispatch_unit<16, R>(a, ins, ys);
  return true;
}

}  // namespace

void gemv_stream_int8_avx512(const StreamGemvArgs& a) {
  float* y = a.y;
  if (!stream_dispatch<1>(a, &a.in, &y)) gemv_stream_int8_generic(a);
}

void gemv_stream_int8_multi_avx512(const StreamGemvArgs& a, const GemvInput* const* ins, float* const* ys, int n) {
  bool done = false;
  switch (n) {
    case 1: done = stream_dispatch<1>(a, ins, ys); break;
    case 2: done = stream_dispatch<2>(a, ins, ys); break;
    case 3: done = stream_dispatch<3>(a, ins, ys); break;
    case 4: done = stream_dispatch<4>(a, ins, ys); break;
  }
  if (done) return;
  for (int i = 0; i < n; ++i) {
    StreamGemvArgs one = a;
    one.in = ins[i];
    one.y = ys[i];
    gemv_stream_int8_avx512(one);
  }
}

namespace {

// int8_row: 4 weight rows x R inputs; each weight vector is loaded once for
// all R inputs, and every (row, input) pair runs the R = 1 sequence of steps.
template <int R>
void int8_rows_kernel(const int8_t* w, int64_t ld, int64_t cols, int64_t rows, const float* scales,
                      const GemvInput* const* ins, float* const* ys) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  constexpr int kRowBlock = 4;
  for (int64_t j0 = 0; j0 < rows; j0 += kRowBlock) {
    const int nr = static_cast<int>(std::min<int64_t>(kRowBlock, rows - j0));
    __m512 acc[kRowBlock][R];
    for (int r = 0; r < kRowBlock; ++r)
      for (int i = 0; i < R; ++i) acc[r][i] = _mm512_setzero_ps();
    for (int64_t k = 0; k < cols; k += 64) {
      const __mmask64 m = cols - k >= 64 ? ~__mmask64{0} : (__mmask64{1} << (cols - k)) - 1;
      __m512i x[R], correction[R];
      __m512 lane_scale[R];
      for (int i = 0; i < R; ++i) {
        x[i] = _mm512_loadu_si512(ins[i]->q + k);
        // w ^ 0x80 = w + 128 as an unsigned byte; subtract 128 * sum(q) per lane.
        correction[i] = _mm512_slli_epi32(_mm512_loadu_si512(ins[i]->q_sum4 + k / 4), 7);
        lane_scale[i] = _mm512_loadu_ps(ins[i]->lane_scale + k / 4);
      }
      for (int r = 0; r < nr; ++r) {
        if (j0 + kRowBlock + r < rows)
          _mm_prefetch(reinterpret_cast<const char*>(w + (j0 + kRowBlock + r) * ld + k), _MM_HINT_T0);
        const __m512i wv = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, w + (j0 + r) * ld + k), flip);
        for (int i = 0; i < R; ++i) {
          const __m512i dot = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), wv, x[i]), correction[i]);
          acc[r][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), lane_scale[i], acc[r][i]);
        }
      }
    }
    for (int r = 0; r < nr; ++r)
      for (int i = 0; i < R; ++i) ys[i][j0 + r] = _mm512_reduce_add_ps(acc[r][i]) * scales[j0 + r];
  }
}

// bf16 rows with fp32 x: 4 weight rows x R inputs, as int8_rows_kernel.
template <int R>
void bf16_rows_kernel(const uint16_t* w, int64_t ld, int64_t cols, int64_t rows, const float* const* xs,
                      float* const* ys) {
  constexpr int kRowBlock = 4;
  for (int64_t j0 = 0; j0 < rows; j0 += kRowBlock) {
    const int nr = static_cast<int>(std::min<int64_t>(kRowBlock, rows - j0));
    __m512 acc[kRowBlock][R];
    for (int r = 0; r < kRowBlock; ++r)
      for (int i = 0; i < R; ++i) acc[r][i] = _mm512_setzero_ps();
    for (int64_t k = 0; k < cols; k += 16) {
      const __mmask16 m = cols - k >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (cols - k)) - 1);
      __m512 xv[R];
      for (int i = 0; i < R; ++i) xv[i] = _mm512_maskz_loadu_ps(m, xs[i] + k);
      for (int r = 0; r < nr; ++r) {
        const __m256i h = _mm256_maskz_loadu_epi16(m, w + (j0 + r) * ld + k);
        const __m512 wv = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
        for (int i = 0; i < R; ++i) acc[r][i] = _mm512_fmadd_ps(wv, xv[i], acc[r][i]);
      }
    }
    for (int r = 0; r < nr; ++r)
      for (int i = 0; i < R; ++i) ys[i][j0 + r] = _mm512_reduce_add_ps(acc[r][i]);
  }
}

}  // namespace

void gemv_int8_rows_avx512(const int8_t* w, int64_t ld, int64_t cols, int64_t rows, const float* scales,
                           const GemvInput& in, float* y) {
  const GemvInput* ins[1] = {&in};
  float* ys[1] = {y};
  int8_rows_kernel<1>(w, ld, cols, rows, scales, ins, ys);
}

void gemv_int8_rows_multi_avx512(const int8_t* w, int64_t ld, int64_t cols, int64_t rows, const float* scales,
                                 const GemvInput* const* ins, float* const* ys, int n) {
  switch (n) {
    case 1: return int8_rows_kernel<1>(w, ld, cols, rows, scales, ins, ys);
    case 2: return int8_rows_kernel<2>(w, ld, cols, rows, scales, ins, ys);
    case 3: return int8_rows_kernel<3>(w, ld, cols, rows, scales, ins, ys);
    case 4: return int8_rows_kernel<4>(w, ld, cols, rows, scales, ins, ys);
  }
  for (int i = 0; i < n; ++i) int8_rows_kernel<1>(w, ld, cols, rows, scales, ins + i, ys + i);
}

void gemv_bf16_rows_avx512(const uint16_t* w, int64_t ld, int64_t cols, int64_t rows, const float* x, float* y) {
  bf16_rows_kernel<1>(w, ld, cols, rows, &x, &y);
}

void gemv_bf16_rows_multi_avx512(const uint16_t* w, int64_t ld, int64_t cols, int64_t rows, const float* const* xs,
                                 float* const* ys, int n) {
  switch (n) {
    case 1: return bf16_rows_kernel<1>(w, ld, cols, rows, xs, ys);
    case 2: return bf16_rows_kernel<2>(w, ld, cols, rows, xs, ys);
    case 3: return bf16_rows_kernel<3>(w, ld, cols, rows, xs, ys);
    case 4: return bf16_rows_kernel<4>(w, ld, cols, rows, xs, ys);
  }
  for (int i = 0; i < n; ++i) bf16_rows_kernel<1>(w, ld, cols, rows, xs + i, ys + i);
}

}  // namespace eq::quant::kernels
