// A stream format's group scale on the GPU, from its stored encoding
// (packed_stream.h ScaleKind): F16, E8M0 (2^(e - 127)), or E4M3 times the
// F32 tensor scale. Shared by the decode and prefill products.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "quant/cuda/cuda_common.cuh"
#include "quant/packed_stream.h"

namespace eq::quant::cuda {

// The scale from its stored bits `raw` (the F16 bits, or the E8M0 / E4M3 byte).
__device__ inline float stream_scale_value(int scale_kind, uint32_t raw, float tensor_scale) {
  switch (scale_kind) {
    case static_cast<int>(ScaleKind::kF16):
      return __half2float(__ushort_as_half(static_cast<unsigned short>(raw)));
    case static_cast<int>(ScaleKind::kE8M0):  // 2^(e - 127); e = 0 is the subnormal 2^-127
      return __uint_as_float(raw == 0 ? 0x00400000u : raw << 23);
    default:
      return fp8_e4m3_to_f32_device(static_cast<uint8_t>(raw)) * tensor_scale;
  }
}

// Scale `at` of the scales part.
__device__ inline float decode_stream_scale(int scale_kind, const void* scales, float tensor_scale, int64_t at) {
  const uint32_t raw = scale_kind == static_cast<int>(ScaleKind::kF16) ? static_cast<const uint16_t*>(scales)[at]
                                                                       : static_cast<const uint8_t*>(scales)[at];
  return stream_scale_value(scale_kind, raw, tensor_scale);
}

}  // namespace eq::quant::cuda
