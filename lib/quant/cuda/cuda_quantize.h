// The GPU quantizers (lib/quant/cuda/*.cu, built with -DEQ_CUDA=ON): each
// computes exactly what its CPU quantizer computes (same scales, same codes,
// same tie-breaking; docs/design.md, "GPU quantizers") and returns the same
// parts. The rows reach them through FormatTraits::device_quantizer. In a
// build without CUDA, unavailable.cpp defines them to throw.
#pragma once

#include <cstdint>
#include <string>

#include "quant/format.h"

namespace eq::quant::cuda {

// Empty when a CUDA GPU can run the quantizers; otherwise one line saying why
// (built without EQ_CUDA, no driver, no GPU).
std::string unavailable_reason();

QuantizedMatrix quantize_fp4(const FormatTraits& format, const float* w, int64_t rows, int64_t cols,
                             const QuantizeOptions& options);
QuantizedMatrix quantize_mxfp4(const FormatTraits& format, const float* w, int64_t rows, int64_t cols,
                               const QuantizeOptions& options);
QuantizedMatrix quantize_nvfp4(const FormatTraits& format, const float* w, int64_t rows, int64_t cols,
                               const QuantizeOptions& options);
QuantizedMatrix quantize_affine(const FormatTraits& format, const float* w, int64_t rows, int64_t cols,
                                const QuantizeOptions& options);
QuantizedMatrix quantize_trellis(const FormatTraits& format, const float* w, int64_t rows, int64_t cols,
                                 const QuantizeOptions& options);

// The trellis tile search on the GPU (trellis_viterbi.cu): for each of `count`
// tiles, targets and weights [count][256] in tile sequence order, the
// tail-biting two-pass Viterbi of Viterbi::run_tail_biting with L = 16,
// K = bits over the code table `codes` (65536 values); states [count][256].
void search_tiles(int bits, const float* codes, int64_t count, const float* target, const float* weight,
                  uint16_t* states);

}  // namespace eq::quant::cuda
