// A small random qwen3_moe checkpoint (float32; by default a byte-level
// vocabulary, so the bundled corpus calibrates it) with any expert shape: for
// behaviour that depends on the shape of the expert matrices, without a real
// model of it. Given a tokenizer folder it carries that tokenizer instead,
// with a vocabulary of the tokenizer's size, as a real checkpoint does.
#pragma once

#include <cstdint>
#include <filesystem>

namespace eq::test {

struct RandomMoeSpec {
  int64_t hidden = 64;
  int64_t intermediate = 32;  // of each routed expert
  int64_t experts = 4, top_k = 2, layers = 1;
  uint32_t seed = 1;
  // A folder with tokenizer.json (or .zst) and tokenizer_config.json, e.g.
  // tests/data/tokenizers/llama2: copied into the checkpoint (tokenizer.json
  // decompressed, as checkpoints ship it); vocab_size becomes its size.
  std::filesystem::path tokenizer;
};

// Writes config.json and model.safetensors (and the tokenizer files) into
// `dir` (created); returns `dir`.
std::filesystem::path write_random_moe(const std::filesystem::path& dir, const RandomMoeSpec& spec);

}  // namespace eq::test
