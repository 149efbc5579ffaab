// A stream format's group scale on the GPU, from its stored encoding
// (packed_stream.h ScaleKind): F16, E8M0 (2^(e - 127)), or E4M3 times the
// F32 tensor scale. Shared by the decode and prefill products.
#pragma once

#include <cstdint>

#include "quant/cuda/cuda_common.cuh"
#include "quant/packed_stream.h"

namespace eq::quant::cuda {

__device__ inline float decode_stream_scale(int scale_kind, const void* scales, float tensor_scale, int64_t at) {
  switch (scale_kind) {
    case static_cast<int>(ScaleKind::kF16):
      return f16_to_f32_device(static_cast<const uint16_t*>(scales)[at]);
    case static_cast<int>(ScaleKind::kE8M0): {
      const uint32_t e = static_cast<const uint8_t*>(scales)[at];  // 2^(e - 127); e = 0 is the subnormal 2^-127
      return __uint_as_float(e == 0 ? 0x00400000u : e << 23);
    }
    default:
      return fp8_e4m3_to_f32_device(static_cast<const uint8_t*>(scales)[at]) * tensor_scale;
  }
}

}  // namespace eq::quant::cuda
