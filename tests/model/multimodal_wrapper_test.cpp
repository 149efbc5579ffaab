// A Qwen3.5-MoE multimodal checkpoint (model_type qwen3_5_moe: the text
// model's config under text_config, its tensors under model.language_model.,
// a vision tower beside) is read as its text model: made here from
// ../shared/models/qwen3_5_moe-small by moving the config and renaming the
// tensors, it must give that model's logits bit for bit.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/forward.h"
#include "model/summary.h"
#include "support/multimodal_wrapper.h"
#include "test_support.h"

namespace eq::model {
namespace {

namespace fs = std::filesystem;

TEST(MultimodalWrapper, ReadsTheTextModel) {
  EQ_REQUIRE_SHARED();
  const fs::path text_model = test::shared_dir() / "models" / "qwen3_5_moe-small";
  const fs::path wrapper = test::make_multimodal_wrapper(text_model, test::temp_dir("qwen3_5_moe-wrapper"));
  auto a = Model::open(text_model.string());
  auto b = Model::open(wrapper.string());
  EXPECT_EQ(b->config().model_type, "qwen3_5_moe");
  auto fa = a->config().fields(), fb = b->config().fields();
  fa.erase(fa.begin());  // model_type
  fb.erase(fb.begin());
  EXPECT_EQ(fa, fb);
  const int64_t B = 2, T = 24;
  std::vector<int32_t> tokens(B * T);
  for (int64_t i = 0; i < B * T; ++i) tokens[i] = static_cast<int32_t>((i * 29 + 3) % 256);
  KvCache ca = a->new_cache(B, T), cb = b->new_cache(B, T);
  const auto la = a->forward(tokens, B, T, ca);
  const auto lb = b->forward(tokens, B, T, cb);
  EXPECT_TRUE(la == lb);
  const auto summary = summarize_checkpoint(wrapper.string(), false);
  EXPECT_NE(summary.dump().find("qwen3_5_moe"), std::string::npos);
}

TEST(MultimodalWrapper, MissingTextConfigIsNamed) {
  nlohmann::json j = {{"model_type", "qwen3_5_moe"}};
  try {
    parse_config(j, "cfg.json");
    FAIL() << "accepted a wrapper without text_config";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("text_config"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace eq::model
