// Formats that store a matrix in a rotated basis,
//   W = diag(sv) · H_N · W' · H_K · diag(su),
// with blockwise Hadamard transforms H and sign vectors su, sv (the trellis
// formats). Their row's FormatTraits::rotated says how to reach W' and the
// rotation, so a batch kernel can rotate the activations instead of the
// weights (lib/exec/batch_mlp.cpp, run_rotated): only W' is decoded and the
// transforms act on rows x dim activations, not on every weight. The kernel
// asks these hooks and never which format it runs.
#pragma once

#include <cstdint>

#include "quant/format.h"

namespace eq::quant {

struct RotatedBasis {
  // The Hadamard block size along a dimension of `dim` elements: W' blocks
  // (and dequantize_block boundaries) start at multiples of it.
  int64_t (*block)(int64_t dim) = nullptr;
  // su [cols] and sv [rows], each +1 or -1.
  const int8_t* (*input_signs)(const PackedMatrix& m) = nullptr;
  const int8_t* (*output_signs)(const PackedMatrix& m) = nullptr;
  // x[r, :] := H x[r, :] for each of `rows` rows of `dim` values, in blocks of `block`.
  void (*hadamard_rows)(float* x, int64_t rows, int64_t dim, int64_t block) = nullptr;
  // W'[r0:r1, c0:c1] as fp32 16-row panels (the layout of
  // FormatTraits::dequantize_block); r0, r1 multiples of 16.
  void (*decode_panels)(const PackedMatrix& m, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* out) = nullptr;
  // The same block as int8 panels (quant/int8_panels.h layout: codes with an
  // offset of 128, per-(row, 32 k) scales, no biases); c0, c1 multiples of 32.
  void (*decode_int8_panels)(const PackedMatrix& m, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t* codes,
                             float* unit_scales) = nullptr;
};

}  // namespace eq::quant
