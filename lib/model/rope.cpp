#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace eq::model {

std::vector<double> rope_inv_freq(const ModelConfig& c) {
  const int64_t d = c.rope_dim;
  if (d <= 0 || d % 2 != 0) invalid("RoPE: the rotated dims must be even and positive, got " + std::to_string(d));
  std::vector<double> inv(d / 2);
  for (int64_t i = 0; i < d / 2; ++i)
    inv[i] = 1.0 / std::pow(c.rope_theta, static_cast<double>(2 * i) / static_cast<double>(d));
  const YarnScaling& y = c.rope_yarn;
  if (!y.active()) return inv;
  // The dim at which a frequency turns `rotations` times over the original context.
  const auto correction_dim = [&](double rotations) {
    return static_cast<double>(d) *
           std::log(static_cast<double>(y.original_max_position_embeddings) / (rotations * 2 * std::numbers::pi)) /
           (2 * std::log(c.rope_theta));
  };
  double low = correction_dim(y.beta_fast), high = correction_dim(y.beta_slow);
  if (y.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(d - 1));
  if (low == high) high += 0.001;  // no division by zero
  for (int64_t i = 0; i < d / 2; ++i) {
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    inv[i] = inv[i] / y.factor * ramp + inv[i] * (1 - ramp);
  }
  return inv;
}

RopeTable::RopeTable(const ModelConfig& c)
    : dim_(c.rope_dim),
      interleaved_(c.rope_interleave),
      factor_(c.rope_yarn.active() ? c.rope_yarn.attention_factor : 1.0),
      inv_freq_(rope_inv_freq(c)) {}

void RopeTable::ensure(int64_t pos) const {
  if (pos < positions_) return;
  const int64_t half = dim_ / 2;
  const int64_t n = pos + 1;
  cos_.resize(n * half);
  sin_.resize(n * half);
  for (int64_t p = positions_; p < n; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(p) * inv_freq_[i];
      cos_[p * half + i] = static_cast<float>(std::cos(a) * factor_);
      sin_[p * half + i] = static_cast<float>(std::sin(a) * factor_);
    }
  positions_ = n;
}

void RopeTable::apply(float* x, int64_t count, int64_t stride, int64_t pos) const {
  EQ_CHECK(pos < positions_, "RoPE table not reserved for position " + std::to_string(pos));
  const int64_t half = dim_ / 2;
  const float* c = cos_.data() + pos * half;
  const float* s = sin_.data() + pos * half;
  thread_local std::vector<float> pairs;
  for (int64_t h = 0; h < count; ++h) {
    float* v = x + h * stride;
    if (interleaved_) {  // (v[2i], v[2i+1]) -> (v[i], v[i + half])
      pairs.assign(v, v + dim_);
      for (int64_t i = 0; i < half; ++i) {
        v[i] = pairs[2 * i];
        v[i + half] = pairs[2 * i + 1];
      }
    }
    for (int64_t i = 0; i < half; ++i) {
      const float x1 = v[i], x2 = v[i + half];
      v[i] = x1 * c[i] - x2 * s[i];
      v[i + half] = x2 * c[i] + x1 * s[i];
    }
  }
}

}  // namespace eq::model
