// Affine integer quantization with an error-minimizing search per group.
//
// Per group: candidate inverse scales (nmax + t) / (max - min) for t in
// [-2, 2] (a slightly coarser or finer grid than min/max can fit the bulk
// better), anchored at either end, each followed by a weighted least-squares
// fit of (scale, bias) to the codes it produced; then alternations (codes from
// parameters, parameters from codes) until the error stops falling. Every
// candidate is scored after rounding scale and bias to fp16 and re-deriving
// the codes, i.e. exactly as it will be decoded.
#include "quant/affine.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "core/numeric.h"
#include "quant/affine_group_ops.h"
#include "quant/cuda/cuda_gemm.h"
#include "quant/cuda/cuda_gemv.h"
#include "quant/cuda/cuda_quantize.h"
#include "quant/gemv.h"
#include "quant/int8_panels.h"
#include "quant/packed_stream.h"
#include "quant/quant_kernels.h"
#include "quant/quantize_common.h"

namespace eq::quant {

FormatTraits affine_row(int B, int G, std::string_view name, std::string_view description) {
  EQ_CHECK((B == 2 || B == 3 || B == 4 || B == 8) && G > 0 && G % (B == 3 ? 32 : 16) == 0,
           "affine row " + std::string(name) + ": " + std::to_string(B) + " bits in groups of " + std::to_string(G));
  return {.name = name,
          .family = "affine",
          .description = description,
          .weight_bits = B,
          .bits_per_weight = B + 32.0 / G,
          .group_size = G,
          .row_multiple = 1,
          .col_multiple = G,
          .parts = {{"qweight", PartRole::kCodes}, {"scales", PartRole::kScales}, {"biases", PartRole::kBiases}},
          .quantizer = quantize_affine,
          .dequantize = stream_dequantize,
          .matmul = stream_matmul,
          .part_specs_of = affine_part_specs,
          // 3-bit codes straddle words: the fp32 path (gemv_stream.cpp).
          .gemv = B == 3 ? &kStreamGemvFloat : &kStreamGemvInt8,
          .stream = &kAffineStream,
          .dequantize_block = stream_dequantize_block,
          // Integer batch path: codes of 2, 4 or 8 bits, scales per 32 k (int8_panels.h).
          .int8_panels = G % 32 != 0 ? nullptr
                         : B == 2    ? &kAffine2Int8Panels
                         : B == 4    ? &kAffine4Int8Panels
                         : B == 8    ? &kAffine8Int8Panels
                                     : nullptr,
          .device_quantizer = cuda::quantize_affine,
          .device_gemv = &cuda::kStreamDeviceGemv, .device_gemm = &cuda::kStreamDeviceGemm};
}

namespace {

float to_f16(float v) { return f16_to_f32(f32_to_f16(std::clamp(v, -65504.0f, 65504.0f))); }

struct Scored {
  float scale = 0.0f, bias = 0.0f, err = INFINITY;
};

using affine_ops::assign_codes;
using affine_ops::clamp_code;
using affine_ops::fit;

}  // namespace

AffineGroup search_affine_group(const float* w, const float* h, int n, int bits, uint8_t* codes) {
  const int nmax = (1 << bits) - 1;
  float lo = w[0], hi = w[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, w[i]);
    hi = std::max(hi, w[i]);
  }
  if (hi == lo) {  // constant (or all-zero) group: exact whenever the value is an fp16
    std::fill(codes, codes + n, uint8_t{0});
    return {0.0f, to_f16(lo)};
  }
  std::fill(codes, codes + n, uint8_t{0});  // kept where no candidate's error is finite
  std::vector<uint8_t> trial(static_cast<size_t>(n));
  Scored best;
  auto score = [&](float scale, float bias) {
    const float s = to_f16(scale), b = to_f16(bias);
    const float err = assign_codes(w, h, n, nmax, s, b, trial.data());
    if (err < best.err) {
      best = {s, b, err};
      std::copy(trial.begin(), trial.end(), codes);
    }
  };
  score((hi - lo) / static_cast<float>(nmax), lo);  // plain min/max
  // Alternate: parameters from the best codes, codes from the parameters,
  // until the error stops falling.
  auto alternate = [&](int max_iter) {
    std::vector<uint8_t> current(codes, codes + n);
    for (int iter = 0; iter < max_iter; ++iter) {
      const float before = best.err;
      float s, b;
      if (!fit(w, h, n, current.data(), &s, &b)) break;
      score(s, b);
      if (!(best.err < before)) break;
      current.assign(codes, codes + n);
    }
  };
  // Codes from inverse scales (nmax + t) / (max - min), anchored at the minimum
  // (at the maximum too when both_ends), each refit by weighted least squares.
  auto grid = [&](float t0, float t1, int steps, bool both_ends) {
    for (int i = 0; i <= steps; ++i) {
      const float iscale = (static_cast<float>(nmax) + t0 + (t1 - t0) * static_cast<float>(i) / steps) / (hi - lo);
      if (!(iscale > 0.0f)) continue;
      float s, b;
      for (int j = 0; j < n; ++j)
        trial[j] = static_cast<uint8_t>(clamp_code(static_cast<int>(std::nearbyint(iscale * (w[j] - lo))), nmax));
      if (fit(w, h, n, trial.data(), &s, &b)) score(s, b);
      if (!both_ends) continue;
      for (int j = 0; j < n; ++j)
        trial[j] = static_cast<uint8_t>(
            clamp_code(nmax - static_cast<int>(std::nearbyint(iscale * (hi - w[j]))), nmax));
      if (fit(w, h, n, trial.data(), &s, &b)) score(s, b);
    }
  };
  grid(-1.0f, 1.0f, 20, false);
  alternate(4);
  // A wider grid from both ends (an outlier on one side pulls the
  // other end's codes off the bulk), then alternation again: only ever lowers
  // the error of the search above.
  grid(-2.0f, 2.0f, 20, true);
  alternate(8);
  return {best.scale, best.bias};
}

namespace {
float unsigned_value(uint32_t code) { return static_cast<float>(code); }
DecodePanelFn unsigned_panel_decoder(const QuantKernels& k, int bits) { return k.decode_uint(bits); }
}  // namespace

const StreamCodes kUnsignedStreamCodes{.value = unsigned_value, .panel_decoder = unsigned_panel_decoder};
const StreamEncoding kAffineStream{.codes = &kUnsignedStreamCodes, .scale_kind = ScaleKind::kF16, .has_biases = true};

std::vector<PartSpec> affine_part_specs(const FormatTraits& f, int64_t rows, int64_t cols) {
  const int64_t B = f.weight_bits, G = f.group_size;
  return {{"qweight", DType::kU32, {cols * B / 32, rows}},
          {"scales", DType::kF16, {cols / G, rows}},
          {"biases", DType::kF16, {cols / G, rows}}};
}

QuantizedMatrix quantize_affine(const FormatTraits& format, const float* w, int64_t rows, int64_t cols,
                                const QuantizeOptions& options) {
  check_quantize_input(format, w, rows, cols, options);
  const int B = format.weight_bits, G = format.group_size;
  QuantizedMatrix out = allocate_quantized(format, rows, cols);
  uint32_t* qweight = reinterpret_cast<uint32_t*>(out.parts[0].bytes.data());
  uint16_t* scales = reinterpret_cast<uint16_t*>(out.parts[1].bytes.data());
  uint16_t* biases = reinterpret_cast<uint16_t*>(out.parts[2].bytes.data());
  std::vector<float> h(static_cast<size_t>(G)), group_scales(static_cast<size_t>(rows)),
      group_biases(static_cast<size_t>(rows));
  std::vector<uint8_t> codes(static_cast<size_t>(rows * G));
  const QuantKernels& kernels = active_quant_kernels();
  for (int64_t g = 0; g < cols / G; ++g) {
    group_importance(options.importance, g * G, G, h.data());
    kernels.search_affine_groups(w + g * G, cols, rows, h.data(), G, B, group_scales.data(), group_biases.data(),
                                 codes.data());
    for (int64_t n = 0; n < rows; ++n) {
      scales[g * rows + n] = f32_to_f16(group_scales[n]);
      biases[g * rows + n] = f32_to_f16(group_biases[n]);
      for (int i = 0; i < G; ++i) stream_put(qweight, rows, B, g * G + i, n, codes[n * G + i]);
    }
  }
  return out;
}

}  // namespace eq::quant
