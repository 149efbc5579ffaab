// What the export tests share: a quick profile of a checkpoint (through the
// command line, usage and REAP only) and the float32 forward of a checkpoint
// with some experts masked in the router.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "prune/selection.h"

namespace eq::test {

// profile.json of `model` from 256 tokens of the bundled calibration text
// (--no-sensitivity), made once per model and test binary.
std::filesystem::path quick_profile(const std::filesystem::path& model);

// The logits [tokens, vocab] of the checkpoint at `model` on a fixed byte
// text, with every MoE layer's experts outside `kept` masked in the router
// (`kept` empty: no mask).
std::vector<float> forward_logits(const std::filesystem::path& model, const std::vector<prune::LayerChoice>& kept);

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace eq::test
