// Where a quantizer runs: the CPU (the reference) or a CUDA GPU. One option,
// QuantizeOptions::device, chooses for every caller (pack, profile's
// sensitivity, the benches); FormatTraits::quantize() dispatches on it, so no
// caller branches on the device.
#pragma once

#include <string>
#include <string_view>

namespace eq::quant {

enum class Device : unsigned char { kCpu, kCuda };

// "cpu" | "cuda"; throws eq::Error (invalid input, exit 2) otherwise.
Device parse_device(std::string_view name);
// "cpu" | "cuda" (what the pack-time prediction records its rates for).
std::string_view device_name(Device d);

// Throws eq::Error (unsupported, exit 4) with one line saying why when `d`
// cannot run here: a build without EQ_CUDA, or no usable CUDA GPU. Callers
// check once, before any work.
void require_device(Device d);

}  // namespace eq::quant
