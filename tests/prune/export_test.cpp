// expertquant export: the export computes what the source computes with the
// same experts masked in the router; what it does not cut it copies byte for
// byte; what it refuses it refuses before writing anything.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "export_support.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/expert_axis.h"
#include "model/open_checkpoint.h"
#include "prune/config_text.h"
#include "prune/export.h"
#include "support/multimodal_wrapper.h"
#include "test_support.h"

namespace eq::prune {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path tinymoe() { return test::data_dir() / "tinymoe"; }

ExportSummary export_model(const fs::path& model, const fs::path& out, SelectionOptions sel, uint64_t shard_size = 4ull << 30) {
  ExportRequest rq;
  rq.model_path = model.string();
  rq.profile_path = test::quick_profile(model).string();
  rq.out_path = out.string();
  rq.selection = sel;
  rq.shard_size = shard_size;
  return run_export(rq);
}

// Every tensor of the export is the source's, cut to the kept experts: the
// same bytes (never converted), the same dtype, the kept rows in order.
void expect_tensors_cut_from_source(const fs::path& source, const fs::path& exported, const ExportSummary& s) {
  const auto src = model::open_checkpoint(source.string());
  const auto out = model::open_checkpoint(exported.string());
  const model::ModelConfig& oc = out.config;
  ASSERT_EQ(oc.num_experts, s.selection.experts_after);
  std::map<int64_t, const LayerChoice*> choice;
  for (const LayerChoice& l : s.selection.layers) choice[l.layer] = &l;
  int64_t per_expert_out = 0, stacked = 0;
  for (const std::string& name : out.checkpoint->tensor_names()) {
    const io::TensorInfo& o = out.checkpoint->info(name);
    const auto ob = out.checkpoint->view(name).bytes();
    const model::ExpertAxis axis = model::expert_axis(oc, name);
    std::string source_name = name;
    if (axis.kind == model::ExpertAxisKind::kOneExpert) {
      ++per_expert_out;
      source_name = name.substr(0, axis.expert_pos) +
                    std::to_string(choice.at(axis.layer)->kept[static_cast<size_t>(axis.expert)]) +
                    name.substr(axis.expert_pos + axis.expert_len);
    }
    ASSERT_TRUE(src.checkpoint->has(source_name)) << name;
    const io::TensorInfo& i = src.checkpoint->info(source_name);
    const auto ib = src.checkpoint->view(source_name).bytes();
    EXPECT_EQ(o.dtype, i.dtype) << name;
    if (axis.kind != model::ExpertAxisKind::kStacked) {
      EXPECT_EQ(o.shape, i.shape) << name;
      EXPECT_TRUE(ob.size() == ib.size() && std::memcmp(ob.data(), ib.data(), ob.size()) == 0) << name;
      continue;
    }
    ++stacked;
    const auto& kept = choice.at(axis.layer)->kept;
    ASSERT_EQ(o.shape[0], static_cast<int64_t>(kept.size())) << name;
    EXPECT_TRUE(std::equal(o.shape.begin() + 1, o.shape.end(), i.shape.begin() + 1)) << name;
    const size_t row = ib.size() / static_cast<size_t>(i.shape[0]);
    ASSERT_EQ(ob.size(), row * kept.size()) << name;
    for (size_t r = 0; r < kept.size(); ++r)
      EXPECT_EQ(std::memcmp(ob.data() + r * row, ib.data() + static_cast<size_t>(kept[r]) * row, row), 0)
          << name << " row " << r;
  }
  EXPECT_GT(stacked, 0) << "at least the routers are cut";
  // The dropped experts' own tensors are gone, the kept ones all there.
  int64_t per_expert_in = 0;
  for (const std::string& name : src.checkpoint->tensor_names())
    if (model::expert_axis(src.config, name).kind == model::ExpertAxisKind::kOneExpert) ++per_expert_in;
  EXPECT_EQ(per_expert_out * s.selection.experts_before, per_expert_in * s.selection.experts_after);
  // config.json: the expert count set back gives the source's text exactly.
  const std::string key(src.config.arch->text_config);
  EXPECT_EQ(set_expert_count(read_text(exported / "config.json"), key, s.selection.experts_before, "export"),
            read_text(source / "config.json"));
  // Every other file of the source folder, byte for byte; no folder copied.
  for (const auto& e : fs::directory_iterator(source)) {
    const std::string f = e.path().filename().string();
    if (!e.is_regular_file() || is_replaced_file(f)) {
      EXPECT_FALSE(fs::exists(exported / f) && !e.is_regular_file()) << f;
      continue;
    }
    EXPECT_EQ(read_text(exported / f), read_text(e.path())) << f;
  }
  // The index names every tensor once, in the shard that holds it.
  const auto index = nlohmann::json::parse(read_text(exported / "model.safetensors.index.json"));
  EXPECT_EQ(index["weight_map"].size(), out.checkpoint->tensor_names().size());
}

// Returns the export's folder.
fs::path check_export_matches_masked_source(const fs::path& model, const SelectionOptions& sel, uint64_t shard_size) {
  const fs::path out = test::temp_dir("export") / model.filename();
  const ExportSummary s = export_model(model, out, sel, shard_size);
  EXPECT_LT(s.selection.experts_after, s.selection.experts_before);
  EXPECT_GE(s.selection.experts_after, s.selection.top_k);
  expect_tensors_cut_from_source(model, out, s);
  const std::vector<float> exported = test::forward_logits(out, {});
  const std::vector<float> masked = test::forward_logits(model, s.selection.layers);
  const std::vector<float> whole = test::forward_logits(model, {});
  const double diff = test::max_abs_diff(exported, masked);
  std::printf("%s: %lld -> %lld experts, max |logit(export) - logit(masked source)| = %.3g, vs unmasked %.3g\n",
              model.filename().c_str(), (long long)s.selection.experts_before, (long long)s.selection.experts_after,
              diff, test::max_abs_diff(exported, whole));
  EXPECT_LE(diff, 1e-5);
  // The masks matter: the unmasked source computes something else.
  EXPECT_GT(test::max_abs_diff(exported, whole), 1e-3);
  return out;
}

TEST(ExportForward, TinymoeMatchesMaskedSource) {
  SelectionOptions sel;
  sel.prune_fraction = 0.25;
  // A small shard limit: the output is sharded, and its index must be right.
  check_export_matches_masked_source(tinymoe(), sel, 1ull << 20);
}

TEST(ExportForward, TinymoeByUsageKeepsTheMostUsed) {
  SelectionOptions sel;
  sel.keep_experts = 8;
  sel.rank_by = RankBy::kUsage;
  const fs::path out = test::temp_dir("export-usage") / "x";
  const ExportSummary s = export_model(tinymoe(), out, sel);
  ASSERT_EQ(s.selection.experts_after, 8);
  const auto prof = nlohmann::json::parse(read_text(test::quick_profile(tinymoe())));
  for (const LayerChoice& l : s.selection.layers) {
    ASSERT_EQ(l.kept.size(), 8u);
    const auto& experts = prof["layers"][static_cast<size_t>(&l - s.selection.layers.data())]["experts"];
    double min_kept = 1, max_dropped = 0, dropped = 0;
    for (int64_t e : l.kept) min_kept = std::min(min_kept, experts[e]["share"].get<double>());
    for (int64_t e : l.dropped) {
      max_dropped = std::max(max_dropped, experts[e]["share"].get<double>());
      dropped += experts[e]["share"].get<double>();
    }
    EXPECT_GE(min_kept, max_dropped) << "layer " << l.layer;
    EXPECT_NEAR(l.dropped_usage_share, dropped, 1e-12);
    EXPECT_TRUE(std::is_sorted(l.kept.begin(), l.kept.end()));
  }
}

class SharedExport : public ::testing::TestWithParam<std::string> {};

TEST_P(SharedExport, MatchesMaskedSource) {
  EQ_REQUIRE_SHARED();
  SelectionOptions sel;
  sel.prune_fraction = 0.25;
  check_export_matches_masked_source(test::shared_dir() / "models" / GetParam(), sel, 4ull << 30);
}

// A multimodal wrapper (model_type qwen3_5_moe: the text model's config under
// text_config, its tensors under model.language_model., a vision tower
// beside): the expert count changes under text_config, the stored names keep
// their prefix, the vision tensor is copied.
TEST(ExportForward, MultimodalWrapperMatchesMaskedSource) {
  EQ_REQUIRE_SHARED();
  const fs::path text_model = test::shared_dir() / "models" / "qwen3_5_moe-small";
  const fs::path dir =
      test::make_multimodal_wrapper(text_model, test::temp_dir("export-wrapper") / "qwen3_5_moe-wrapper");
  SelectionOptions sel;
  sel.keep_experts = 8;
  const fs::path out = check_export_matches_masked_source(dir, sel, 4ull << 30);
  auto exported = io::Checkpoint::open(out.string());
  EXPECT_TRUE(exported->has(test::kWrapperVisionTensor));
  EXPECT_TRUE(exported->has("model.language_model.layers.0.mlp.experts.7.gate_proj.weight"));
  EXPECT_FALSE(exported->has("model.language_model.layers.0.mlp.experts.8.gate_proj.weight"));
  EXPECT_EQ(nlohmann::json::parse(read_text(out / "config.json"))["text_config"]["num_experts"], 8);
}

INSTANTIATE_TEST_SUITE_P(Models, SharedExport,
                         ::testing::Values("qwen3moe-small", "qwen3_next-small", "qwen3_5_moe-small", "deepseek_v3-small",
                                           "deepseek_v3-small-fp8", "glm4_moe-small", "gpt_oss-small",
                                           "gpt_oss-small-mxfp4"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace eq::prune
