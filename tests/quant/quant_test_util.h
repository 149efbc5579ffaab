// Shared helpers for the lib/quant tests.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "quant/format.h"

namespace eq::quant::test {

// Every ISA this machine can run, generic first.
inline std::vector<Isa> supported_isas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512})
    if (isa <= detected_isa()) isas.push_back(isa);
  return isas;
}

// Forces an ISA for one scope.
class IsaGuard {
 public:
  explicit IsaGuard(Isa isa) { set_active_isa_for_testing(isa); }
  ~IsaGuard() { set_active_isa_for_testing(detected_isa()); }
};

inline std::vector<float> normal_matrix(int64_t rows, int64_t cols, uint64_t seed, float sigma = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (float& v : w) v = dist(rng);
  return w;
}

inline std::vector<float> dequantized(const QuantizedMatrix& q) {
  std::vector<float> out(static_cast<size_t>(q.rows * q.cols));
  q.format->dequantize(q.view(), out.data());
  return out;
}

inline double mse(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
  return s / static_cast<double>(a.size());
}

// The bytes of a part as a vector of T (for comparing with literals).
template <typename T>
std::vector<T> part_as(const QuantizedMatrix& q, size_t index) {
  const auto& bytes = q.parts.at(index).bytes;
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

// A PackedMatrix over literal part arrays (golden vectors).
struct LiteralPart {
  const void* data;
  DType dtype;
  std::vector<int64_t> shape;
  size_t nbytes;
};
inline PackedMatrix packed_from(const FormatTraits& f, int64_t rows, int64_t cols, const std::vector<LiteralPart>& parts) {
  PackedMatrix m;
  m.format = &f;
  m.rows = rows;
  m.cols = cols;
  for (const LiteralPart& p : parts) m.parts.push_back(PartView{p.data, p.dtype, p.shape, p.nbytes});
  return m;
}

}  // namespace eq::quant::test
