// The integer micro-kernel of the batch expert MLP (batch_mlp.cpp): rows of
// activations quantized to int8 per unit of 32 k times integer weight panels
// built by FormatTraits::int8_panels (quant/int8_panels.h), vpdpbusd on
// AVX-512 VNNI.
//
// Activations (Int8Rows, quantize_rows_int8): row i, unit u of 32 k holds
//   q (int8, in the format's k order), scale = max|x| / 127,
//   qsum = sum of the unit's q, xsum = float(qsum) * scale.
// For every output element, per unit u in increasing k (fp32, one rounding each):
//   d   = sum_k code * q - offset * qsum          (int32, exact)
//   acc = fma(float(d), wscale[u] * scale[u], acc)
//   acc = fma(wbias[u], xsum[u], acc)             (formats with biases)
// acc starts at c (accumulate) or 0. The integer sums are exact and the float
// steps are the same on every ISA and for any m, np and register blocking, so
// a row's result never depends on the other rows of the call, and chaining
// calls over consecutive k ranges equals one call over the whole range.
#pragma once

#include <cstdint>

#include "quant/int8_panels.h"

namespace eq::exec {

struct Int8Rows {
  const int8_t* q = nullptr;  // row i, k: q[i * ldq + k]
  int64_t ldq = 0;
  const float* scale = nullptr;  // row i, unit u: [i * ldu + u]
  const int32_t* qsum = nullptr;
  const float* xsum = nullptr;
  int64_t ldu = 0;
};

// The writable arrays behind an Int8Rows (same layout).
struct Int8RowsBuffer {
  int8_t* q = nullptr;
  int64_t ldq = 0;
  float* scale = nullptr;
  int32_t* qsum = nullptr;
  float* xsum = nullptr;
  int64_t ldu = 0;
  Int8Rows view() const { return {q, ldq, scale, qsum, xsum, ldu}; }
};

// Quantizes x[i * ldx + k] for i < m, k < kc (a multiple of 32) into the
// arrays of `out` (kc / 32 units per row); the same bits on every ISA.
using QuantizeRowsFn = void (*)(const float* x, int64_t ldx, int64_t m, int64_t kc, quant::Int8KOrder order,
                                const Int8RowsBuffer& out);

// c[i * ldc + p * 16 + j] (+)= the product above for i < m, p < np, j < 16,
// over kc (a multiple of 32) k: panel p's codes at codes + p * kc * 16, its
// scales (biases) at wscale (wbias) + p * kc / 32 * 16; wbias null = none.
using Int8PanelGemmFn = void (*)(const Int8Rows& a, int64_t m, const uint8_t* codes, const float* wscale,
                                 const float* wbias, int offset, int64_t np, int64_t kc, float* c, int64_t ldc,
                                 bool accumulate);

// The kernels for eq::active_isa(); gemm null where the batch kernel keeps
// the fp32 path (no VNNI: generic, AVX2; docs/design.md).
struct Int8BatchKernels {
  QuantizeRowsFn quantize = nullptr;
  Int8PanelGemmFn gemm = nullptr;
};
Int8BatchKernels active_int8_batch_kernels();

namespace kernels {
void quantize_rows_int8_generic(const float*, int64_t, int64_t, int64_t, quant::Int8KOrder, const Int8RowsBuffer&);
void quantize_rows_int8_avx512(const float*, int64_t, int64_t, int64_t, quant::Int8KOrder, const Int8RowsBuffer&);
void int8_panel_gemm_generic(const Int8Rows&, int64_t, const uint8_t*, const float*, const float*, int, int64_t,
                             int64_t, float*, int64_t, bool);
void int8_panel_gemm_avx512(const Int8Rows&, int64_t, const uint8_t*, const float*, const float*, int, int64_t,
                            int64_t, float*, int64_t, bool);
}  // namespace kernels

}  // namespace eq::exec
