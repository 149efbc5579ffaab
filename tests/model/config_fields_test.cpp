#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "model/config.h"
#include "model/config_fields.h"
#include "model/field_table.h"

namespace eq {
namespace {

struct Pair {
  int first = 0;
  double second = 0;
};

TEST(ConfigFields, MemberCountIsTheAggregatesMembers) {
  EXPECT_EQ(model::member_count<Pair>(), 2u);
  EXPECT_EQ(model::member_count<model::YarnScaling>(), 6u);
  EXPECT_EQ(model::member_count<model::LinearAttentionConfig>(), 6u);
  EXPECT_EQ(model::member_count<model::Activation>(), 3u);
}

TEST(ConfigFields, AMissingOrRepeatedRowIsCaught) {
  using model::field;
  using model::unlisted;
  EXPECT_TRUE(model::covers_every_member<Pair>(std::tuple{field("first", &Pair::first), unlisted(&Pair::second)}));
  EXPECT_FALSE(model::covers_every_member<Pair>(std::tuple{field("first", &Pair::first)}));
  EXPECT_FALSE(model::covers_every_member<Pair>(std::tuple{field("first", &Pair::first), field("again", &Pair::first)}));
  EXPECT_TRUE(model::covers_every_member<model::ModelConfig>(model::field_rows(std::type_identity<model::ModelConfig>{})));
}

TEST(ConfigFields, FieldsListEveryRowUnderItsName) {
  const auto c = model::parse_config(nlohmann::json::parse(R"({"model_type":"qwen3_moe","vocab_size":256,
    "hidden_size":64,"num_hidden_layers":3,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,
    "num_experts":8,"num_experts_per_tok":2,"moe_intermediate_size":32,"intermediate_size":128,
    "norm_topk_prob":true,"rms_norm_eps":1e-6,"rope_theta":5000.0,"decoder_sparse_step":1,"mlp_only_layers":[1]})"),
                                     "cfg.json");
  const auto fields = c.fields();
  std::map<std::string, std::string> by_name(fields.begin(), fields.end());
  EXPECT_EQ(by_name.size(), fields.size());  // no name twice
  // 51 members: 45 listed alone, 3 structs of 6 + 6 + 3 rows, 3 not compared.
  EXPECT_EQ(fields.size(), 60u);
  EXPECT_EQ(fields.front(), (std::pair<std::string, std::string>{"model_type", "qwen3_moe"}));
  EXPECT_EQ(by_name["num_hidden_layers"], "3");
  EXPECT_EQ(by_name["moe_layers"], "101");
  EXPECT_EQ(by_name["norm_topk_prob"], "true");
  EXPECT_EQ(by_name["rms_norm_eps"], "9.9999999999999995e-07");
  EXPECT_EQ(by_name["rope_yarn_beta_fast"], "32");
  EXPECT_EQ(by_name["expert_activation"], "0");
  EXPECT_EQ(by_name["expert_activation_limit"], "7");
  EXPECT_EQ(by_name["linear_conv_kernel_dim"], "0");
  EXPECT_EQ(by_name["attention_window"], "");
  EXPECT_EQ(by_name.count("source_quant"), 0u);

  // A changed member changes its row only.
  auto other = c;
  other.rope_yarn.factor = 4;
  const auto changed = other.fields();
  ASSERT_EQ(changed.size(), fields.size());
  std::set<std::string> differ;
  for (size_t i = 0; i < fields.size(); ++i)
    if (changed[i] != fields[i]) differ.insert(fields[i].first);
  EXPECT_EQ(differ, (std::set<std::string>{"rope_yarn_factor"}));
}

}  // namespace
}  // namespace eq
