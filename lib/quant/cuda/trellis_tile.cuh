// A trellis tile's stream bytes as the GPU's tile decoders read them (the
// decode product, trellis_gemv.cu, and the prefill product, gemm_trellis.cu):
// lane l of a warp owns the tile's weights 8l .. 8l+7, whose symbols are the
// lane's `BITS` bytes of the 32 * BITS-byte tile stream.
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

}  // namespace eq::quant::cuda
