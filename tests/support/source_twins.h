// Quantized twins of a float checkpoint, for testing that a quantized source
// is read exactly: an FP8 twin (DeepSeek-V3 release layout) and a float32 twin
// that holds exactly the values the FP8 twin stands for.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace eq::test {

// Reference decoders written from the bit fields of each format, independent
// of lib/core/numeric, so tests do not check the library against itself.
double fp8_e4m3_reference(uint8_t v);  // 0x7F / 0xFF: NaN
double fp8_e5m2_reference(uint8_t v);  // exponent 31: Inf (mantissa 0) or NaN
double e2m1_reference(uint8_t nibble);  // 0, 0.5, 1, 1.5, 2, 3, 4, 6, then negated (8 = -0)

// Whether the FP8 twin quantizes this tensor: every 2-D linear weight except
// embed_tokens, lm_head, norms and the router (".gate.weight"), as in the
// DeepSeek-V3 FP8 release.
bool fp8_twin_quantizes(const std::string& name, const std::vector<int64_t>& shape);

struct SourceTwins {
  std::filesystem::path fp8, f32;
  std::vector<std::string> quantized;  // names stored F8_E4M3 in the FP8 twin, sorted
};

// Reads the checkpoint folder `source` (config.json + safetensors, HF layout)
// and writes under `out`:
//  * fp8/: quantized tensors as F8_E4M3 per 128x128 block (scale_inv =
//    max|block| / 448, code = nearest-even E4M3 of w / scale_inv, scale 1 for
//    an all-zero block) plus F32 "<name>_scale_inv"; other tensors unchanged;
//    config.json gains quantization_config {fp8, e4m3, dynamic, [128, 128]}.
//  * f32/: every float tensor as F32, the quantized ones holding exactly the
//    dequantized values (float64 code * scale_inv, rounded to float); the
//    config.json unchanged.
// Other files (tokenizer, generation_config.json, ...) are copied as they are.
SourceTwins write_source_twins(const std::filesystem::path& source, const std::filesystem::path& out);

}  // namespace eq::test
