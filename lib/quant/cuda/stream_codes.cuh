// What the two decode kernels of the column bit-stream formats (gemv_stream.cu
// on the CUDA cores, gemv_stream_mma.cu on the tensor cores) share: the
// launch's parameters, taken from the format's row, and the code-to-integer
// steps that turn packed words into floats in registers.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "quant/cuda/gemv_common.cuh"
#include "quant/cuda/stream_scale.cuh"

namespace eq::quant::cuda {

struct StreamParams {
  int64_t rows = 0, cols = 0;
  int m_rows = 1;
  int group = 32;
  int scale_kind = 0;  // ScaleKind
  bool has_tensor_scale = false;
  int quads_log2 = 3;  // column quads per block: 8 or 16
  int batch = 1;       // chunks loaded before use, <= the kernel's kBatch
  bool gated = false;  // the jobs' inputs are gated (x_up), staged in shared memory
  uint32_t table[4] = {};  // 4-bit table codes: byte c = code c's integer byte (int8_bytes[c])
  float offset = 0.0f;     // 2^23 + int8_offset
  float unit = 1.0f;       // int8_scale
};

__device__ inline float decode_scale(const StreamParams& p, uint32_t raw, float tensor_scale) {
  return stream_scale_value(p.scale_kind, raw, tensor_scale);
}

// Byte i of b as the float 2^23 + b_i (exact).
__device__ inline float magic(uint32_t b, int i) { return __uint_as_float(__byte_perm(b, 0x4B000000u, 0x7650 + i)); }

// The integer bytes of 4 codes (the low 16 bits of w, code 0 lowest) through
// the 16-byte table t[0..3]: the low three bits of a code pick one of 8 bytes
// in each half of the table, its high bit picks the half (a third permute).
__device__ inline uint32_t table_bytes(const uint32_t (&t)[4], uint32_t w) {
  const uint32_t sel = w & 0x7777u;
  const uint32_t pick = ((w >> 1) & 0x4444u) | 0x3210u;  // byte j of lo, or of hi when bit 3 of code j is set
  return __byte_perm(__byte_perm(t[0], t[1], sel), __byte_perm(t[2], t[3], sel), pick);
}

// Bytes 2i and 2i+1 of b as the half2 (1024 + byte, 1024 + byte), exactly.
__device__ inline __half2 half_pair(uint32_t b, int i) {
  const uint32_t h = __byte_perm(b, 0x64646464u, 0x4140 + 0x202 * i);
  return *reinterpret_cast<const __half2*>(&h);
}

// The tensor-core decode of a call, when its shape and format allow it (see
// gemv_stream_mma.cu): enqueues the launch and returns true, or returns false
// and enqueues nothing. `table`: 4-bit codes through p.table; `has_biases`:
// affine codes.
bool launch_stream_mma(const StreamParams& p, int bits, bool table, bool has_biases, const LaunchJobs& jobs,
                       int n_jobs, cudaStream_t stream);

}  // namespace eq::quant::cuda
