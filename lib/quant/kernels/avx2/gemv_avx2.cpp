// AVX2 decode (gemv) kernels: the AVX-512 scheme (gemv_avx512.cpp) on 8
// columns per ymm, with vpmaddubsw + vpmaddwd in place of vpdpbusd. maddubs
// saturates int16 pairs, so 8-bit codes use the sign trick (|c - 128| times
// x with the sign of c - 128, 128 * sum(q) added back), and so do table codes
// whose bytes are too large for two pairs to add in int16 (|byte - offset|
// times x with the sign of byte - offset: the value itself, no offset).
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "quant/gemv_kernels.h"

namespace eq::quant::kernels {

namespace {

inline __m256i broadcast_dword(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// Up to 8 fp16 values (zeros past count).
inline __m256 load_f16(const uint16_t* p, int count) {
  if (count == 8) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  alignas(16) uint16_t tmp[8] = {};
  std::memcpy(tmp, p, static_cast<size_t>(count) * 2);
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(tmp)));
}

inline __m256 load_scales(const StreamGemvArgs& a, int64_t g, int64_t col, int count) {
  if (a.scales_f16) return load_f16(a.scales_f16 + g * a.ld + col, count);
  alignas(32) float tmp[8] = {};
  for (int j = 0; j < count; ++j) tmp[j] = a.scale_table[a.scales_u8[g * a.ld + col + j]];
  return _mm256_load_ps(tmp);
}

inline __m256i load_words(const uint32_t* p, int count) {
  if (count == 8) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(count), lane);
  return _mm256_maskload_epi32(reinterpret_cast<const int*>(p), mask);
}

// How the kernel reads 4-bit codes: as they are, through the table as
// unsigned bytes (every byte <= 64: two maddubs pairs still fit in int16),
// or through the table as signed values byte - offset.
enum class CodeRead { kPlain, kTable, kSignedTable };

template <int Bits, CodeRead Read, int Unit>
void stream_kernel(const StreamGemvArgs& a) {
  constexpr int kRows = Unit * Bits / 32;
  constexpr int kBroadcasts = Unit / 4;
  const GemvInput& in = *a.in;
  const int8_t* xq = Bits == 4 ? in.q_nib : Bits == 2 ? in.q_crumb : in.q;
  const int64_t panels = (a.nb + 7) / 8;
  thread_local std::vector<float> acc_buf;
  acc_buf.assign(static_cast<size_t>(panels * 8), 0.0f);
  float* acc = acc_buf.data();
  const __m256i low_mask = _mm256_set1_epi8(static_cast<char>((1 << Bits) - 1));
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  alignas(16) int8_t table[16] = {};
  if (Read != CodeRead::kPlain)
    for (int c = 0; c < 16; ++c)
      table[c] = static_cast<int8_t>(Read == CodeRead::kTable ? a.code_bytes[c] : a.code_bytes[c] - a.code_offset);
  const __m256i lut = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(table)));

  for (int64_t k0 = 0; k0 < a.cols; k0 += Unit) {
    const int64_t g = k0 / a.group;
    int32_t q_sum = in.q_sum16[k0 / 16];
    float x_sum = in.x_sum16[k0 / 16];
    if (Unit == 32) q_sum += in.q_sum16[k0 / 16 + 1], x_sum += in.x_sum16[k0 / 16 + 1];
    const int32_t offset_value = Read == CodeRead::kTable ? a.code_offset * q_sum : Bits == 8 ? -128 * q_sum : 0;
    const __m256i offset = _mm256_set1_epi32(offset_value);
    const __m256 x_scale = _mm256_set1_ps(a.scale_mul * in.q_scale[k0 / kGemvBlock]);
    const __m256 x_sum_v = _mm256_set1_ps(x_sum);
    __m256i xb[kBroadcasts];
    for (int i = 0; i < kBroadcasts; ++i) xb[i] = broadcast_dword(xq + k0 + 4 * i);
    const uint32_t* rows = a.qweight + (k0 * Bits / 32) * a.ld;

    for (int64_t p = 0; p < panels; ++p) {
      const int count = static_cast<int>(std::min<int64_t>(8, a.nb - p * 8));
      __m256i dot = _mm256_setzero_si256();
      for (int r = 0; r < kRows; ++r) {
        const __m256i w = load_words(rows + r * a.ld + p * 8, count);
        __m256i pairs;
        if constexpr (Bits == 4) {
          __m256i lo = _mm256_and_si256(w, low_mask);
          __m256i hi = _mm256_and_si256(_mm256_srli_epi32(w, 4), low_mask);
          if constexpr (Read != CodeRead::kPlain) {
            lo = _mm256_shuffle_epi8(lut, lo);
            hi = _mm256_shuffle_epi8(lut, hi);
          }
          if constexpr (Read == CodeRead::kSignedTable) {
            // Each pair sum reaches 2 * 127 * 127: widen the halves separately.
            const __m256i plo = _mm256_maddubs_epi16(_mm256_abs_epi8(lo), _mm256_sign_epi8(xb[2 * r], lo));
            const __m256i phi = _mm256_maddubs_epi16(_mm256_abs_epi8(hi), _mm256_sign_epi8(xb[2 * r + 1], hi));
            dot = _mm256_add_epi32(dot, _mm256_madd_epi16(plo, ones));
            pairs = phi;
          } else {
            pairs = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xb[2 * r]), _mm256_maddubs_epi16(hi, xb[2 * r + 1]));
          }
        } else if constexpr (Bits == 2) {
          pairs = _mm256_setzero_si256();
          for (int s = 0; s < 4; ++s) {
            const __m256i c = _mm256_and_si256(_mm256_srli_epi32(w, 2 * s), low_mask);
            pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(c, xb[4 * r + s]));
          }
        } else {
          const __m256i centered = _mm256_xor_si256(w, flip);  // code - 128 as int8
          pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(centered), _mm256_sign_epi8(xb[r], centered));
        }
        dot = _mm256_add_epi32(dot, _mm256_madd_epi16(pairs, ones));
      }
      dot = _mm256_sub_epi32(dot, offset);
      const __m256 scale = _mm256_mul_ps(load_scales(a, g, p * 8, count), x_scale);
      __m256 sum = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, _mm256_loadu_ps(acc + p * 8));
      if (a.biases_f16) sum = _mm256_fmadd_ps(load_f16(a.biases_f16 + g * a.ld + p * 8, count), x_sum_v, sum);
      _mm256_storeu_ps(acc + p * 8, sum);
    }
  }
  std::copy(acc, acc + a.nb, a.y);
}

inline float reduce_add(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace

namespace {

// Unit = k per int32 sum: 32, or 16 for groups that are not a multiple of 32
// (a unit never spans two groups).
template <int Unit>
void stream_dispatch_unit(const StreamGemvArgs& a) {
  if (a.code_bytes) {
    int largest = 0;
    for (int c = 0; c < 16; ++c) largest = std::max<int>(largest, a.code_bytes[c]);
    if (largest <= 64) return stream_kernel<4, CodeRead::kTable, Unit>(a);
    return stream_kernel<4, CodeRead::kSignedTable, Unit>(a);
  }
  switch (a.bits) {
    case 2: return stream_kernel<2, CodeRead::kPlain, Unit>(a);
    case 4: return stream_kernel<4, CodeRead::kPlain, Unit>(a);
    case 8: return stream_kernel<8, CodeRead::kPlain, Unit>(a);
  }
}

}  // namespace

void gemv_stream_int8_avx2(const StreamGemvArgs& a) {
  if (!gemv_stream_int8_takes_simd(a.bits, a.code_bytes, a.code_offset, a.group)) return gemv_stream_int8_generic(a);
  if (a.group % 32 == 0) stream_dispatch_unit<32>(a);
  else stream_dispatch_unit<16>(a);
}

void gemv_int8_rows_avx2(const int8_t* w, int64_t ld, int64_t cols, int64_t rows, const float* scales,
                         const GemvInput& in, float* y) {
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t j = 0; j < rows; ++j) {
    const int8_t* row = w + j * ld;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0; k < cols; k += kGemvBlock) {
      __m256i wv;
      if (cols - k >= kGemvBlock) {
        wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + k));
      } else {
        alignas(32) int8_t tmp[kGemvBlock] = {};
        std::memcpy(tmp, row + k, static_cast<size_t>(cols - k));
        wv = _mm256_load_si256(reinterpret_cast<const __m256i*>(tmp));
      }
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in.q + k));
      const __m256i pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(wv), _mm256_sign_epi8(x, wv));
      const __m256i dot = _mm256_madd_epi16(pairs, ones);
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(in.q_scale[k / kGemvBlock]), acc);
    }
    y[j] = reduce_add(acc) * scales[j];
  }
}

void gemv_bf16_rows_avx2(const uint16_t* w, int64_t ld, int64_t cols, int64_t rows, const float* x, float* y) {
  for (int64_t j = 0; j < rows; ++j) {
    const uint16_t* row = w + j * ld;
    __m256 acc = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= cols; k += 8) {
      const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + k)));
      acc = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(h, 16)), _mm256_loadu_ps(x + k), acc);
    }
    float sum = reduce_add(acc);
    for (; k < cols; ++k) {
      uint32_t bits = static_cast<uint32_t>(row[k]) << 16;
      float v;
      std::memcpy(&v, &bits, 4);
      sum += v * x[k];
    }
    y[j] = sum;
  }
}

}  // namespace eq::quant::kernels
