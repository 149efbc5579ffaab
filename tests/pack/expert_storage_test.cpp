// Routed experts stored as stacked, fused, interleaved tensors
// (ExpertStorage::kStackedFusedInterleaved: "<moe>.experts.gate_up_proj",
// "down_proj" and their biases), read through lib/model/expert_reader.h by
// every consumer. No registered architecture uses the layout yet, so these
// tests hold a row of their own: qwen3_moe's with the stacked storage, and
// write twins of data/tinymoe in that layout (bf16 as transformers saves it,
// and mxfp4 blocks + scales as released), checked against the per-expert
// original, against the MXFP4 bytes, and through pack and the packed executor.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "exec/packed_model.h"
#include "exec/packed_moe_block.h"
#include "io/quantized_source.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/expert_reader.h"
#include "model/routing.h"
#include "model/weights.h"
#include "pack/packer.h"
#include "profile/lossless_source.h"
#include "profile/policy.h"
#include "quant/format.h"
#include "support/source_twins.h"
#include "test_support.h"

namespace eq {
namespace {

namespace fs = std::filesystem;
using model::Proj;

fs::path tinymoe() { return test::data_dir() / "tinymoe"; }

// qwen3_moe's row with the stacked, fused, interleaved expert storage.
const model::Architecture& stacked_row() {
  static const model::Architecture row = [] {
    model::Architecture a = *model::find_architecture("qwen3_moe");
    a.expert_storage = model::ExpertStorage::kStackedFusedInterleaved;
    return a;
  }();
  return row;
}

// The config.json of `folder` read as the stacked architecture.
model::ModelConfig stacked_config(const fs::path& folder) {
  model::ModelConfig c = model::load_config(folder.string());
  c.arch = &stacked_row();
  return c;
}

std::vector<float> normal(size_t n, uint32_t seed, float sigma) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed, int lo = 0, int hi = 255) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = static_cast<uint8_t>(d(rng));
  return v;
}

enum class Form { kBf16, kMxfp4 };

// A stacked twin of tinymoe: every non-expert tensor as stored; per MoE
// layer gate_up_proj / down_proj either as transformers saves them (bf16,
// x @ W: [E, H, 2I] with gate = even columns, [E, I, H]; the per-expert
// original's bits rearranged) or as the MXFP4 release (random codes and
// scales, [E, 2I, H/32, 16] + [E, 2I, H/32] and [E, H, I/32, 16] +
// [E, H, I/32], gate = even rows); with `biases`, random F32
// gate_up_proj_bias [E, 2I] and down_proj_bias [E, H].
struct Twin {
  fs::path dir;
  int64_t H = 0, I = 0, E = 0;
  std::map<int64_t, std::vector<float>> gate_up_bias, down_bias;          // by layer
  std::map<int64_t, std::vector<uint8_t>> blocks[2], scales[2];            // [0] gate_up, [1] down (mxfp4)
};

Twin write_twin(const fs::path& dir, Form form, bool biases) {
  fs::create_directories(dir);
  const model::ModelConfig c = model::load_config(tinymoe().string());
  auto ckpt = io::Checkpoint::open(tinymoe().string());
  Twin t;
  t.dir = dir;
  t.H = c.hidden_size, t.I = c.moe_intermediate_size, t.E = c.num_experts;
  const int64_t H = t.H, I = t.I, E = t.E;
  std::vector<std::vector<uint8_t>> owned;  // bytes of the tensors written below
  std::vector<io::TensorToWrite> out;
  for (const std::string& name : ckpt->tensor_names()) {
    if (name.find(".mlp.experts.") != std::string::npos) continue;
    const io::TensorInfo& info = ckpt->info(name);
    out.push_back({name, info.dtype, info.shape, ckpt->view(name).bytes()});
  }
  auto add = [&](const std::string& name, DType dt, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
    owned.push_back(std::move(bytes));
    out.push_back({name, dt, std::move(shape), {owned.back().data(), owned.back().size()}});
  };
  owned.reserve(16 * size_t(c.num_layers));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".mlp.experts.";
    if (form == Form::kBf16) {
      std::vector<uint16_t> gu(size_t(E * H * 2 * I)), dn(size_t(E * I * H));
      for (int64_t e = 0; e < E; ++e) {
        auto raw = [&](Proj pr) {
          return reinterpret_cast<const uint16_t*>(ckpt->view(model::expert_weight_name(c, l, e, pr)).data);
        };
        const uint16_t *g = raw(Proj::kGate), *u = raw(Proj::kUp), *d = raw(Proj::kDown);
        for (int64_t j = 0; j < I; ++j)
          for (int64_t h = 0; h < H; ++h) {
            gu[size_t((e * H + h) * 2 * I + 2 * j)] = g[j * H + h];
            gu[size_t((e * H + h) * 2 * I + 2 * j + 1)] = u[j * H + h];
          }
        for (int64_t h = 0; h < H; ++h)
          for (int64_t i = 0; i < I; ++i) dn[size_t((e * I + i) * H + h)] = d[h * I + i];
      }
      auto bytes = [](const std::vector<uint16_t>& v) {
        std::vector<uint8_t> b(v.size() * 2);
        std::memcpy(b.data(), v.data(), b.size());
        return b;
      };
      add(p + "gate_up_proj", DType::kBF16, {E, H, 2 * I}, bytes(gu));
      add(p + "down_proj", DType::kBF16, {E, I, H}, bytes(dn));
    } else {
      const int64_t rows[2] = {2 * I, H}, cols[2] = {H, I};
      const char* names[2] = {"gate_up_proj", "down_proj"};
      for (int k = 0; k < 2; ++k) {
        const int64_t G = cols[k] / 32;
        const uint32_t seed = uint32_t(100 * l + 10 * k);
        t.blocks[k][l] = random_bytes(size_t(E * rows[k] * G * 16), seed);
        // Scales near 2^-4..2^2: finite, never the NaN byte 0xFF.
        t.scales[k][l] = random_bytes(size_t(E * rows[k] * G), seed + 1, 123, 129);
        add(p + names[k] + "_blocks", DType::kU8, {E, rows[k], G, 16}, t.blocks[k][l]);
        add(p + names[k] + "_scales", DType::kU8, {E, rows[k], G}, t.scales[k][l]);
      }
    }
    if (biases) {
      t.gate_up_bias[l] = normal(size_t(E * 2 * I), uint32_t(7 + l), 0.5f);
      t.down_bias[l] = normal(size_t(E * H), uint32_t(70 + l), 0.5f);
      auto bytes = [](const std::vector<float>& v) {
        std::vector<uint8_t> b(v.size() * 4);
        std::memcpy(b.data(), v.data(), b.size());
        return b;
      };
      add(p + "gate_up_proj_bias", DType::kF32, {E, 2 * I}, bytes(t.gate_up_bias[l]));
      add(p + "down_proj_bias", DType::kF32, {E, H}, bytes(t.down_bias[l]));
    }
  }
  io::write_safetensors((dir / "model.safetensors").string(), out);
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(tinymoe() / "config.json"));
  if (form == Form::kMxfp4) cfg["quantization_config"] = {{"quant_method", "mxfp4"}};
  std::ofstream(dir / "config.json") << cfg.dump(2);
  return t;
}

// Rows `first`, `first + step`, ... of one expert's release-layout MXFP4
// matrix ([rows_total, G] blocks of 16 bytes and scales), as the test's own
// de-interleaving.
struct MxRows {
  std::vector<uint8_t> blocks, scales;
};
MxRows mx_rows(const Twin& t, int k, int64_t layer, int64_t e, int64_t first, int64_t step, int64_t rows) {
  const int64_t total = k == 0 ? 2 * t.I : t.H, G = (k == 0 ? t.H : t.I) / 32;
  const uint8_t* b = t.blocks[k].at(layer).data() + size_t(e * total * G * 16);
  const uint8_t* s = t.scales[k].at(layer).data() + size_t(e * total * G);
  MxRows m;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t o = first + r * step;
    m.blocks.insert(m.blocks.end(), b + o * G * 16, b + (o + 1) * G * 16);
    m.scales.insert(m.scales.end(), s + o * G, s + (o + 1) * G);
  }
  return m;
}

// Expert e's projection of the MXFP4 twin as the test knows it: the
// de-interleaved rows (gate even, up odd).
MxRows expected_mx(const Twin& t, int64_t layer, int64_t e, Proj p) {
  if (p == Proj::kDown) return mx_rows(t, 1, layer, e, 0, 1, t.H);
  return mx_rows(t, 0, layer, e, p == Proj::kUp ? 1 : 0, 2, t.I);
}

// (1) The bf16 stacked twin reads exactly as the per-expert original, and
// its biases de-interleaved.
TEST(ExpertStorage, StackedTwinLoadsThePerExpertMatricesAndBiases) {
  const fs::path dir = test::temp_dir("stacked_bf16");
  const Twin t = write_twin(dir / "twin", Form::kBf16, /*biases=*/true);
  const model::ModelConfig orig_cfg = model::load_config(tinymoe().string());
  const model::ModelConfig cfg = stacked_config(t.dir);
  auto orig_ckpt = io::Checkpoint::open(tinymoe().string());
  auto twin_ckpt = io::Checkpoint::open(t.dir.string());
  const io::SourceTensors orig_src(*orig_ckpt, orig_cfg.source_quant), twin_src(*twin_ckpt, cfg.source_quant);
  EXPECT_NO_THROW(model::check_against_checkpoint(cfg, twin_src));
  const model::WeightStore orig(orig_src, false), twin(twin_src, false);
  for (int64_t l : {0, 3})
    for (int64_t e : {0, 5, 31}) {
      const model::MlpWeights a = model::load_expert(orig, orig_cfg, l, e), b = model::load_expert(twin, cfg, l, e);
      const std::string at = "layer " + std::to_string(l) + " expert " + std::to_string(e);
      ASSERT_EQ(a.gate->shape, b.gate->shape) << at;
      ASSERT_EQ(a.down->shape, b.down->shape) << at;
      for (auto [x, y] : {std::pair{a.gate, b.gate}, {a.up, b.up}, {a.down, b.down}})
        EXPECT_EQ(0, std::memcmp(x->data.data(), y->data.data(), x->data.size() * sizeof(float))) << at;
      EXPECT_FALSE(a.gate_bias || a.up_bias || a.down_bias) << at;
      ASSERT_TRUE(b.gate_bias && b.up_bias && b.down_bias) << at;
      const std::vector<float>& gu = t.gate_up_bias.at(l);
      for (int64_t j = 0; j < t.I; ++j) {
        EXPECT_EQ(b.gate_bias->data[size_t(j)], gu[size_t(e * 2 * t.I + 2 * j)]) << at << " gate bias " << j;
        EXPECT_EQ(b.up_bias->data[size_t(j)], gu[size_t(e * 2 * t.I + 2 * j + 1)]) << at << " up bias " << j;
      }
      for (int64_t h = 0; h < t.H; ++h)
        EXPECT_EQ(b.down_bias->data[size_t(h)], t.down_bias.at(l)[size_t(e * t.H + h)]) << at << " down bias " << h;
      for (Proj p : {Proj::kGate, Proj::kUp, Proj::kDown})
        EXPECT_EQ(model::expert_stored_bytes(cfg, twin_src, l, e, p),
                  model::expert_stored_bytes(orig_cfg, orig_src, l, e, p));
    }
  // The same checkpoint read as per-expert lacks its expert tensors, and a
  // wrongly shaped stacked tensor is named.
  model::ModelConfig per_expert = cfg;
  per_expert.arch = model::find_architecture("qwen3_moe");
  try {
    model::check_against_checkpoint(per_expert, twin_src);
    ADD_FAILURE() << "per-expert reading of a stacked checkpoint passed";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("model.layers.0.mlp.experts.0.gate_proj.weight"), std::string::npos) << err.what();
  }
  model::ModelConfig wider = cfg;
  wider.moe_intermediate_size = 2 * cfg.moe_intermediate_size;
  try {
    model::check_against_checkpoint(wider, twin_src);
    ADD_FAILURE() << "a stacked tensor of the wrong shape passed";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("'model.layers.0.mlp.experts.gate_up_proj' has shape [32, 128, 128]"),
              std::string::npos)
        << err.what();
  }
}

// Parameters count the stacked tensors as routed experts; a stacked tensor
// that is missing, or a bias of the wrong shape, is refused naming it.
TEST(ExpertStorage, StackedTensorsAreCountedAndChecked) {
  const fs::path dir = test::temp_dir("stacked_checks");
  const Twin t = write_twin(dir / "twin", Form::kBf16, /*biases=*/true);
  const model::ModelConfig orig_cfg = model::load_config(tinymoe().string()), cfg = stacked_config(t.dir);
  auto orig_ckpt = io::Checkpoint::open(tinymoe().string());
  auto twin_ckpt = io::Checkpoint::open(t.dir.string());
  const io::SourceTensors orig_src(*orig_ckpt, orig_cfg.source_quant), twin_src(*twin_ckpt, cfg.source_quant);
  const model::ParamBreakdown a = model::count_parameters(orig_cfg, orig_src), b = model::count_parameters(cfg, twin_src);
  const uint64_t bias_params = uint64_t(orig_cfg.num_layers * t.E * (2 * t.I + t.H));
  EXPECT_EQ(b.routed_experts, a.routed_experts + bias_params);
  EXPECT_EQ(b.routed_experts_bytes, a.routed_experts_bytes + 4 * bias_params);
  EXPECT_EQ(b.total() - b.routed_experts, a.total() - a.routed_experts);

  // Rewrite the twin without layer 2's down_proj, and with layer 1's
  // gate_up_proj_bias one expert short.
  std::vector<io::TensorToWrite> out;
  std::vector<float> short_bias(size_t((t.E - 1) * 2 * t.I), 0.0f);
  const std::string gone = "model.layers.2.mlp.experts.down_proj", cut = "model.layers.1.mlp.experts.gate_up_proj_bias";
  for (int variant = 0; variant < 2; ++variant) {
    out.clear();
    for (const std::string& name : twin_ckpt->tensor_names()) {
      if (variant == 0 && name == gone) continue;
      const io::TensorInfo& info = twin_ckpt->info(name);
      if (variant == 1 && name == cut)
        out.push_back({name, DType::kF32, {t.E - 1, 2 * t.I},
                       {reinterpret_cast<const uint8_t*>(short_bias.data()), short_bias.size() * 4}});
      else
        out.push_back({name, info.dtype, info.shape, twin_ckpt->view(name).bytes()});
    }
    const fs::path bad = dir / ("bad" + std::to_string(variant));
    fs::create_directories(bad);
    fs::copy_file(t.dir / "config.json", bad / "config.json");
    io::write_safetensors((bad / "model.safetensors").string(), out);
    auto ckpt = io::Checkpoint::open(bad.string());
    const io::SourceTensors src(*ckpt, cfg.source_quant);
    const std::string want = variant == 0 ? "'" + gone + "' required by qwen3_moe config is missing"
                                          : "'" + cut + "' has shape [31, 128], config implies [32, 128]";
    try {
      model::check_against_checkpoint(cfg, src);
      ADD_FAILURE() << "variant " << variant << " passed";
    } catch (const Error& err) {
      EXPECT_EQ(err.kind(), ErrorKind::kInvalidInput);
      EXPECT_NE(std::string(err.what()).find(want), std::string::npos) << err.what();
      EXPECT_NE(std::string(err.what()).find(bad.string()), std::string::npos) << err.what();
    }
    // The reader refuses the same, whoever calls it.
    std::vector<float> buf(size_t(t.H * t.I));
    if (variant == 0) {
      try {
        model::read_expert_weight(cfg, src, 2, 0, Proj::kDown, buf.data());
        ADD_FAILURE() << "reading a missing stacked tensor passed";
      } catch (const Error& err) {
        EXPECT_NE(std::string(err.what()).find("'" + gone + "' is missing"), std::string::npos) << err.what();
      }
    }
  }
}

// (2) An MXFP4 stacked source: each expert's gate, up and down come out as the
// de-interleaved release rows (load_expert decodes them exactly; the reader's
// bytes import bit for bit), and pack --uniform mxfp4 stores exactly
// import_mxfp4 of those rows.
TEST(ExpertStorage, Mxfp4StackedSourceImportsBitForBit) {
  const fs::path dir = test::temp_dir("stacked_mxfp4");
  const Twin t = write_twin(dir / "twin", Form::kMxfp4, /*biases=*/false);
  const model::ModelConfig cfg = stacked_config(t.dir);
  ASSERT_EQ(cfg.source_quant.method, io::SourceQuant::kMxfp4);
  auto ckpt = io::Checkpoint::open(t.dir.string());
  const io::SourceTensors src(*ckpt, cfg.source_quant);
  // Out-major as stored: [E, 2I, H] (the bf16 form would be [E, H, 2I]).
  ASSERT_EQ(src.info("model.layers.0.mlp.experts.gate_up_proj").shape, (std::vector<int64_t>{t.E, 2 * t.I, t.H}));
  EXPECT_NO_THROW(model::check_against_checkpoint(cfg, src));
  const quant::FormatTraits& mx = quant::format_by_name("mxfp4");
  ASSERT_NE(mx.import_mxfp4, nullptr);
  const model::WeightStore store(src, false);
  for (int64_t l : {0, 2})
    for (int64_t e : {0, 17, 31}) {
      const model::MlpWeights w = model::load_expert(store, cfg, l, e);
      for (Proj p : {Proj::kGate, Proj::kUp, Proj::kDown}) {
        const std::string at = "layer " + std::to_string(l) + " expert " + std::to_string(e) + " proj " +
                               std::to_string(int(p));
        const MxRows want = expected_mx(t, l, e, p);
        const model::ExpertMxfp4 got = model::read_expert_mxfp4(cfg, src, l, e, p);
        ASSERT_TRUE(model::expert_is_mxfp4(cfg, src, l, e, p));
        EXPECT_EQ(got.rows, model::expert_rows(cfg, p));
        EXPECT_EQ(got.cols, model::expert_cols(cfg, p));
        EXPECT_EQ(got.blocks, want.blocks) << at;
        EXPECT_EQ(got.scales, want.scales) << at;
        // Decoded values: E2M1(nibble) * 2^(scale - 127), element 2j in the low nibble.
        const model::Tensor32Ptr& m = p == Proj::kGate ? w.gate : p == Proj::kUp ? w.up : w.down;
        const int64_t cols = got.cols, G = cols / 32;
        int64_t bad = 0;
        for (int64_t r = 0; r < got.rows; ++r)
          for (int64_t k = 0; k < cols; ++k) {
            const uint8_t byte = want.blocks[size_t((r * G + k / 32) * 16 + (k % 32) / 2)];
            const double v = test::e2m1_reference(k % 2 ? byte >> 4 : byte & 15) *
                             std::ldexp(1.0, int(want.scales[size_t(r * G + k / 32)]) - 127);
            bad += double(m->data[size_t(r * cols + k)]) != v;
          }
        EXPECT_EQ(bad, 0) << at;
        EXPECT_EQ(model::expert_stored_bytes(cfg, src, l, e, p),
                  uint64_t(got.rows * G * 17));  // 16 block bytes + 1 scale per 32 weights
      }
    }

  pack::PackRequest rq;
  rq.model_path = t.dir.string();
  rq.out_path = (dir / "packed").string();
  rq.uniform_format = "mxfp4";
  const pack::Manifest m = pack::run_pack(rq, cfg);
  auto packed = io::Checkpoint::open(rq.out_path);
  int64_t compared = 0;
  for (const pack::ManifestLayer& ml : m.layers)
    for (const pack::ManifestExpert& me : ml.experts)
      for (Proj p : {Proj::kGate, Proj::kUp, Proj::kDown}) {
        const MxRows want = expected_mx(t, ml.layer, me.expert, p);
        const quant::QuantizedMatrix q = mx.import_mxfp4(want.blocks.data(), want.scales.data(),
                                                         model::expert_rows(cfg, p), model::expert_cols(cfg, p), "want");
        size_t k = 0;
        for (const pack::ManifestPart& part : me.parts) {
          if (part.proj != int(p)) continue;
          ASSERT_LT(k, q.parts.size());
          ASSERT_EQ(part.bytes, q.parts[k].bytes.size());
          EXPECT_EQ(0, std::memcmp(packed->view(part.tensor).data + part.offset, q.parts[k].bytes.data(), part.bytes))
              << "layer " << ml.layer << " expert " << me.expert << " proj " << int(p) << " part " << part.part;
          ++k, ++compared;
        }
        EXPECT_EQ(k, q.parts.size());
      }
  EXPECT_GE(compared, 4 * 32 * 3);
}

// (3) Packing the bf16 stacked twin gives the same expert bytes as packing the
// per-expert original.
// An MXFP4 source has a lossless format (mxfp4 imports its bits); a bf16
// source has none. The default policy adopts it as the standard class and
// first candidate; a policy that turns lossless_source_formats off keeps its
// own, and adopting twice changes nothing.
TEST(ExpertStorage, Mxfp4SourceHasALosslessFormatThePolicyAdopts) {
  const fs::path dir = test::temp_dir("stacked_lossless");
  for (Form form : {Form::kMxfp4, Form::kBf16}) {
    const Twin t = write_twin(dir / (form == Form::kMxfp4 ? "mx" : "bf16"), form, /*biases=*/false);
    const model::ModelConfig cfg = stacked_config(t.dir);
    auto ckpt = io::Checkpoint::open(t.dir.string());
    const io::SourceTensors src(*ckpt, cfg.source_quant);
    const std::vector<std::string> lossless = profile::lossless_source_formats(cfg, src);
    if (form == Form::kBf16) {
      EXPECT_TRUE(lossless.empty()) << lossless.front();
      continue;
    }
    ASSERT_EQ(lossless, std::vector<std::string>{"mxfp4"});
    EXPECT_TRUE(profile::imports_expert_losslessly(quant::format_by_name("mxfp4"), cfg, src, 2, 5));
    EXPECT_FALSE(profile::imports_expert_losslessly(quant::format_by_name("fp4_g32"), cfg, src, 2, 5));
    profile::Policy p = profile::default_policy();
    ASSERT_TRUE(p.lossless_source_formats);
    ASSERT_TRUE(profile::adopt_lossless_formats(p, lossless));
    EXPECT_EQ(p.class_format[static_cast<int>(plan::ExpertClass::kStandard)], "mxfp4");
    EXPECT_EQ(p.class_format[static_cast<int>(plan::ExpertClass::kCritical)], "int8_row");
    ASSERT_FALSE(p.candidates.empty());
    EXPECT_EQ(p.candidates.front(), "mxfp4");
    EXPECT_EQ(std::count(p.candidates.begin(), p.candidates.end(), "mxfp4"), 1);
    EXPECT_FALSE(profile::adopt_lossless_formats(p, lossless));
    // The switch survives the policy's JSON.
    profile::Policy off = profile::default_policy();
    off.lossless_source_formats = false;
    EXPECT_FALSE(profile::parse_policy(nlohmann::json::parse(off.to_json().dump()), "test").lossless_source_formats);
  }
}

TEST(ExpertStorage, PackOfStackedTwinMatchesPerExpertPack) {
  const fs::path dir = test::temp_dir("stacked_pack");
  const Twin t = write_twin(dir / "twin", Form::kBf16, /*biases=*/false);
  for (const char* format : {"int8_row", "fp4_g32"}) {
    pack::PackRequest a, b;
    a.model_path = tinymoe().string();
    a.out_path = (dir / (std::string("orig_") + format)).string();
    a.uniform_format = format;
    b = a;
    b.model_path = t.dir.string();
    b.out_path = (dir / (std::string("twin_") + format)).string();
    const pack::Manifest ma = pack::run_pack(a), mb = pack::run_pack(b, stacked_config(t.dir));
    ASSERT_EQ(ma.layers.size(), mb.layers.size());
    auto ca = io::Checkpoint::open(a.out_path), cb = io::Checkpoint::open(b.out_path);
    int64_t parts = 0;
    for (size_t li = 0; li < ma.layers.size(); ++li) {
      ASSERT_EQ(ma.layers[li].experts.size(), mb.layers[li].experts.size());
      for (size_t e = 0; e < ma.layers[li].experts.size(); ++e) {
        const pack::ManifestExpert &x = ma.layers[li].experts[e], &y = mb.layers[li].experts[e];
        EXPECT_EQ(x.bytes_before, y.bytes_before);
        ASSERT_EQ(x.parts.size(), y.parts.size());
        for (size_t k = 0; k < x.parts.size(); ++k) {
          ASSERT_EQ(x.parts[k].bytes, y.parts[k].bytes);
          EXPECT_EQ(x.parts[k].xxh64, y.parts[k].xxh64);
          EXPECT_EQ(0, std::memcmp(ca->view(x.parts[k].tensor).data + x.parts[k].offset,
                                   cb->view(y.parts[k].tensor).data + y.parts[k].offset, x.parts[k].bytes))
              << format << " layer " << li << " expert " << e << " part " << k;
          ++parts;
        }
      }
    }
    EXPECT_GE(parts, 4 * 32 * 3) << format;
  }
}

double act64(const model::Activation& a, double g, double u) {
  if (a.kind == model::ActivationKind::kSwiGlu) return g / (1.0 + std::exp(-g)) * u;
  g = std::min<double>(g, a.limit);
  u = std::clamp<double>(u, -a.limit, a.limit);
  return (u + 1.0) * g / (1.0 + std::exp(-static_cast<double>(a.alpha) * g));
}

// (4) With biases: the packed executor's MoE output is the float64 MoE of the
// biased experts (the packed matrices dequantized, the twin's own biases
// de-interleaved by the test, the library's routing), for SwiGLU and the
// clamped SwiGLU.
TEST(ExpertStorage, PackedExecutorAppliesStackedBiases) {
  const fs::path dir = test::temp_dir("stacked_bias_exec");
  const Twin t = write_twin(dir / "twin", Form::kBf16, /*biases=*/true);
  model::ModelConfig cfg = stacked_config(t.dir);
  pack::PackRequest rq;
  rq.model_path = t.dir.string();
  rq.out_path = (dir / "packed").string();
  rq.uniform_format = "bf16";
  const pack::Manifest m = pack::run_pack(rq, cfg);
  // The biases travel as copies beside the other non-expert tensors.
  int copied_biases = 0;
  for (const pack::ManifestTensor& mt : m.tensors)
    copied_biases += mt.kind == "copy" && mt.name.find("_proj_bias") != std::string::npos;
  EXPECT_EQ(copied_biases, 2 * 4);

  const model::Activation clamped{.kind = model::ActivationKind::kSwiGluClamped, .alpha = 1.702f, .limit = 7.0f};
  for (const model::Activation act : {cfg.expert_activation, clamped}) {
    model::ModelConfig c = cfg;
    c.expert_activation = act;
    exec::PackedModelOptions po;
    auto pm = exec::PackedModel::open(rq.out_path, c, po);
    const int64_t n = 6, H = t.H, I = t.I, K = c.top_k;
    const std::vector<float> x = normal(size_t(n * H), 99, 1.0f);
    for (int64_t l : {1, 3}) {
      std::vector<float> out(size_t(n * H));
      model::MoeCall call;
      call.layer = l;
      call.batch = 1;
      call.seq_len = n;
      pm->block(l).forward(call, x.data(), out.data());

      const model::WeightStore& w = pm->packed_model().weights();
      const model::LayerRouter router = model::load_router(c, w, l);
      std::vector<float> logits(size_t(n * c.num_experts));
      model::router_logits(c, router, x.data(), n, logits.data());
      const model::Routing r = model::route_layer(c, router, logits.data(), n);
      const exec::PackedLayer& pl = pm->block(l).layer();
      std::vector<double> want(size_t(n * H), 0.0), unbiased(size_t(n * H), 0.0);
      for (int64_t tok = 0; tok < n; ++tok)
        for (int64_t j = 0; j < K; ++j) {
          const int32_t e = r.expert_ids[size_t(tok * K + j)];
          const double wt = r.weights[size_t(tok * K + j)];
          const exec::ExpertWeights& ew = pl.expert(e);
          std::vector<float> g(size_t(I * H)), u(g.size()), d(g.size());
          ew.gate.format->dequantize(ew.gate, g.data());
          ew.up.format->dequantize(ew.up, u.data());
          ew.down.format->dequantize(ew.down, d.data());
          const float* gu_b = t.gate_up_bias.at(l).data() + e * 2 * I;
          const float* d_b = t.down_bias.at(l).data() + e * H;
          for (int with_bias = 0; with_bias < 2; ++with_bias) {
            std::vector<double> hmid(static_cast<size_t>(I));
            for (int64_t i = 0; i < I; ++i) {
              double a = with_bias ? gu_b[2 * i] : 0.0, b = with_bias ? gu_b[2 * i + 1] : 0.0;
              for (int64_t k = 0; k < H; ++k) {
                a += double(g[size_t(i * H + k)]) * x[size_t(tok * H + k)];
                b += double(u[size_t(i * H + k)]) * x[size_t(tok * H + k)];
              }
              hmid[size_t(i)] = act64(act, a, b);
            }
            std::vector<double>& dst = with_bias ? want : unbiased;
            for (int64_t o = 0; o < H; ++o) {
              double s = with_bias ? d_b[o] : 0.0;
              for (int64_t i = 0; i < I; ++i) s += double(d[size_t(o * I + i)]) * hmid[size_t(i)];
              dst[size_t(tok * H + o)] += wt * s;
            }
          }
        }
      double err = 0, diff = 0, norm = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        err += (out[i] - want[i]) * (out[i] - want[i]);
        diff += (unbiased[i] - want[i]) * (unbiased[i] - want[i]);
        norm += want[i] * want[i];
      }
      const std::string at = "layer " + std::to_string(l) + " activation " + std::to_string(int(act.kind));
      // float32 arithmetic on the same weights: far below 1e-4 relative;
      // leaving the biases out is off by a large fraction of the output.
      EXPECT_LT(std::sqrt(err / norm), 1e-4) << at;
      EXPECT_GT(std::sqrt(diff / norm), 0.1) << at;
    }
  }
}

// The shared gpt-oss reference checkpoints, as transformers saves them (bf16
// [E, H, 2I] / [E, I, H]) and as released (mxfp4 [E, 2I, H] / [E, H, I]), hold
// the same trained weights: read through the stacked row, every expert's
// matrices agree within the MXFP4 quantization error, and far from it when
// gate and up are swapped; the biases are the same bits.
TEST(ExpertStorage, SharedGptOssFormsReadAlike) {
  EQ_REQUIRE_SHARED();
  const fs::path bf16_dir = test::shared_dir() / "models" / "gpt_oss-small",
                 mx_dir = test::shared_dir() / "models" / "gpt_oss-small-mxfp4";
  if (!fs::exists(bf16_dir) || !fs::exists(mx_dir)) GTEST_SKIP() << "gpt_oss-small references absent";
  auto config_of = [](const fs::path& dir) {
    const nlohmann::json j = nlohmann::json::parse(std::ifstream(dir / "config.json"));
    model::ModelConfig c;
    c.arch = &stacked_row();
    c.model_type = "gpt_oss";
    c.hidden_size = j.at("hidden_size").get<int64_t>();
    c.moe_intermediate_size = j.at("intermediate_size").get<int64_t>();
    c.num_experts = j.at("num_local_experts").get<int64_t>();
    c.num_layers = j.at("num_hidden_layers").get<int64_t>();
    c.layer_is_moe.assign(size_t(c.num_layers), true);
    c.source_quant = io::parse_quantization_config(j, (dir / "config.json").string());
    return c;
  };
  const model::ModelConfig cb = config_of(bf16_dir), cm = config_of(mx_dir);
  ASSERT_EQ(cm.source_quant.method, io::SourceQuant::kMxfp4);
  auto kb = io::Checkpoint::open(bf16_dir.string()), km = io::Checkpoint::open(mx_dir.string());
  const io::SourceTensors sb(*kb, cb.source_quant), sm(*km, cm.source_quant);
  for (int64_t l = 0; l < cb.num_layers; ++l) {
    for (const model::ExpertTensor& t : model::routed_expert_tensors(cb, sb, l))
      EXPECT_EQ(sb.info(t.name).shape, t.shape) << t.name;
    for (const model::ExpertTensor& t : model::routed_expert_tensors(cm, sm, l))
      EXPECT_EQ(sm.info(t.name).shape, t.shape) << t.name;
    for (Proj p : {Proj::kGate, Proj::kUp, Proj::kDown}) {
      const std::vector<float> bb = model::read_layer_expert_bias(cb, sb, l, p), bm = model::read_layer_expert_bias(cm, sm, l, p);
      ASSERT_EQ(bb.size(), size_t(cb.num_experts * model::expert_rows(cb, p)));
      EXPECT_EQ(bb, bm) << "layer " << l << " proj " << int(p);
    }
    for (int64_t e = 0; e < cb.num_experts; ++e) {
      std::vector<float> w[2][3];
      for (Proj p : {Proj::kGate, Proj::kUp, Proj::kDown}) {
        const size_t n = size_t(model::expert_rows(cb, p) * model::expert_cols(cb, p));
        w[0][int(p)].resize(n);
        w[1][int(p)].resize(n);
        model::read_expert_weight(cb, sb, l, e, p, w[0][int(p)].data());
        model::read_expert_weight(cm, sm, l, e, p, w[1][int(p)].data());
      }
      auto rel = [](const std::vector<float>& a, const std::vector<float>& b) {
        double d = 0, n = 0;
        for (size_t i = 0; i < a.size(); ++i) d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]), n += double(a[i]) * a[i];
        return std::sqrt(d / n);
      };
      const std::string at = "layer " + std::to_string(l) + " expert " + std::to_string(e);
      // MXFP4 (E2M1 with a power-of-two scale per 32) is within ~15% relative L2.
      for (int p = 0; p < 3; ++p) EXPECT_LT(rel(w[0][p], w[1][p]), 0.25) << at << " proj " << p;
      EXPECT_GT(rel(w[0][0], w[1][1]), 0.8) << at << " gate vs up";
    }
  }
}

}  // namespace
}  // namespace eq
