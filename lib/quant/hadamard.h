// Random Hadamard transforms for incoherence processing (trellis format).
//
// The transform along a dimension of size `dim` is block-diagonal: blocks of
// B = hadamard_block_size(dim) consecutive elements (the largest power of two
// <= 128 dividing dim), each multiplied by the orthonormal Walsh–Hadamard
// matrix H_B / sqrt(B) in natural (Sylvester) order, H_{2m} = [[H, H], [H, -H]].
// It is symmetric and its own inverse. Computed with the fast Walsh–Hadamard
// butterfly, O(dim log B); SIMD kernels are chosen at run time.
#pragma once

#include <cstdint>
#include <vector>

namespace eq::quant {

inline constexpr int64_t kMaxHadamardBlock = 128;

// Largest power of two <= 128 that divides dim (dim >= 1).
int64_t hadamard_block_size(int64_t dim);

// x[r, :] <- H_dim x[r, :] for each of `rows` contiguous rows of length `dim`.
void hadamard_rows(float* x, int64_t rows, int64_t dim);
// x[:, c] <- H_rows x[:, c] for each column of a row-major [rows, cols] matrix.
void hadamard_columns(float* x, int64_t rows, int64_t cols);

// The same transform of one float64 vector (fast butterflies).
void hadamard_f64(double* x, int64_t dim);
// Reference: the O(B^2) definition H[i][j] = (-1)^popcount(i & j) / sqrt(B), for tests.
void hadamard_reference(double* x, int64_t dim);

// n signs in {-1, +1}: sign i = -1 when bit 63 of the i-th splitmix64 output
// (generator state initialized to seed ^ stream) is set. `stream` separates su
// from sv (docs/formats.md, trellis).
std::vector<int8_t> random_signs(uint64_t seed, uint64_t stream, int64_t n);

}  // namespace eq::quant
