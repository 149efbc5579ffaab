#include "quant/hadamard.h"

#include <cmath>

#include "core/error.h"
#include "quant/trellis/kernels.h"

namespace eq::quant {

int64_t hadamard_block_size(int64_t dim) {
  if (dim <= 0) invalid("hadamard_block_size: dimension must be positive, got " + std::to_string(dim));
  int64_t block = 1;
  while (block < kMaxHadamardBlock && dim % (block * 2) == 0) block *= 2;
  return block;
}

void hadamard_rows(float* x, int64_t rows, int64_t dim) {
  trellis::kernels().hadamard_rows(x, rows, dim, hadamard_block_size(dim));
}

void hadamard_columns(float* x, int64_t rows, int64_t cols) {
  trellis::kernels().hadamard_columns(x, rows, cols, hadamard_block_size(rows));
}

void hadamard_f64(double* x, int64_t dim) {
  const int64_t block = hadamard_block_size(dim);
  const double norm = 1.0 / std::sqrt(static_cast<double>(block));
  for (int64_t base = 0; base < dim; base += block) {
    double* v = x + base;
    for (int64_t h = 1; h < block; h *= 2)
      for (int64_t i = 0; i < block; i += 2 * h)
        for (int64_t j = i; j < i + h; ++j) {
          double a = v[j], b = v[j + h];
          v[j] = a + b;
          v[j + h] = a - b;
        }
    for (int64_t j = 0; j < block; ++j) v[j] *= norm;
  }
}

void hadamard_reference(double* x, int64_t dim) {
  const int64_t block = hadamard_block_size(dim);
  const double norm = 1.0 / std::sqrt(static_cast<double>(block));
  for (int64_t base = 0; base < dim; base += block) {
    // Direct definition: H[i][j] = (-1)^popcount(i & j) / sqrt(block).
    std::vector<double> out(block, 0.0);
    for (int64_t i = 0; i < block; ++i)
      for (int64_t j = 0; j < block; ++j)
        out[i] += (__builtin_popcountll(static_cast<uint64_t>(i & j)) & 1 ? -1.0 : 1.0) * x[base + j];
    for (int64_t i = 0; i < block; ++i) x[base + i] = out[i] * norm;
  }
}

std::vector<int8_t> random_signs(uint64_t seed, uint64_t stream, int64_t n) {
  std::vector<int8_t> signs(static_cast<size_t>(n));
  uint64_t state = seed ^ stream;
  for (auto& s : signs) {
    state += 0x9E3779B97F4A7C15ull;  // splitmix64
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    s = (z >> 63) ? -1 : 1;
  }
  return signs;
}

}  // namespace eq::quant
