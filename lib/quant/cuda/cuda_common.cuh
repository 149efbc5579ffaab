// Helpers of the GPU quantizers: error checks that throw eq::Error, device
// buffers on the calling thread's stream (built with per-thread default
// streams, so the pack's workers overlap their copies and kernels), and the
// scalar conversions of core/numeric.cpp, op for op, for device code.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "quant/cuda/cuda_gpus.h"  // programmatic_launches

namespace eq::quant::cuda {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail(ErrorKind::kInternal, std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
}

// Programmatic dependent launch. A kernel launched by launch_kernel may be
// placed on the GPU before the grid ahead of it in the stream has ended, and
// waits there (griddepcontrol.wait: that grid complete and its writes seen)
// as its first statement; a decode step is a chain of short kernels, and this
// hides each one's launch behind the one before (docs/benchmarks.md, "GPU
// whole model"). When the grid after may be placed is the kernel's choice:
// - start_after_previous_grid(): at once. For the short kernels (norms,
//   RoPE, attention, residual adds, the router, combine, the shared
//   expert's add, x's int8 quantization once a call, int8_input.cu) and the
//   bf16 rows products (attention's projections and
//   the router's logits, a few hundred KB a layer), as measured.
// - wait_for_previous_grid(): once all its blocks have exited, which still
//   spares the next grid the wait for this one's end to be signalled and its
//   launch. For the products, which stream a step's weights: blocks of the
//   next grid placed beside theirs made the uniform layer's step 19% slower
//   (the same page).
// Without the launch attribute these instructions do nothing, so the same
// kernel runs under a plain launch. One exception to "first statement": a
// decode product whose x was quantized once a call (int8_input.cuh) issues
// its first loads of weights, which no grid writes, before its wait, and a
// routed one reads the router's ids there too: the quantization launched
// just before it began by waiting, so every grid before that one has ended.
// Such a product's every block still waits before it exits.
__device__ inline void wait_for_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ inline void start_after_previous_grid() {
  wait_for_previous_grid();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// kernel<<<grid, block, smem, s>>>(args...), with programmatic stream
// serialization when programmatic_launches(), and its check (`what` names
// the kernel in the error). Only for kernels whose first statement is one of
// the two above, or the exception just said.
template <typename... P, typename... A>
void launch_kernel(const char* what, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                   A&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = programmatic_launches() ? 1 : 0;
  check(cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...), what);
}

// Throws eq::Error (unsupported, exit 4) when no GPU can run the kernels.
void require_gpu();

// A device allocation from the stream-ordered pool, freed on the thread's stream.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) {
    if (n_ > 0) check(cudaMallocAsync(reinterpret_cast<void**>(&p_), n_ * sizeof(T), cudaStreamPerThread), "allocate");
  }
  DeviceBuffer(const T* host, size_t n) : DeviceBuffer(n) { upload(host); }
  ~DeviceBuffer() {
    if (p_) cudaFreeAsync(p_, cudaStreamPerThread);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return p_; }
  void upload(const T* host) {
    if (n_ > 0) check(cudaMemcpyAsync(p_, host, n_ * sizeof(T), cudaMemcpyHostToDevice, cudaStreamPerThread), "copy to GPU");
  }
  void download(T* host) const {
    if (n_ > 0) check(cudaMemcpyAsync(host, p_, n_ * sizeof(T), cudaMemcpyDeviceToHost, cudaStreamPerThread), "copy from GPU");
    check(cudaStreamSynchronize(cudaStreamPerThread), "synchronize");
  }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

inline void check_launch(const char* what) { check(cudaGetLastError(), what); }

// ---- core/numeric.cpp, for device code ----
__device__ inline float f16_to_f32_device(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {
      float v = static_cast<float>(mant) * 0x1p-24f;
      bits = sign | __float_as_uint(v);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13) | (mant ? 0x00400000u : 0u);
  } else {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  return __uint_as_float(bits);
}

__device__ inline uint16_t f32_to_f16_device(float f) {
  const uint32_t u = __float_as_uint(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((absu >> 13) & 0x3ffu));
  if (absu >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (absu < 0x38800000u) {
    const float a = __uint_as_float(absu);
    const float r = a + 0.5f;
    return static_cast<uint16_t>(sign | (__float_as_uint(r) - __float_as_uint(0.5f)));
  }
  uint32_t v = absu - ((127u - 15u) << 23);
  v += 0xfffu + ((v >> 13) & 1u);
  return static_cast<uint16_t>(sign | (v >> 13));
}

__device__ inline uint32_t encode_minifloat_device(float f, int E, int M, int bias, double max_finite,
                                                   uint32_t overflow_code, uint32_t nan_code) {
  const uint32_t sign_bit = 1u << (E + M);
  if (isnan(f)) return nan_code;
  const uint32_t sign = signbit(f) ? sign_bit : 0u;
  const double a = fabs(static_cast<double>(f));
  if (a == 0.0) return sign;
  const int emin = 1 - bias;
  int e;
  frexp(a, &e);
  int exp_unbiased = e - 1 > emin ? e - 1 : emin;
  double quantum = ldexp(1.0, exp_unbiased - M);
  double q = nearbyint(a / quantum);
  double v = q * quantum;
  if (v > max_finite || isinf(a)) return sign | overflow_code;
  if (v < ldexp(1.0, emin)) return sign | static_cast<uint32_t>(v / ldexp(1.0, emin - M));
  frexp(v, &e);
  exp_unbiased = e - 1;
  const uint32_t mant = static_cast<uint32_t>(v / ldexp(1.0, exp_unbiased - M)) - (1u << M);
  return sign | (static_cast<uint32_t>(exp_unbiased + bias) << M) | mant;
}

// The bits of the float, without ldexpf (the nvfp4 decode converts a scale
// every 16 weights): 2^(e - 7) (1 + m / 8) has the float exponent e + 120 and
// the mantissa m << 20; a subnormal m 2^-9 is exact as a product. The same
// values as the CPU's fp8_e4m3_to_f32 (core/numeric.h), all 256 codes.
__device__ inline float fp8_e4m3_to_f32_device(uint8_t v) {
  if ((v & 0x7fu) == 0x7fu) return __int_as_float(0x7fc00000);
  const uint32_t e = (v >> 3) & 15u, m = v & 7u;
  const float mag = e == 0 ? static_cast<float>(m) * 0x1p-9f : __uint_as_float(((e + 120u) << 23) | (m << 20));
  return __uint_as_float(__float_as_uint(mag) | (static_cast<uint32_t>(v & 0x80u) << 24));
}
__device__ inline uint8_t f32_to_fp8_e4m3_device(float f) {
  return static_cast<uint8_t>(encode_minifloat_device(f, 4, 3, 7, 448.0, 0x7eu, 0x7fu));
}

// Per-group importance weights for every column (quantize_common.cpp's
// group_importance, group by group), on the host.
std::vector<float> importance_by_group(const float* importance, int64_t cols, int group);

}  // namespace eq::quant::cuda
