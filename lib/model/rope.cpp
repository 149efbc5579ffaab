#include "model/rope.h"

#include <cmath>

#include "core/error.h"

namespace eq::model {

RopeTable::RopeTable(int64_t head_dim, double theta) : head_dim_(head_dim) {
  if (head_dim <= 0 || head_dim % 2 != 0) invalid("RoPE: head_dim must be even and positive, got " + std::to_string(head_dim));
  inv_freq_.resize(head_dim / 2);
  for (int64_t i = 0; i < head_dim / 2; ++i)
    inv_freq_[i] = 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(head_dim));
}

void RopeTable::ensure(int64_t pos) const {
  if (pos < positions_) return;
  const int64_t half = head_dim_ / 2;
  const int64_t n = pos + 1;
  cos_.resize(n * half);
  sin_.resize(n * half);
  for (int64_t p = positions_; p < n; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(p) * inv_freq_[i];
      cos_[p * half + i] = static_cast<float>(std::cos(a));
      sin_[p * half + i] = static_cast<float>(std::sin(a));
    }
  positions_ = n;
}

void RopeTable::apply(float* heads, int64_t count, int64_t pos) const {
  EQ_CHECK(pos < positions_, "RoPE table not reserved for position " + std::to_string(pos));
  const int64_t half = head_dim_ / 2;
  const float* c = cos_.data() + pos * half;
  const float* s = sin_.data() + pos * half;
  for (int64_t h = 0; h < count; ++h) {
    float* x = heads + h * head_dim_;
    for (int64_t i = 0; i < half; ++i) {
      const float x1 = x[i], x2 = x[i + half];
      x[i] = x1 * c[i] - x2 * s[i];
      x[i + half] = x2 * c[i] + x1 * s[i];
    }
  }
}

}  // namespace eq::model
