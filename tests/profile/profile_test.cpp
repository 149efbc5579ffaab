// Profiling on the bundled tinymoe: merge of halves equals the whole, trace
// round trip, the profile feeds pack (allocation + importance sidecar), and
// the reference captures (--hidden / --router-logits) agree.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/build_info.h"
#include "io/safetensors.h"
#include "io/text_file.h"
#include "model/config.h"
#include "plan/allocation.h"
#include "plan/importance.h"
#include "plan/profile_inputs.h"
#include "core/thread_pool.h"
#include "profile/heatmap.h"
#include "profile/profile.h"
#include "profile/run.h"
#include "profile/trace.h"
#include "test_support.h"

namespace eq::profile {
namespace {

std::string tiny() { return (test::data_dir() / "tinymoe").string(); }

ProfileRequest calib_request(const std::string& path) {
  ProfileRequest r;
  r.model_path = tiny();
  r.source = SourceKind::kCalib;
  r.input_path = path;
  r.policy = default_policy();
  r.sensitivity = false;
  return r;
}

// Writes bytes [begin, end) of the small calibration text to a file.
std::string slice_file(const std::string& text, size_t begin, size_t end, const std::string& name) {
  const auto p = test::temp_dir("slice") / name;
  std::ofstream(p, std::ios::binary).write(text.data() + begin, std::streamsize(end - begin));
  return p.string();
}

void expect_near_rel(double a, double b, const std::string& what) {
  EXPECT_LE(std::abs(a - b), 1e-12 * std::max({1.0, std::abs(a), std::abs(b)})) << what << ": " << a << " vs " << b;
}

TEST(Profile, MergeOfHalvesEqualsWhole) {
  const std::string text = io::read_file_bytes((test::data_dir() / "corpus/calib_small.txt.zst").string());
  // Cut at a window boundary so both runs see the same 512-token windows.
  // Three profiles of 32k tokens take a minute instrumented; 8k cover the same code.
  const size_t limit = std::min<size_t>(text.size(), (eq::built_with_sanitizers() ? 16 : 64) * 512);
  const size_t half = (limit / 2 / 512) * 512;
  const std::string a = slice_file(text, 0, half, "a.txt"), b = slice_file(text, half, limit, "b.txt");
  const std::string whole = slice_file(text, 0, limit, "whole.txt");
  const auto dir = test::temp_dir("merge");
  Profile pa = run_profile(calib_request(a)), pb = run_profile(calib_request(b));
  write_profile(pa, (dir / "a.json").string());
  write_profile(pb, (dir / "b.json").string());
  const Profile pw = run_profile(calib_request(whole));
  // Through the files, as `profile --merge` does (energies via the F64 sidecars).
  Profile merged = merge_profiles({read_profile((dir / "a.json").string()), read_profile((dir / "b.json").string())},
                                  {"a.json", "b.json"});
  reclassify(merged, 0, 0);
  ASSERT_EQ(merged.stats.layers.size(), pw.stats.layers.size());
  for (size_t li = 0; li < pw.stats.layers.size(); ++li) {
    const LayerStats &m = merged.stats.layers[li], &w = pw.stats.layers[li];
    EXPECT_EQ(m.tokens, w.tokens);
    expect_near_rel(m.routed_output_energy, w.routed_output_energy, "routed_output_energy");
    for (size_t e = 0; e < w.experts.size(); ++e) {
      const ExpertStats &x = m.experts[e], &y = w.experts[e];
      EXPECT_EQ(x.tokens, y.tokens) << "layer " << li << " expert " << e;
      expect_near_rel(x.gate_sum, y.gate_sum, "gate_sum");
      expect_near_rel(x.prob_sum, y.prob_sum, "prob_sum");
      expect_near_rel(x.saliency_sum, y.saliency_sum, "saliency_sum");
      expect_near_rel(x.out_norm_sum, y.out_norm_sum, "out_norm_sum");
      expect_near_rel(x.gated_out_energy, y.gated_out_energy, "gated_out_energy");
      EXPECT_EQ(x.gate_max, y.gate_max);
      // Read back, an expert routed in neither half has no energies (it is
      // absent from both sidecars); the whole run holds zeros for it.
      if (x.energy_in.empty() || x.energy_mid.empty()) {
        EXPECT_EQ(y.tokens, 0) << "layer " << li << " expert " << e << ": routed, but no energies read back";
        continue;
      }
      for (size_t i = 0; i < y.energy_in.size(); ++i) expect_near_rel(x.energy_in[i], y.energy_in[i], "energy_in");
      for (size_t i = 0; i < y.energy_mid.size(); ++i) expect_near_rel(x.energy_mid[i], y.energy_mid[i], "energy_mid");
    }
  }
  // Same statistics -> same threshold classification.
  for (size_t li = 0; li < pw.classification.layers.size(); ++li)
    for (size_t e = 0; e < pw.classification.layers[li].size(); ++e)
      EXPECT_EQ(merged.classification.layers[li][e].cls, pw.classification.layers[li][e].cls);
}

// The fingerprint's full hashes are taken as the pass converts each tensor:
// the same hashes as a separate read of the whole checkpoint, with only the
// tensors the pass never converts (lm_head; the sensitivity measurement
// converts every expert, routed or not) read again.
TEST(Profile, FullHashesTakenAsThePassReadsEqualASeparateRead) {
  ProfileRequest r = calib_request((test::data_dir() / "corpus/calib_small.txt.zst").string());
  r.max_tokens = 2 * 512;
  r.sensitivity = true;
  r.policy.candidates = {"int8_row", "fp4_g32", "int4_g64"};
  r.policy.class_format[2] = "int4_g64";
  r.policy.proxies.clear();
  ProfileRunInfo info;
  const Profile p = run_profile(r, &info);
  const plan::ModelFingerprint separate = plan::fingerprint_model(tiny());
  ASSERT_EQ(p.model.tensors.size(), separate.tensors.size());
  uint64_t total = 0;
  const auto ckpt = io::Checkpoint::open(tiny());
  for (size_t i = 0; i < separate.tensors.size(); ++i) {
    EXPECT_EQ(p.model.tensors[i].name, separate.tensors[i].name);
    ASSERT_TRUE(p.model.tensors[i].full.has_value()) << p.model.tensors[i].name;
    EXPECT_EQ(*p.model.tensors[i].full, *separate.tensors[i].full) << p.model.tensors[i].name;
    total += ckpt->info(separate.tensors[i].name).nbytes();
  }
  EXPECT_EQ(info.bytes_hashed_as_read + info.bytes_hashed_after, total);
  const auto cfg = model::load_config(tiny());
  const uint64_t lm_head = uint64_t(cfg.vocab_size) * uint64_t(cfg.hidden_size) * 2;  // bf16
  EXPECT_LE(info.bytes_hashed_after, lm_head) << "only what the pass never converts is read again";
  EXPECT_GT(info.bytes_hashed_as_read, total / 2);
}

TEST(Profile, TraceRoundTripGivesTheSameUsage) {
  const auto dir = test::temp_dir("trace");
  ProfileRequest r = calib_request((test::data_dir() / "corpus/calib_small.txt.zst").string());
  r.max_tokens = 8 * 512;
  r.save_trace = (dir / "trace.zst").string();
  ProfileRunInfo info;
  const Profile full = run_profile(r, &info);
  EXPECT_GT(info.trace_raw_bytes, info.trace_compressed_bytes);
  ASSERT_TRUE(is_trace_file(r.save_trace));
  ProfileRequest t;
  t.model_path = tiny();
  t.source = SourceKind::kRouterLogits;
  t.input_path = r.save_trace;
  t.policy = default_policy();
  const Profile usage = run_profile(t);
  EXPECT_FALSE(usage.stats.has_outputs);
  EXPECT_TRUE(usage.sensitivity.empty());
  for (size_t li = 0; li < full.stats.layers.size(); ++li) {
    EXPECT_EQ(usage.stats.layers[li].tokens, full.stats.layers[li].tokens);
    for (size_t e = 0; e < full.stats.layers[li].experts.size(); ++e) {
      EXPECT_EQ(usage.stats.layers[li].experts[e].tokens, full.stats.layers[li].experts[e].tokens);
      EXPECT_EQ(usage.stats.layers[li].experts[e].gate_sum, full.stats.layers[li].experts[e].gate_sum);
    }
  }
}

TEST(Profile, FeedsPackAllocationAndImportance) {
  const auto dir = test::temp_dir("feed");
  ProfileRequest r = calib_request((test::data_dir() / "corpus/calib_small.txt.zst").string());
  r.max_tokens = 4 * 512;
  r.sensitivity = true;
  r.policy.candidates = {"int8_row", "fp4_g32", "int2_g64"};
  r.policy.class_format[2] = "int2_g64";
  r.policy.proxies.clear();
  r.policy.max_samples = 16;
  r.policy.min_samples = 4;
  Profile p = run_profile(r);
  const std::string path = (dir / "profile.json").string();
  write_profile(p, path);
  const plan::ProfileInputs in = plan::read_profile_inputs(path);
  const model::ModelConfig c = model::load_config(tiny());
  plan::check_allocation(in.allocation, c, "profile");
  ASSERT_FALSE(in.importance_file.empty());
  const auto imp = plan::ImportanceFile::open(in.importance_file, c.hidden_size, c.moe_intermediate_size);
  const auto v = imp->load(0, 0, plan::ImportanceSide::kIn);
  if (p.stats.layers[0].experts[0].tokens > 0) {
    ASSERT_EQ(int64_t(v.size()), c.hidden_size);
    EXPECT_NEAR(v[0], p.stats.layers[0].experts[0].energy_in[0], 1e-3 * std::abs(v[0]) + 1e-6);
  }
  // Sensitivity ordering: 8-bit beats 2-bit on every measured expert.
  for (const auto& row : p.sensitivity.layers)
    for (const auto& s : row)
      if (s.source != SampleSource::kNone) {
        EXPECT_LT(s.rel_mse[0], s.rel_mse[2]);
      }
  // Reading back reproduces the document.
  const Profile q = read_profile(path);
  EXPECT_EQ(profile_to_json(q)["layers"].dump(), profile_to_json(p)["layers"].dump());
}

// The reference captures of the shared models: routing the captured router
// inputs through our router reproduces the captured logits' top-k, and the
// routed output energy equals that of the captured MoE outputs.
TEST(Profile, HiddenAndRouterLogitsAgreeWithReferenceCaptures) {
  EQ_REQUIRE_SHARED();
  const auto model = test::shared_dir() / "models/tinymoe";
  const std::string ref = (model / "reference/reference.safetensors").string();
  ProfileRequest h;
  h.model_path = model.string();
  h.source = SourceKind::kHidden;
  h.input_path = ref;
  h.policy = default_policy();
  h.sensitivity = false;
  const Profile ph = run_profile(h);
  ProfileRequest l = h;
  l.source = SourceKind::kRouterLogits;
  const Profile pl = run_profile(l);
  const auto file = io::SafetensorsFile::open(ref);
  for (size_t li = 0; li < ph.stats.layers.size(); ++li) {
    int64_t differ = 0;
    for (size_t e = 0; e < ph.stats.layers[li].experts.size(); ++e)
      differ += std::abs(ph.stats.layers[li].experts[e].tokens - pl.stats.layers[li].experts[e].tokens);
    EXPECT_LE(differ, 2) << "layer " << li;  // near-tied logits only (float32 router vs the reference's)
    const std::vector<float> out = file->view(*file->find("moe_output." + std::to_string(li))).to_f32();
    double energy = 0;
    for (float v : out) energy += double(v) * double(v);
    EXPECT_NEAR(ph.stats.layers[li].routed_output_energy, energy, 1e-3 * energy) << "layer " << li;
  }
}

}  // namespace
}  // namespace eq::profile

namespace eq::profile {
namespace {

// Statistics are bit-identical for any thread count (each expert's sums are
// added in token order by one task).
TEST(Profile, DeterministicForAnyThreadCount) {
  ProfileRequest r = calib_request((test::data_dir() / "corpus/calib_small.txt.zst").string());
  r.max_tokens = 4 * 512;
  set_num_threads(1);
  const Profile one = run_profile(r);
  set_num_threads(2);
  const Profile two = run_profile(r);
  set_num_threads(0);
  auto strip = [](const Profile& p) {
    auto j = profile_to_json(p);
    j.erase("timing");
    j.erase("checksum");  // covers the timing
    j["calibration"].erase("slices");
    return j.dump();
  };
  EXPECT_EQ(strip(one), strip(two));
  for (size_t li = 0; li < one.stats.layers.size(); ++li)
    for (size_t e = 0; e < one.stats.layers[li].experts.size(); ++e)
      EXPECT_EQ(one.stats.layers[li].experts[e].energy_in, two.stats.layers[li].experts[e].energy_in);
}

TEST(Profile, HeatmapIsSvgWithOneCellPerExpert) {
  ProfileRequest r = calib_request((test::data_dir() / "corpus/calib_small.txt.zst").string());
  r.max_tokens = 512;
  const Profile p = run_profile(r);
  const std::string svg = heatmap_svg(p);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  size_t cells = 0;
  for (size_t at = svg.find("<title>layer"); at != std::string::npos; at = svg.find("<title>layer", at + 1)) ++cells;
  EXPECT_EQ(cells, p.stats.layers.size() * size_t(p.stats.num_experts));
}

}  // namespace
}  // namespace eq::profile
