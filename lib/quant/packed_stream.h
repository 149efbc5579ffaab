// The "column bit stream" layout shared by fp4, mxfp4, nvfp4, nl4 and affine int
// (docs/formats.md): `qweight` is uint32 [K*bits/32, N]; the words of column n
// (qweight[0, n], qweight[1, n], ...) form a little-endian bit stream (word r
// holds stream bits 32r..32r+31, bit 0 = least significant) and the code of
// W[n, k] occupies stream bits [bits*k, bits*k + bits). For 4 bits: 8
// consecutive k per word, element k+i in nibble i, low nibble first. Scales
// (and biases) are [K/G, N], one per group of G along K.
//
// This file also holds the dequantize/matmul drivers for these formats: they
// decode 16-column panels with the active ISA's kernel and accumulate
// y = x W^T from them.
#pragma once

#include <cstdint>

#include "quant/format.h"
#include "quant/quant_kernels.h"

namespace eq::quant {

// How a stream format's codes become values. Each code family defines one
// (fp4_common.cpp: E2M1; nl4.cpp: a non-uniform grid; affine.cpp: unsigned
// integers) and its rows point at it through their StreamEncoding: the shared
// stream code and kernels only call and forward these (tables, not names),
// never ask which code it is.
struct StreamCodes {
  // A code's value before its group's scale (and bias): the scalar reference.
  float (*value)(uint32_t code) = nullptr;
  // The active ISA's 16-column panel decoder for codes of `bits` bits,
  DecodePanelFn (*panel_decoder)(const QuantKernels& kernels, int bits) = nullptr;
  // and the table it reads: 4-bit table codes, the 16 values by code (null:
  // codes are unsigned integers).
  const float* values = nullptr;
  // The int8 kernels (gemv, int8 panels) and the GPU decode kernels
  // (cuda/gemv_stream.cu) read code c as the unsigned byte
  // int8_bytes[c] (16 entries; null: c itself), the zero weight at byte
  // int8_offset, and multiply the group scale by int8_scale:
  //   value(c) = (int8_bytes[c] - int8_offset) * int8_scale, exactly.
  // Every int8_bytes[c] - int8_offset lies in [-127, 127]: AVX2 multiplies
  // them as signed bytes when a byte is too large for vpmaddubsw's int16 pairs.
  const uint8_t* int8_bytes = nullptr;
  int int8_offset = 0;
  float int8_scale = 1.0f;
};

// How the `scales` part is stored.
enum class ScaleKind : uint8_t {
  kF16,   // IEEE binary16
  kE8M0,  // 2^(byte - 127)
  kE4M3,  // fp8 E4M3 times the fp32 `tensor_scale` part
};

// What a stream format's row states beyond its bits and group size
// (FormatTraits::stream).
struct StreamEncoding {
  const StreamCodes* codes = nullptr;
  ScaleKind scale_kind = ScaleKind::kF16;
  bool has_biases = false;        // affine: part 2 = biases fp16 [K/G, N]
  bool has_tensor_scale = false;  // nvfp4: part 2 = tensor_scale fp32 [1]
};

// A stream format's layout, as the drivers and kernels read it.
struct StreamLayout {
  int bits = 4;
  int group = 32;
  const StreamCodes* codes = nullptr;
  ScaleKind scale_kind = ScaleKind::kF16;
  bool has_biases = false;
  bool has_tensor_scale = false;
};

// The layout of a stream format: bits and group from its row, the rest from
// the row's StreamEncoding (an internal error for a row without one).
StreamLayout stream_layout_of(const FormatTraits& format);

// Bit-stream access for quantizers and the scalar reference.
inline uint32_t stream_get(const uint32_t* qweight, int64_t n_cols, int bits, int64_t k, int64_t n) {
  const int64_t bit = bits * k;
  const int64_t word = bit >> 5;
  const int shift = static_cast<int>(bit & 31);
  uint64_t v = qweight[word * n_cols + n] >> shift;
  if (shift + bits > 32) v |= static_cast<uint64_t>(qweight[(word + 1) * n_cols + n]) << (32 - shift);
  return static_cast<uint32_t>(v) & ((1u << bits) - 1u);
}

inline void stream_put(uint32_t* qweight, int64_t n_cols, int bits, int64_t k, int64_t n, uint32_t code) {
  const int64_t bit = bits * k;
  const int64_t word = bit >> 5;
  const int shift = static_cast<int>(bit & 31);
  qweight[word * n_cols + n] |= code << shift;
  if (shift + bits > 32) qweight[(word + 1) * n_cols + n] |= code >> (32 - shift);
}

// Decoded scale of group g, column n (tensor scale folded in for nvfp4).
float stream_scale(const PackedMatrix& m, const StreamLayout& layout, int64_t g, int64_t n);
// Bias of group g, column n (0 when the format has none).
float stream_bias(const PackedMatrix& m, const StreamLayout& layout, int64_t g, int64_t n);

// Scalar reference dequantization straight from the documented layout (no
// kernels): the definition the SIMD kernels are tested against.
void stream_dequantize_reference(const PackedMatrix& m, float* out);

// FormatTraits::dequantize / matmul for every stream format (kernels chosen by
// eq::active_isa() at each call).
void stream_dequantize(const PackedMatrix& m, float* out);
void stream_matmul(const PackedMatrix& m, const float* x, int64_t m_rows, float* y, bool accumulate);
// FormatTraits::dequantize_block: rows at multiples of 16, columns at multiples of the group.
void stream_dequantize_block(const PackedMatrix& m, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* out);

// Lookup tables: E8M0 byte -> float, E4M3 byte -> float.
const float* e8m0_table();
const float* e4m3_table();

}  // namespace eq::quant
