// The affine group search (affine.cpp's search_affine_group) of 16 groups at
// once, one per lane: the groups of 16 consecutive rows over the same columns
// share the importance, and every lane runs the scalar search's operations in
// its order (float and double, no contraction: this file is compiled with
// -ffp-contract=off), so scales, biases and codes equal the scalar search's
// bit for bit. The scalar search is bound by the latency of its running sums;
// 16 lanes carry 16 sums in each instruction.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "quant/affine.h"
#include "quant/quant_kernels.h"

namespace eq::quant::kernels {
namespace {

constexpr int kLanes = 16;

// std::clamp(v, -65504, 65504) then f32 -> f16 -> f32 (affine.cpp's to_f16).
__m512 to_f16(__m512 v) {
  const __m512 lo = _mm512_set1_ps(-65504.0f), hi = _mm512_set1_ps(65504.0f);
  v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, lo, _CMP_LT_OQ), lo);
  v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(hi, v, _CMP_LT_OQ), hi);
  return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

__m512i clamp_code(__m512i q, __m512i nmax) { return _mm512_min_epi32(_mm512_max_epi32(q, _mm512_setzero_si512()), nmax); }

// static_cast<int>(std::nearbyint(x)): out-of-range values give INT_MIN, as cvttss2si does.
__m512i round_to_int(__m512 x) {
  return _mm512_cvttps_epi32(_mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

struct LaneSearch {
  int n = 0;
  __m512i nmax;
  const float* h = nullptr;  // [n], shared by the lanes
  // Vectors of 16 lanes, stored flat (a vector of __m512 drops its alignment).
  std::vector<float> w;                           // [n][lane]
  std::vector<double> wd;                         // [n][lane]: w as doubles
  std::vector<int32_t> codes, trial, current;     // [n][lane]

  __m512 w_at(int i) const { return _mm512_loadu_ps(w.data() + 16 * i); }
  __m512d wd_at(int i, int half) const { return _mm512_loadu_pd(wd.data() + 16 * i + 8 * half); }
  static __m512i get(const std::vector<int32_t>& v, int i) { return _mm512_loadu_si512(v.data() + 16 * i); }
  static void put(std::vector<int32_t>& v, int i, __m512i x) { _mm512_storeu_si512(v.data() + 16 * i, x); }
  __m512d c_sum, e_sum[2];   // fit's code-independent sums: sum h, sum h w
  __m512 best_scale, best_bias, best_err;

  // affine_ops::assign_codes into `trial`; returns the weighted error.
  __m512 assign(__m512 scale, __m512 bias) {
    const __mmask16 positive = _mm512_cmp_ps_mask(scale, _mm512_setzero_ps(), _CMP_GT_OQ);
    __m512 err = _mm512_setzero_ps();
    for (int i = 0; i < n; ++i) {
      const __m512 wi = w_at(i);
      const __m512i q = _mm512_maskz_mov_epi32(
          positive, clamp_code(round_to_int(_mm512_div_ps(_mm512_sub_ps(wi, bias), scale)), nmax));
      put(trial, i, q);
      const __m512 d = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(q), scale), bias), wi);
      err = _mm512_add_ps(err, _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(h[i]), d), d));
    }
    return err;
  }

  // The scalar search's score(): lanes in `m` keep (scale, bias) and the
  // codes when the fp16-rounded candidate lowers their error.
  void score(__m512 scale, __m512 bias, __mmask16 m) {
    if (!m) return;
    const __m512 s = to_f16(scale), b = to_f16(bias);
    const __m512 err = assign(s, b);
    const __mmask16 better = m & _mm512_cmp_ps_mask(err, best_err, _CMP_LT_OQ);
    if (!better) return;
    best_scale = _mm512_mask_mov_ps(best_scale, better, s);
    best_bias = _mm512_mask_mov_ps(best_bias, better, b);
    best_err = _mm512_mask_mov_ps(best_err, better, err);
    for (int i = 0; i < n; ++i) put(codes, i, _mm512_mask_mov_epi32(get(codes, i), better, get(trial, i)));
  }

  // affine_ops::fit of each lane's codes `q`: the lanes where it succeeds.
  __mmask16 fit(const std::vector<int32_t>& q, __m512* scale, __m512* bias) {
    __mmask16 ok = 0;
    __m256 s_half[2], b_half[2];
    for (int half = 0; half < 2; ++half) {
      __m512d a = _mm512_setzero_pd(), b = a, d = a;
      for (int i = 0; i < n; ++i) {
        const __m512d qd =
            _mm512_cvtepi32_pd(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q.data() + 16 * i + 8 * half)));
        const __m512d hw = _mm512_set1_pd(static_cast<double>(h[i]));
        const __m512d hq = _mm512_mul_pd(hw, qd);
        a = _mm512_add_pd(a, _mm512_mul_pd(hq, qd));
        b = _mm512_add_pd(b, hq);
        d = _mm512_add_pd(d, _mm512_mul_pd(hq, wd_at(i, half)));
      }
      const __m512d c = c_sum, e = e_sum[half];
      const __m512d det = _mm512_sub_pd(_mm512_mul_pd(a, c), _mm512_mul_pd(b, b));
      const __mmask8 determined =
          _mm512_cmp_pd_mask(det, _mm512_mul_pd(_mm512_mul_pd(_mm512_set1_pd(1e-12), a), c), _CMP_GT_OQ);
      const __m512d s = _mm512_div_pd(_mm512_sub_pd(_mm512_mul_pd(c, d), _mm512_mul_pd(b, e)), det);
      const __mmask8 positive = _mm512_cmp_pd_mask(s, _mm512_setzero_pd(), _CMP_GT_OQ);
      ok |= static_cast<__mmask16>((determined & positive) << (8 * half));
      s_half[half] = _mm512_cvtpd_ps(s);
      b_half[half] = _mm512_cvtpd_ps(_mm512_div_pd(_mm512_sub_pd(_mm512_mul_pd(a, e), _mm512_mul_pd(b, d)), det));
    }
    *scale = _mm512_insertf32x8(_mm512_castps256_ps512(s_half[0]), s_half[1], 1);
    *bias = _mm512_insertf32x8(_mm512_castps256_ps512(b_half[0]), b_half[1], 1);
    return ok;
  }

  // The scalar search's alternate(): lanes leave when the fit fails or the
  // error stops falling.
  void alternate(int max_iter) {
    current = codes;
    __mmask16 active = 0xFFFF;
    for (int iter = 0; iter < max_iter && active; ++iter) {
      const __m512 before = best_err;
      __m512 s, b;
      active &= fit(current, &s, &b);
      score(s, b, active);
      active &= _mm512_cmp_ps_mask(best_err, before, _CMP_LT_OQ);
      for (int i = 0; i < n; ++i) put(current, i, _mm512_mask_mov_epi32(get(current, i), active, get(codes, i)));
    }
  }

  // The scalar search's grid(): codes from inverse scales (nmax + t) / (hi - lo).
  void grid(float t0, float t1, int steps, bool both_ends, __m512 lo, __m512 hi, __mmask16 lanes) {
    const float nmax_f = static_cast<float>(_mm512_cvtsi512_si32(nmax));
    const __m512 range = _mm512_sub_ps(hi, lo);
    for (int i = 0; i <= steps; ++i) {
      const float numerator = nmax_f + t0 + (t1 - t0) * static_cast<float>(i) / static_cast<float>(steps);
      const __m512 iscale = _mm512_div_ps(_mm512_set1_ps(numerator), range);
      const __mmask16 m = lanes & _mm512_cmp_ps_mask(iscale, _mm512_setzero_ps(), _CMP_GT_OQ);
      if (!m) continue;
      __m512 s, b;
      for (int j = 0; j < n; ++j)
        put(trial, j, clamp_code(round_to_int(_mm512_mul_ps(iscale, _mm512_sub_ps(w_at(j), lo))), nmax));
      score_fit(m, &s, &b);
      if (!both_ends) continue;
      for (int j = 0; j < n; ++j)
        put(trial, j,
            clamp_code(_mm512_sub_epi32(nmax, round_to_int(_mm512_mul_ps(iscale, _mm512_sub_ps(hi, w_at(j))))), nmax));
      score_fit(m, &s, &b);
    }
  }

  // The fit of the codes in `trial`, scored (which then overwrites `trial`).
  void score_fit(__mmask16 m, __m512* s, __m512* b) {
    const __mmask16 ok = m & fit(trial, s, b);
    score(*s, *b, ok);
  }
};

}  // namespace

void search_affine_groups_avx512(const float* w, int64_t ld, int64_t count, const float* h, int n, int bits,
                                 float* scales, float* biases, uint8_t* codes) {
  const int nmax = (1 << bits) - 1;
  LaneSearch ls;
  ls.n = n;
  ls.nmax = _mm512_set1_epi32(nmax);
  ls.h = h;
  ls.w.resize(static_cast<size_t>(16 * n));
  ls.wd.resize(static_cast<size_t>(16 * n));
  ls.codes.resize(static_cast<size_t>(16 * n));
  ls.trial.resize(static_cast<size_t>(16 * n));
  ls.current.resize(static_cast<size_t>(16 * n));
  for (int64_t r0 = 0; r0 < count; r0 += kLanes) {
    const int lanes = static_cast<int>(count - r0 < kLanes ? count - r0 : kLanes);
    // Lane l holds group r0 + l; missing lanes repeat the last group.
    for (int i = 0; i < n; ++i)
      for (int l = 0; l < kLanes; ++l) {
        const float v = w[(r0 + (l < lanes ? l : lanes - 1)) * ld + i];
        ls.w[size_t(16 * i + l)] = v;
        ls.wd[size_t(16 * i + l)] = static_cast<double>(v);
      }
    __m512 lo = ls.w_at(0), hi = ls.w_at(0);
    for (int i = 1; i < n; ++i) {
      lo = _mm512_min_ps(ls.w_at(i), lo);  // std::min(lo, w): w < lo ? w : lo
      hi = _mm512_max_ps(ls.w_at(i), hi);  // std::max(hi, w): hi < w ? w : hi
    }
    // fit's sums that do not depend on the codes, in its order.
    ls.c_sum = _mm512_setzero_pd();
    ls.e_sum[0] = ls.e_sum[1] = _mm512_setzero_pd();
    for (int i = 0; i < n; ++i) {
      const __m512d hw = _mm512_set1_pd(static_cast<double>(h[i]));
      ls.c_sum = _mm512_add_pd(ls.c_sum, hw);
      for (int half = 0; half < 2; ++half)
        ls.e_sum[half] = _mm512_add_pd(ls.e_sum[half], _mm512_mul_pd(hw, ls.wd_at(i, half)));
    }
    const __mmask16 constant = _mm512_cmp_ps_mask(hi, lo, _CMP_EQ_OQ);
    const __mmask16 searched = static_cast<__mmask16>(~constant);
    ls.best_err = _mm512_set1_ps(INFINITY);
    ls.best_scale = ls.best_bias = _mm512_setzero_ps();
    std::fill(ls.codes.begin(), ls.codes.end(), 0);
    ls.score(_mm512_div_ps(_mm512_sub_ps(hi, lo), _mm512_set1_ps(static_cast<float>(nmax))), lo, searched);
    ls.grid(-1.0f, 1.0f, 20, false, lo, hi, searched);
    ls.alternate(4);
    ls.grid(-2.0f, 2.0f, 20, true, lo, hi, searched);
    ls.alternate(8);
    // Constant groups: zero codes, scale 0, the value as fp16 (the scalar search's first exit).
    const __m512 scale = _mm512_mask_mov_ps(ls.best_scale, constant, _mm512_setzero_ps());
    const __m512 bias = _mm512_mask_mov_ps(ls.best_bias, constant, to_f16(lo));
    alignas(64) float s_out[kLanes], b_out[kLanes];
    _mm512_store_ps(s_out, scale);
    _mm512_store_ps(b_out, bias);
    alignas(64) int32_t code_out[kLanes];
    for (int i = 0; i < n; ++i) {
      _mm512_store_si512(code_out, _mm512_mask_mov_epi32(LaneSearch::get(ls.codes, i), constant, _mm512_setzero_si512()));
      for (int l = 0; l < lanes; ++l) codes[(r0 + l) * n + i] = static_cast<uint8_t>(code_out[l]);
    }
    for (int l = 0; l < lanes; ++l) {
      scales[r0 + l] = s_out[l];
      biases[r0 + l] = b_out[l];
    }
  }
}

}  // namespace eq::quant::kernels
