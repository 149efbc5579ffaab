#include "export_support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "model/forward.h"
#include "model/moe_block.h"
#include "test_support.h"

namespace eq::test {

std::filesystem::path quick_profile(const std::filesystem::path& model) {
  static std::map<std::string, std::filesystem::path> made;
  const std::string key = model.string();
  if (auto it = made.find(key); it != made.end()) return it->second;
  const auto dir = temp_dir("export-profile");
  const auto out = dir / (model.filename().string() + ".profile.json");
  std::string log;
  const std::string cmd = binary() + " profile --model " + key + " --calib " +
                          (data_dir() / "corpus" / "calib_small.txt.zst").string() +
                          " --max-tokens 256 --ctx 128 --no-sensitivity -o " + out.string();
  EXPECT_EQ(run_command(cmd, &log), 0) << cmd << "\n" << log;
  made[key] = out;
  return out;
}

std::vector<float> forward_logits(const std::filesystem::path& model, const std::vector<prune::LayerChoice>& kept) {
  auto m = model::Model::open(model.string());
  const model::ModelConfig& c = m->config();
  for (const prune::LayerChoice& l : kept) {
    std::vector<uint8_t> allowed(static_cast<size_t>(c.num_experts), 0);
    for (int64_t e : l.kept) allowed[static_cast<size_t>(e)] = 1;
    m->set_moe_block(l.layer, std::make_unique<model::ReferenceMoeBlock>(c, m->weights(), std::move(allowed)));
  }
  const std::string text =
      "def route(tokens, experts):\n    # the router keeps the best k\n    return sorted(experts)[:k]\n"
      "The quick brown fox jumps over the lazy dog.";
  std::vector<int32_t> tokens;
  for (unsigned char ch : text) tokens.push_back(static_cast<int32_t>(ch) % static_cast<int32_t>(c.vocab_size));
  const int64_t n = static_cast<int64_t>(tokens.size());
  model::KvCache cache = m->new_cache(1, n);
  const auto logits = m->forward(tokens, 1, n, cache);
  return std::vector<float>(logits.data(), logits.data() + n * c.vocab_size);
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    m = std::max(m, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  return m;
}

}  // namespace eq::test
