// The computed Gaussian code of the trellis formats and the bit-stream
// windows that address it. The layout is frozen (docs/formats.md, "trellis").
//
// Code "1MAD" (QTIP, Tseng et al. 2024, Algorithm 1; constants as in QTIP's
// lib/codebook/bitshift.py decode_1mad): for a 16-bit state s,
//   x = (s * 34038481 + 76625530) mod 2^32
//   y = byte0(x) + byte1(x) + byte2(x) + byte3(x) - 510      (an integer in [-510, 510])
//   code(s) = y / 147.800537109375                          (~ N(0, 1): 147.8 = std of y)
// We store the factor 1/147.800537109375 folded into each row's scale, so a
// decoder computes value = float(y) * scales[n] and never divides.
//
// Code "LUT" (formats trellis{2,3,4}_lut, designed for CPU decode: 64-entry
// byte tables looked up with one vpermb each, 64 weights per vpdpbusd instead
// of 1MAD's 16):
//   a = (s ^ (s >> 10)) & 63               state bits [0, 6) xor [10, 16)
//   b = (byte(A[a]) ^ (s >> 6)) & 63       byte(): the two's complement byte; bits [6, 12)
//   y = A[a] + B[b]                        (an integer in [-106, 106])
//   code(s) = y / 30.747967412             (~ N(0, 1): 30.75 = std of y over all states)
// A, B: 64 Gaussian quantiles (sigma 22, rounded) in fixed shuffled orders.
// Every state bit reaches the value, and feeding A's own value into B's
// index makes it more than a sum of two functions of bit fields (that sum
// measured 3% worse MSE on N(0,1); this code measures the same as 1MAD, and
// as the same construction with 128-entry tables: docs/formats.md).
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

#include "core/host_device.h"

namespace eq::quant::trellis {

inline constexpr int kStateBits = 16;  // L: the state is a 16-bit window of the stream
inline constexpr int kTileDim = 16;    // tiles are 16 x 16 weights
inline constexpr int kTileSize = kTileDim * kTileDim;
inline constexpr uint32_t k1madMul = 34038481u;
inline constexpr uint32_t k1madAdd = 76625530u;
inline constexpr double k1madStd = 147.800537109375;

// y(s) of the 1MAD code (integer before normalization); the GPU decode
// kernel (quant/cuda/trellis_gemv.cu, code_float) computes the same sum of
// bytes with one dp4a.
EQ_HOST_DEVICE inline int code_1mad(uint32_t state) {
  uint32_t x = state * k1madMul + k1madAdd;
  uint32_t pairs = (x & 0x00FF00FFu) + ((x >> 8) & 0x00FF00FFu);  // byte0+byte1 | byte2+byte3
  return static_cast<int>((pairs & 0xFFFFu) + (pairs >> 16)) - 510;
}

// The value tables of code "LUT" (frozen: docs/formats.md lists them).
inline constexpr int kLutEntries = 64;
extern const int8_t kLutA[kLutEntries];
extern const int8_t kLutB[kLutEntries];
inline constexpr double kLutStd = 30.747967412;

// y(s) of the LUT code over tables A and B (kLutA, kLutB, or a copy of them
// in GPU memory: quant/cuda/trellis_gemv.cu, code_float, runs these lines).
EQ_HOST_DEVICE inline int code_lut_with(const int8_t* A, const int8_t* B, uint32_t state) {
  const uint32_t a = (state ^ (state >> 10)) & 63u;
  const uint32_t b = (static_cast<uint8_t>(A[a]) ^ (state >> 6)) & 63u;
  return A[a] + B[b];
}
inline int code_lut(uint32_t state) { return code_lut_with(kLutA, kLutB, state); }

// The code of a trellis format (its row's FormatTraits::code): 1MAD or LUT.
enum class Code : uint8_t { k1mad, kLut };
// y(s) of either code; the std of y over all states (the code's normalization);
// the bias that makes y + bias a sum of unsigned bytes (1MAD: 4 hash bytes,
// LUT: one byte) for the vpdpbusd kernels.
inline int code_value(Code code, uint32_t state) { return code == Code::kLut ? code_lut(state) : code_1mad(state); }
inline double code_std(Code code) { return code == Code::kLut ? kLutStd : k1madStd; }
inline int code_bias(Code code) { return code == Code::kLut ? 128 : 510; }

// float(y(s)) for all 2^16 states (computed once).
const float* code_table_1mad();
const float* code_table(Code code);

// Bytes of one tile: 256 weights * K bits.
inline constexpr int tile_bytes(int bits) { return kTileSize * bits / 8; }

// State t of a tail-biting tile stream: the 16 bits ending with symbol t,
// read most significant first, wrapping around to the end of the stream.
// (Reference implementation; kernels compute the same with wider loads.)
inline uint32_t tile_state(const uint8_t* tile, int bits, int t) {
  const int total = kTileSize * bits;
  uint32_t state = 0;
  for (int i = 0; i < kStateBits; ++i) {
    int pos = ((t + 1) * bits - kStateBits + i + total) % total;
    state = (state << 1) | ((tile[pos >> 3] >> (7 - (pos & 7))) & 1u);
  }
  return state;
}

// All 256 states of a tile, tile_state's windows with one 3-byte read each:
// the stream with its last 8 bytes in front, so every window is a plain
// big-endian read (the window of state t starts at bit 48 + (t+1)K). The
// scalar decoders of both codes use it.
inline void tile_states(const uint8_t* tile, int bits, uint32_t* states) {
  const int nbytes = tile_bytes(bits);
  uint8_t ext[8 + 128 + 8] = {};
  std::memcpy(ext, tile + nbytes - 8, 8);
  std::memcpy(ext + 8, tile, static_cast<size_t>(nbytes));
  for (int t = 0; t < kTileSize; ++t) {
    const int start = 48 + (t + 1) * bits;
    const uint8_t* b = ext + (start >> 3);
    const uint32_t word = (uint32_t{b[0]} << 16) | (uint32_t{b[1]} << 8) | b[2];
    states[t] = (word >> (8 - (start & 7))) & 0xFFFFu;
  }
}

}  // namespace eq::quant::trellis
