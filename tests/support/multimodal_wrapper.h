// A Qwen3.5-MoE multimodal checkpoint made from a text model (model_type
// qwen3_5_moe: the text model's config under text_config, its tensors under
// model.language_model., one small vision tensor beside), for the tests of
// readers and writers that must see through the wrapper.
#pragma once

#include <filesystem>

namespace eq::test {

// Writes the wrapper of `text_model` into `dir` (created; config.json and
// model.safetensors) and returns `dir`.
std::filesystem::path make_multimodal_wrapper(const std::filesystem::path& text_model, const std::filesystem::path& dir);

// The vision tensor the wrapper carries: no reader may take it for a decoder weight.
inline constexpr const char* kWrapperVisionTensor = "model.visual.blocks.0.attn.qkv.weight";

}  // namespace eq::test
