// What fp4_gG, mxfp4 and nvfp4 share on the CPU: all three store E2M1 codes
// (e2m1_search.h: rounding and the scale searches, shared with the GPU) in
// the column bit-stream layout (packed_stream.h) and differ only in how a
// group's scale is represented.
#pragma once

#include <cstdint>
#include <functional>

#include "quant/e2m1_search.h"
#include "quant/format.h"
#include "quant/packed_stream.h"
#include "quant/quant_kernels.h"

namespace eq::quant {

// E2M1 codes in the column bit stream (StreamCodes): value kE2M1Values[code];
// the int8 kernels read them as doubled values (2 * value + 12, a byte).
extern const StreamCodes kE2M1StreamCodes;
// The rows' encodings: fp16 scales (fp4_gG), E8M0 scales (mxfp4), E4M3
// scales times an fp32 tensor scale (nvfp4).
extern const StreamEncoding kFp4Stream, kMxfp4Stream, kNvfp4Stream;

// Quantizes W in the column bit-stream layout with E2M1 codes: for each
// output column n and group g, choose_scale(w, h, g, n) returns the decoded
// scale (and stores its encoding); codes are then the nearest E2M1 values.
// Parts: [0] = qweight, the rest filled by choose_scale.
void quantize_e2m1_stream(const float* w, int64_t rows, int64_t cols, int group, const QuantizeOptions& options,
                          QuantizedMatrix& out,
                          const std::function<float(const float* wg, const float* h, int64_t g, int64_t n)>& choose_scale);

}  // namespace eq::quant
