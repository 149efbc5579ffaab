// The two steps of the affine group search (affine.cpp's search_affine_group)
// that both the CPU and the GPU quantizer (cuda/affine.cu) run: codes from
// (scale, bias) with their weighted error, and the weighted least-squares
// (scale, bias) of fixed codes. One source, so the GPU's scales, biases and
// codes equal the CPU's (both compiled without contracted multiply-adds).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace eq::quant::affine_ops {

EQ_HOST_DEVICE inline int clamp_code(int q, int nmax) { return q < 0 ? 0 : (nmax < q ? nmax : q); }

// Codes for (scale, bias) and their weighted error, as decoded: q * scale + bias.
EQ_HOST_DEVICE inline float assign_codes(const float* w, const float* h, int n, int nmax, float scale, float bias,
                                         uint8_t* codes) {
  float err = 0.0f;
  for (int i = 0; i < n; ++i) {
    int q = 0;
    if (scale > 0.0f) q = clamp_code(static_cast<int>(nearbyintf((w[i] - bias) / scale)), nmax);
    codes[i] = static_cast<uint8_t>(q);
    const float d = static_cast<float>(q) * scale + bias - w[i];
    err += h[i] * d * d;
  }
  return err;
}

// Weighted least squares of w ~ scale * q + bias for fixed codes; false when
// the codes do not determine both (all equal).
EQ_HOST_DEVICE inline bool fit(const float* w, const float* h, int n, const uint8_t* codes, float* scale,
                               float* bias) {
  double a = 0, b = 0, c = 0, d = 0, e = 0;
  for (int i = 0; i < n; ++i) {
    const double q = codes[i], hw = h[i];
    a += hw * q * q;
    b += hw * q;
    c += hw;
    d += hw * q * w[i];
    e += hw * w[i];
  }
  const double det = a * c - b * b;
  if (!(det > 1e-12 * a * c)) return false;
  const double s = (c * d - b * e) / det;
  if (!(s > 0.0)) return false;
  *scale = static_cast<float>(s);
  *bias = static_cast<float>((a * e - b * d) / det);
  return true;
}

}  // namespace eq::quant::affine_ops
