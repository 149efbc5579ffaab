// What the GPU's trellis products (the decode product, trellis_gemv.cu, and
// the prefill product, gemm_trellis.cu) share: a tile's stream bytes as their
// tile decoders read them (lane l of a warp owns the tile's weights
// 8l .. 8l+7, whose symbols are the lane's `BITS` bytes of the 32 * BITS-byte
// tile stream), and the prefill product's Hadamard transform of one block of
// a rotation in shared memory (the decode product rotates in a warp's
// registers, trellis_gemv.cu's warp_hadamard).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace eq::quant::cuda {

// The lane's `BITS` stream bytes, the first one most significant.
template <int BITS>
__device__ inline uint32_t lane_bytes(const uint8_t* tile, int lane) {
  if constexpr (BITS == 4) {
    return __byte_perm(__ldg(reinterpret_cast<const uint32_t*>(tile) + lane), 0, 0x0123);
  } else if constexpr (BITS == 2) {
    const uint32_t v = __ldg(reinterpret_cast<const uint16_t*>(tile) + lane);
    return ((v & 0xffu) << 8) | (v >> 8);
  } else {
    const uint8_t* b = tile + BITS * lane;
    return (uint32_t{__ldg(b)} << 16) | (uint32_t{__ldg(b + 1)} << 8) | __ldg(b + 2);
  }
}

// v := H v (unnormalized) for one Hadamard block of `block` floats in shared
// memory, by the `threads` threads of the block (every thread calls it; it
// synchronizes after each butterfly stage).
__device__ inline void hadamard_in_shared(float* v, int block, int threads) {
  for (int h = 1; h < block; h *= 2) {
    for (int i = threadIdx.x; i < block / 2; i += threads) {
      const int j = (i / h) * 2 * h + i % h;
      const float a = v[j], b = v[j + h];
      v[j] = a + b;
      v[j + h] = a - b;
    }
    __syncthreads();
  }
}

}  // namespace eq::quant::cuda
