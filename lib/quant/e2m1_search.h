// The E2M1 (fp4) rounding and per-group scale searches that both the CPU
// quantizers (fp4.cpp, fp4_mx.cpp, fp4_nv.cpp) and the GPU's (cuda/fp4.cu)
// run: one source, so the GPU's scales and codes equal the CPU's (both
// compiled without contracted multiply-adds). Everything here works on fixed
// arrays, as device code must; a group holds at most kMaxGroup weights.
#pragma once

#include <cmath>
#include <cstdint>
#if !defined(__CUDA_ARCH__)
#include <algorithm>
#include <cstring>
#endif

#include "core/host_device.h"

namespace eq::quant::e2m1_ops {

inline constexpr int kMaxGroup = 128;  // the largest fp4 group (fp4_g128)
// Interval minimizers tried after rounding (the best real one may round badly).
inline constexpr int kIntervalOptima = 4;

// The value of a code: bit 3 = sign, bits 2..1 = exponent, bit 0 = mantissa
// (quant_kernels.h's kE2M1Values).
EQ_HOST_DEVICE inline float value(uint32_t code) {
  static constexpr float kValues[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                        -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  return kValues[code];
}

// The code nearest to x (x = weight / scale): round to nearest, ties to the
// even code (OCP rounding), saturating at +-6. Codes for -0 and for negatives
// that round to zero are 0 (+0), so zeros stay +0.
EQ_HOST_DEVICE inline uint32_t code(float x) {
  const float a = fabsf(x);
  const uint32_t c = static_cast<uint32_t>(a > 0.25f) + static_cast<uint32_t>(a >= 0.75f) +
                     static_cast<uint32_t>(a > 1.25f) + static_cast<uint32_t>(a >= 1.75f) +
                     static_cast<uint32_t>(a > 2.5f) + static_cast<uint32_t>(a >= 3.5f) +
                     static_cast<uint32_t>(a > 5.0f);
  return (x < 0.0f && c != 0) ? (c | 8u) : c;
}

// Weighted squared error of one group quantized with decoded scale s.
EQ_HOST_DEVICE inline float group_error(const float* w, const float* h, int n, float s) {
  float err = 0.0f;
  if (s == 0.0f) {
    for (int i = 0; i < n; ++i) err += h[i] * w[i] * w[i];
    return err;
  }
  for (int i = 0; i < n; ++i) {
    const float d = w[i] - value(code(w[i] / s)) * s;
    err += h[i] * d * d;
  }
  return err;
}

// A scale where one weight's code changes: |w_i| / edge.
struct Event {
  float s;
  int i, order;
};

// The sweep's order: s descending, ties (common among bf16 weights) by
// position. A total order, so the sums of interval_optima never depend on
// the sort algorithm.
EQ_HOST_DEVICE inline bool before(const Event& a, const Event& b) {
  return a.s > b.s || (a.s == b.s && a.order < b.order);
}

// In-place heap sort by before().
EQ_HOST_DEVICE inline void sort_events(Event* ev, int n) {
  auto sift = [&](int root, int end) {
    while (true) {
      int child = 2 * root + 1;
      if (child >= end) return;
      // a max-heap under "after": the element that sorts last at the root
      if (child + 1 < end && before(ev[child], ev[child + 1])) ++child;
      if (!before(ev[root], ev[child])) return;
      const Event t = ev[root];
      ev[root] = ev[child];
      ev[child] = t;
      root = child;
    }
  };
  for (int i = n / 2 - 1; i >= 0; --i) sift(i, n);
  for (int end = n - 1; end > 0; --end) {
    const Event t = ev[0];
    ev[0] = ev[end];
    ev[end] = t;
    sift(0, end);
  }
}

#if !defined(__CUDA_ARCH__)
// The same order on the host, as one integer sort: for s >= 0 the float's bits
// rise with s, so (~bits(s), order) ascending is before()'s order (a total
// order: any sort gives the same sequence). Several times the heap sort's speed.
inline void sort_events_host(Event* ev, int n) {
  uint64_t keys[7 * kMaxGroup];
  for (int k = 0; k < n; ++k) {
    uint32_t bits;
    std::memcpy(&bits, &ev[k].s, sizeof bits);
    keys[k] = (static_cast<uint64_t>(~bits) << 32) | static_cast<uint32_t>(k);
  }
  std::sort(keys, keys + n);
  Event sorted[7 * kMaxGroup];
  for (int k = 0; k < n; ++k) sorted[k] = ev[static_cast<uint32_t>(keys[k])];
  std::memcpy(ev, sorted, static_cast<size_t>(n) * sizeof(Event));
}
#endif

// Between consecutive scales where some code changes (|w_i| / edge), the codes
// are fixed, so the weighted error is sum h w^2 - 2 s num + s^2 den with
// num = sum h |w| |v|, den = sum h v^2, minimal at num / den clamped to the
// interval. Sweeping s downwards from amax / 0.25 (all codes 0), each event
// raises one weight's code by one step and updates num and den in O(1): every
// interval's minimizer in O(n log n), i.e. the best real scale exactly.
// Writes up to kIntervalOptima minimizers to `out`, best (least error, then
// smallest scale) first; returns how many.
EQ_HOST_DEVICE inline int interval_optima(const float* w, const float* h, int n, float* out) {
  // Rounding thresholds of code() on |x|: past kEdges[k], |code| > k.
  static constexpr float kEdges[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  Event ev[7 * kMaxGroup];
  int level[kMaxGroup];
  int m = 0;
  for (int i = 0; i < n; ++i)
    if (w[i] != 0.0f && h[i] > 0.0f)
      for (int k = 0; k < 7; ++k) {
        ev[m] = {fabsf(w[i]) / kEdges[k], i, m};
        ++m;
      }
#if defined(__CUDA_ARCH__)
  sort_events(ev, m);
#else
  sort_events_host(ev, m);
#endif
  for (int i = 0; i < n; ++i) level[i] = 0;
  double num = 0.0, den = 0.0;
  // The best (error minus the constant sum h w^2, s) pairs, ascending.
  double best_err[kIntervalOptima];
  float best_s[kIntervalOptima];
  int found = 0;
  for (int k = 0; k < m; ++k) {
    const Event& e = ev[k];
    const double a = fabs(static_cast<double>(w[e.i])), he = h[e.i];
    const double v0 = value(static_cast<uint32_t>(level[e.i])), v1 = value(static_cast<uint32_t>(level[e.i] + 1));
    ++level[e.i];
    num += he * a * (v1 - v0);
    den += he * (v1 * v1 - v0 * v0);
    const double upper = e.s, lower = k + 1 < m ? ev[k + 1].s : 0.0;
    if (!(den > 0.0) || upper <= lower) continue;
    const double q = num / den;
    const double s = q < lower ? lower : (upper < q ? upper : q);
    const double err = s * s * den - 2.0 * s * num;
    const float sf = static_cast<float>(s);
    int pos = found;
    while (pos > 0 && (err < best_err[pos - 1] || (err == best_err[pos - 1] && sf < best_s[pos - 1]))) --pos;
    if (pos >= kIntervalOptima) continue;
    const int last = found < kIntervalOptima ? found : kIntervalOptima - 1;
    for (int j = last; j > pos; --j) {
      best_err[j] = best_err[j - 1];
      best_s[j] = best_s[j - 1];
    }
    best_err[pos] = err;
    best_s[pos] = sf;
    if (found < kIntervalOptima) ++found;
  }
  for (int k = 0; k < found; ++k) out[k] = best_s[k];
  return found;
}

// The representable scale that minimizes the importance-weighted squared
// error of one group (n <= kMaxGroup): a grid of candidates amax/d for d in
// [4.5, 8] (clipping the largest weights can pay), plus least-squares refits
// s = sum(h w v) / sum(h v^2) of the best; then the exact minimizers over
// real scales (interval_optima), rounded to the format both ways, so the
// result is never worse than the grid's. Groups whose nonzero weights share
// one magnitude a try a/v for every E2M1 value v, so constant groups are
// exact whenever the format can represent the scale. `round_scale(s)` maps a
// real scale to the nearest the format stores (decoded). Returns the decoded
// scale (0 for all-zero).
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <class Round>
EQ_HOST_DEVICE float search_scale(const float* w, const float* h, int n, const Round& round_scale) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = fmaxf(amax, fabsf(w[i]));
  if (amax == 0.0f) return 0.0f;
  bool one_magnitude = true;
  for (int i = 0; i < n; ++i) one_magnitude &= (w[i] == 0.0f || fabsf(w[i]) == amax);

  float best_s = 0.0f;
  float best_err = group_error(w, h, n, 0.0f);
  auto consider = [&](float s) {
    const float r = round_scale(s);
    if (!(r > 0.0f)) return;
    const float e = group_error(w, h, n, r);
    if (e < best_err) {
      best_err = e;
      best_s = r;
    }
  };
  if (one_magnitude)
    for (uint32_t c = 7; c >= 1; --c) consider(amax / value(c));
  constexpr int kSteps = 28;
  for (int i = 0; i <= kSteps; ++i) consider(amax / (4.5f + 3.5f * static_cast<float>(i) / kSteps));
  // Least-squares refit of the scale for the chosen codes, then re-round.
  for (int iter = 0; iter < 2 && best_s > 0.0f; ++iter) {
    double num = 0.0, den = 0.0;
    for (int i = 0; i < n; ++i) {
      const double v = value(code(w[i] / best_s));
      num += static_cast<double>(h[i]) * w[i] * v;
      den += static_cast<double>(h[i]) * v * v;
    }
    if (den <= 0.0) break;
    const float before_err = best_err;
    consider(static_cast<float>(num / den));
    if (!(best_err < before_err)) break;
  }
  // The exact minimizers over real scales, rounded to the format's scale both
  // ways: a coarse scale (E4M3) may round the best real scale onto a worse
  // neighbour than the one on its other side.
  float optima[kIntervalOptima];
  const int count = interval_optima(w, h, n, optima);
  for (int k = 0; k < count; ++k) {
    const float s = optima[k];
    consider(s);
    const float r = round_scale(s);
    if (r > 0.0f && r != s) consider(2.0f * s - r);
  }
  return best_s;
}

// mxfp4's E8M0 block exponent (blocks of 32): the OCP floor rule
// floor(log2 amax) - 2 (6 = 1.5 * 2^2), or with `search_neighbours` whichever
// of it and its two neighbours gives the least error. False for an all-zero
// block.
EQ_HOST_DEVICE inline bool mx_exponent(const float* w, const float* h, bool search_neighbours, int* exponent) {
  constexpr int kGroup = 32;
  float amax = 0.0f;
  for (int i = 0; i < kGroup; ++i) amax = fmaxf(amax, fabsf(w[i]));
  if (amax == 0.0f) return false;
  int e;
  frexpf(amax, &e);  // amax = m * 2^e, m in [0.5, 1): floor(log2 amax) = e - 1
  const int e0 = e - 1 - 2;
  int best_e = e0 < -127 ? -127 : (e0 > 127 ? 127 : e0);
  if (search_neighbours) {
    float best_err = group_error(w, h, kGroup, ldexpf(1.0f, best_e));
    for (int ne = e0 - 1; ne <= e0 + 1; ne += 2) {
      if (ne < -127 || ne > 127) continue;
      const float err = group_error(w, h, kGroup, ldexpf(1.0f, ne));
      if (err < best_err) {
        best_err = err;
        best_e = ne;
      }
    }
  }
  *exponent = best_e;
  return true;
}

// nvfp4's tensor scale: the smallest power of two >= amax / (6 * 448), so
// every block scale amax_b / 6 fits E4M3 (<= 448) and e4m3 * tensor scale
// stays exact.
EQ_HOST_DEVICE inline float nvfp4_tensor_scale(float amax) {
  if (amax == 0.0f) return 1.0f;
  const float x = amax / (6.0f * 448.0f);
  int e;
  const float m = frexpf(x, &e);  // x = m * 2^e, m in [0.5, 1)
  return ldexpf(1.0f, m == 0.5f ? e - 1 : e);
}

}  // namespace eq::quant::e2m1_ops
