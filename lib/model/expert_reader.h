// Routed experts as the model sees them, whatever layout the architecture
// stores them in (Architecture::expert_storage): the one place that knows the
// layouts. Every consumer (the reference MLP through load_expert, the pack
// plan and packer, the config checks, the packed executor's biases) reads
// expert e's projection p of layer l as a float32 [out, in] matrix with an
// optional [out] bias, and never looks at the storage kind itself.
//
// Layouts (names relative to "model.layers.<l>.<moe>.experts."):
//  * kPerExpert: "<e>.<proj>.weight" [out, in]; optional "<e>.<proj>.bias" [out].
//  * kStackedFusedInterleaved: "gate_up_proj" and "down_proj", applied as
//    x @ W, so a plain (or fp8) tensor is [E, in, out] ([E, H, 2I], [E, I, H]);
//    an mxfp4 tensor (blocks + scales, read through io::SourceTensors) is
//    already [E, out, in] ([E, 2I, H], [E, H, I]). Gate and up are
//    interleaved: gate = even output index, up = odd (columns of the plain
//    form, rows of the mxfp4 form). Optional "gate_up_proj_bias" [E, 2I]
//    (same interleave) and "down_proj_bias" [E, H]. The stored encoding, not
//    the shape, says which orientation a tensor has (H may equal 2I).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace eq::io {
class SourceTensors;
}

namespace eq::model {

// A (logical) source tensor holding layer l's routed experts, with the shape
// the config implies for it.
struct ExpertTensor {
  std::string name;
  std::vector<int64_t> shape;
  bool bias = false;  // optional: present = used
};
// Weights first, then biases. `src` decides the orientation of a stacked
// tensor (by its encoding) when present.
std::vector<ExpertTensor> routed_expert_tensors(const ModelConfig& c, const io::SourceTensors& src, int64_t layer);

// [out, in] of projection p: gate and up [I, H], down [H, I].
// The logical source tensor that holds expert e's projection p: its own
// matrix, or the layer's stacked tensor (for hashing what is read).
std::string expert_source_tensor(const ModelConfig& c, int64_t layer, int64_t e, Proj p);
int64_t expert_rows(const ModelConfig& c, Proj p);
int64_t expert_cols(const ModelConfig& c, Proj p);

// Expert e's projection p as float32 [out, in] into dst[rows * cols],
// dequantized exactly; throws eq::Error naming the checkpoint and tensor when
// it is missing or has another shape than the config implies.
void read_expert_weight(const ModelConfig& c, const io::SourceTensors& src, int64_t layer, int64_t e, Proj p,
                        float* dst);
// Bytes the checkpoint stores for that matrix (codes and scales; no bias).
uint64_t expert_stored_bytes(const ModelConfig& c, const io::SourceTensors& src, int64_t layer, int64_t e, Proj p);

// Bytes the reader holds besides the float32 result while reading one expert
// matrix of projection p (a stacked layout decodes the expert's whole slice
// of the stored tensor first): for memory bounds. 0 for kPerExpert.
uint64_t expert_read_scratch_bytes(const ModelConfig& c, const io::SourceTensors& src, int64_t layer, Proj p);

// Projection p's biases of every expert of the layer, de-interleaved:
// [E * out] (expert-major), or empty when the checkpoint has none. A layout
// with biases for some experts only is refused naming the missing tensor.
std::vector<float> read_layer_expert_bias(const ModelConfig& c, const io::SourceTensors& src, int64_t layer, Proj p);

// Whether expert e's projection p is stored as MXFP4 blocks and scales, and
// its release-layout bytes in [out, in] row order (gate/up rows of a fused
// tensor de-interleaved): blocks [rows, cols/32, 16], scales [rows, cols/32].
// Input for FormatTraits::import_mxfp4.
bool expert_is_mxfp4(const ModelConfig& c, const io::SourceTensors& src, int64_t layer, int64_t e, Proj p);
struct ExpertMxfp4 {
  std::vector<uint8_t> blocks, scales;
  int64_t rows = 0, cols = 0;
};
ExpertMxfp4 read_expert_mxfp4(const ModelConfig& c, const io::SourceTensors& src, int64_t layer, int64_t e, Proj p);

}  // namespace eq::model
