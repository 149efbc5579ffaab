// Formats that take a model's routed experts from the checkpoint bit for bit.
// A checkpoint whose experts are already quantized (gpt-oss: MXFP4 blocks and
// scales) has a format that stores exactly those bits (FormatTraits's import
// hook, which pack uses). Against the model the checkpoint stands for (its
// dequantized weights) that format has no error, so the profile measures it
// as exactly 0, offers it as a candidate and makes it the standard class
// (docs/policy.md, "Quantized sources").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace eq::io {
class SourceTensors;
}
namespace eq::quant {
struct FormatTraits;
}

namespace eq::profile {

struct Policy;

// Whether `format` imports every projection of expert e of `layer` as stored.
bool imports_expert_losslessly(const quant::FormatTraits& format, const model::ModelConfig& c,
                               const io::SourceTensors& src, int64_t layer, int64_t e);

// The registered formats that import every routed expert of every MoE layer
// losslessly, in registry order (empty for float and FP8 sources).
std::vector<std::string> lossless_source_formats(const model::ModelConfig& c, const io::SourceTensors& src);

// Puts the first of `formats` in the standard class and every one of them
// first among the candidates (once). Returns whether the policy changed.
bool adopt_lossless_formats(Policy& policy, const std::vector<std::string>& formats);

}  // namespace eq::profile
