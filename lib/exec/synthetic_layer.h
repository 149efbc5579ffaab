// Synthetic MoE layers at real shapes for benchmarks (bench/moe_layer): a
// PackedLayer whose experts are split among formats by a mix, built without
// quantizing hundreds of millions of weights. Two fills:
//   random codes  every code part is random bits and every side part a valid
//                 value (fp16/fp8/fp32 scales of a plausible size, ±1 trellis
//                 signs, finite bf16): the kernels do exactly the work of a
//                 real pack of that shape (timing does not depend on values)
//   quantized     each expert's weights come from an ExpertSource and go
//                 through the format's quantize() (small real layers)
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "exec/bit_group.h"

namespace eq::exec {

struct LayerShape {
  std::string name;
  int64_t experts = 0, top_k = 0, hidden = 0, intermediate = 0;
  // Shared experts of the same intermediate size, run for every token: the
  // layer stores them as experts [experts, experts + shared_experts) and a
  // call routes every token to them besides its top_k (with_shared_experts).
  int64_t shared_experts = 0;
  // gpt-oss experts: gate/up/down biases (small random values) and the
  // clamped SwiGLU, as the packed model runs them.
  bool biased_clamped = false;
};

// qwen3-30b-a3b (128, top-8, 2048, 768), mixtral-8x7b (8, top-2, 4096, 14336),
// e512 (512, top-10, 2048, 512), deepseek-v3 (256, top-8, 7168, 2048, one
// shared expert), glm-4.5 (160, top-8, 5120, 1536, one shared expert),
// gpt-oss-120b (128, top-4, 2880, 2880, biased clamped experts),
// qwen3-next-80b (512, top-10, 2048, 512, one shared expert: e512's routed
// experts plus the shared one), qwen3-235b-a22b (128, top-8, 4096, 1536),
// qwen3.5-397b-a17b (512, top-10, 4096, 1024, one shared expert of the
// routed experts' size, as its config is read here).
std::span<const LayerShape> preset_layer_shapes();
const LayerShape* find_layer_shape(std::string_view name);

struct FormatShare {
  const quant::FormatTraits* format = nullptr;
  double fraction = 1.0;
};
struct FormatMix {
  std::string name;
  std::vector<FormatShare> shares;  // fractions sum to 1
};

// Uniform bf16, int8_row, fp4_g32, trellis2/3/4, and mixes of 8-, 4- and
// 2-bit experts: mix842 = 15% int8_row / 60% fp4_g32 / 25% int2_g32, mix842t = the
// same with trellis2 as the 2-bit format; trellis2/3/4_lut and mix842tl the
// same with the LUT-code trellis formats.
std::span<const FormatMix> preset_format_mixes();
// A preset's name, or any format name (quant registry) for that format alone.
const FormatMix* find_format_mix(std::string_view name);

// Expert e's float32 weights: gate and up [I, H], down [H, I], row-major.
using ExpertSource =
    std::function<void(int64_t expert, std::vector<float>& gate, std::vector<float>& up, std::vector<float>& down)>;

// Owns the packed bytes its PackedLayer points into.
class SyntheticLayer {
 public:
  const PackedLayer& layer() const { return layer_; }
  // Packed bytes of all experts.
  uint64_t packed_bytes() const;
  // "random codes", "quantized", or "quantized (random codes: F ...)" naming the
  // slow-to-quantize formats (FormatTraits::slow_quantizer) filled at random.
  const std::string& fill() const { return fill_; }

 private:
  friend std::unique_ptr<SyntheticLayer> make_synthetic_layer(const LayerShape&, const FormatMix&, uint64_t,
                                                              const ExpertSource&);
  struct FreeBytes {
    void operator()(uint8_t* p) const;
  };
  PackedLayer layer_;
  std::vector<std::unique_ptr<uint8_t, FreeBytes>> storage_;  // one buffer per group
  std::string fill_;
};

// Experts are assigned to the mix's formats by a seeded shuffle, in
// proportion to the fractions (each format's count rounded, the last takes
// the rest). Without `source` every format gets random codes; with it, every
// format except trellis (whose quantizer runs ~1.7e5 weights/s) is quantized
// from it. Filling runs on eq::default_pool().
std::unique_ptr<SyntheticLayer> make_synthetic_layer(const LayerShape& shape, const FormatMix& mix, uint64_t seed,
                                                     const ExpertSource& source = {});

// Router output for `tokens` tokens: top_k distinct expert ids per token,
// uniformly random over [0, num_experts).
std::vector<int32_t> random_expert_ids(int64_t num_experts, int64_t top_k, int64_t tokens, uint64_t seed);
// `ids` (top_k per token) with the shape's shared experts appended to every
// token: top_k + shared_experts ids per token.
std::vector<int32_t> with_shared_experts(const std::vector<int32_t>& ids, const LayerShape& shape);

}  // namespace eq::exec
