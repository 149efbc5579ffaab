// The checks every architecture test makes on its small random checkpoint
// (arch_test.cpp, arch_deepseek_glm_test.cpp, arch_gpt_oss_test.cpp): the
// forward's logits against the test's own float64 implementation, and
// prefill + chunk + one-token decode against one prefill, bit-identical for 1
// and 2 threads.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "io/safetensors.h"
#include "model/forward.h"
#include "test_support.h"

namespace eq::model::arch_check {

// A random checkpoint's tensors: name -> (shape, float32 values).
using Weights = std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>>;

// Fills Weights with offset + scale · N(0, 1) tensors from one seeded stream
// (the order of add() calls fixes every value).
class RandomWeights {
 public:
  explicit RandomWeights(uint32_t seed) : rng_(seed) {}
  void add(const std::string& name, std::vector<int64_t> shape, float scale, float offset = 0) {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = offset + scale * normal_(rng_);
    weights[name] = {std::move(shape), std::move(v)};
  }
  Weights weights;

 private:
  std::mt19937 rng_;
  std::normal_distribution<float> normal_{0.0f, 1.0f};
};

// config.json and model.safetensors (every tensor F32) in a fresh temporary
// folder named after `tag`; returns the folder.
inline std::string write_float32_checkpoint(const Weights& w, const nlohmann::json& config, const std::string& tag) {
  const auto dir = eq::test::temp_dir("arch-" + tag);
  std::ofstream(dir / "config.json") << config.dump(2);
  std::vector<io::TensorToWrite> t;
  for (const auto& [name, sv] : w)
    t.push_back({name, DType::kF32, sv.first,
                 std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(sv.second.data()),
                                          sv.second.size() * sizeof(float))});
  io::write_safetensors((dir / "model.safetensors").string(), t);
  return dir.string();
}

inline std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return t;
}

// Logits [T][vocab] of one sequence, computed in float64 from the same weights.
using Float64Forward = std::function<std::vector<std::vector<double>>(const std::vector<int32_t>&)>;

// 2 sequences of 21 random tokens (seed 11) in one batch; every logit within
// 1e-4 of the float64 forward, relative to the largest logit (at least 1).
inline void expect_logits_match_float64(Model& model, int64_t vocab, const Float64Forward& ref,
                                        const std::string& name) {
  const int64_t B = 2, T = 21;
  const std::vector<int32_t> tokens = random_tokens(B * T, vocab, 11);
  KvCache cache = model.new_cache(B, T);
  const auto logits = model.forward(tokens, B, T, cache);
  double max_diff = 0, max_mag = 0;
  for (int64_t b = 0; b < B; ++b) {
    const auto want = ref(std::vector<int32_t>(tokens.begin() + b * T, tokens.begin() + (b + 1) * T));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t v = 0; v < vocab; ++v) {
        max_diff = std::max(max_diff, std::abs(logits[(b * T + t) * vocab + v] - want[t][v]));
        max_mag = std::max(max_mag, std::abs(want[t][v]));
      }
  }
  std::printf("[%s] max |logit - float64| = %.3g (logits up to %.3g)\n", name.c_str(), max_diff, max_mag);
  EXPECT_LE(max_diff, 1e-4 * std::max(1.0, max_mag));
}

// T random tokens (seed 5): a prefill of P, then `chunk` tokens at once (0:
// none), then one at a time, against one prefill of all T (within 1e-4); and
// one prefill bit-identical for 1 and 2 threads.
inline void expect_decode_matches_prefill_and_threads_agree(Model& model, int64_t vocab, int64_t T, int64_t P,
                                                            int64_t chunk, const std::string& name) {
  const std::vector<int32_t> tokens = random_tokens(T, vocab, 5);
  KvCache full_cache = model.new_cache(1, T);
  const auto full = model.forward(tokens, 1, T, full_cache);

  KvCache cache = model.new_cache(1, T);
  auto inc = model.forward(std::span(tokens).first(static_cast<size_t>(P)), 1, P, cache);
  if (chunk > 0) {
    const auto more = model.forward(std::span(tokens).subspan(static_cast<size_t>(P), static_cast<size_t>(chunk)), 1,
                                    chunk, cache);
    inc.insert(inc.end(), more.begin(), more.end());
  }
  for (int64_t t = P + chunk; t < T; ++t) {
    const auto step = model.forward(std::span(tokens).subspan(static_cast<size_t>(t), 1), 1, 1, cache);
    inc.insert(inc.end(), step.begin(), step.end());
  }
  ASSERT_EQ(inc.size(), full.size());
  double d = 0;
  for (size_t i = 0; i < full.size(); ++i) d = std::max(d, static_cast<double>(std::abs(full[i] - inc[i])));
  std::printf("[%s] prefill + chunk + decode vs one prefill: max %.3g\n", name.c_str(), d);
  EXPECT_LE(d, 1e-4) << "prefill+decode vs one prefill";

  set_num_threads(1);
  KvCache c1 = model.new_cache(1, T);
  const auto one = model.forward(tokens, 1, T, c1);
  set_num_threads(2);
  KvCache c2 = model.new_cache(1, T);
  const auto two = model.forward(tokens, 1, T, c2);
  set_num_threads(0);
  EXPECT_EQ(one, two);
}

}  // namespace eq::model::arch_check
