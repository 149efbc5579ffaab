// manifest.json as written: the exact text of a small hand-built manifest
// (every optional and null-able field), and a packed manifest parsed and
// written again gives back its bytes, so reader and writer stay mirrors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/text_file.h"
#include "pack/manifest.h"
#include "pack/output.h"
#include "pack/packer.h"
#include "test_support.h"

namespace eq::pack {
namespace {

namespace fs = std::filesystem;

// A global copied tensor (layer null), a group's tensor, a pruned and a kept
// expert, policy hashes present and absent, a null attention format.
Manifest small_manifest() {
  Manifest m;
  m.checksum = 0x0123456789abcdefULL;
  m.tool_version = "9.8.7";
  m.source.path = "/models/tiny";
  m.source.model_type = "qwen3_moe";
  m.source.fingerprint = 0xfedcba9876543210ULL;
  m.source.tensors = {{"a.weight", 0x1111111111111111ULL, std::nullopt},
                      {"b.weight", 0x2222222222222222ULL, 0x3333333333333333ULL}};
  m.source.num_layers = 1;
  m.source.num_experts = 2;
  m.source.hidden_size = 4;
  m.source.moe_intermediate_size = 8;
  m.policy.kind = "allocation";
  m.policy.shared_format = "int8_row";
  m.policy.allocation_xxh64 = 0x00000000000000ffULL;
  m.policy.importance_xxh64 = 0x1000000000000000ULL;
  m.first_layer = m.last_layer = 0;
  m.shard_size = 1 << 20;
  m.shards = {{"model-00001-of-00001.safetensors", 4096, 256, 0xaULL, 0xbULL}};
  m.files = {{"config.json", 100, 0xcULL}};
  ManifestTensor copy;
  copy.name = "model.embed_tokens.weight";
  copy.kind = "copy";
  copy.source = copy.name;
  copy.dtype = DType::kBF16;
  copy.shape = {16, 4};
  copy.bytes = copy.bytes_before = 128;
  copy.xxh64 = 0xdULL;
  ManifestTensor part;
  part.name = "model.layers.0.mlp.groups.0.gate.qweight";
  part.kind = "group_part";
  part.layer = 0;
  part.format = "int8_row";
  part.part = "qweight";
  part.shape = {1, 8, 4};
  part.bytes = 32;
  part.xxh64 = 0xeULL;
  m.tensors = {copy, part};
  ManifestLayer l;
  l.layer = 0;
  l.groups = {{0, "int8_row", {1}, "model.layers.0.mlp.groups.0", "model.layers.0.mlp.groups.0.expert_ids",
               {"qweight", "scales"}}};
  ManifestExpert pruned;
  pruned.cls = plan::ExpertClass::kPruned;
  pruned.bytes_before = 64;
  ManifestExpert kept;
  kept.expert = 1;
  kept.cls = plan::ExpertClass::kCritical;
  kept.format = "int8_row";
  kept.bits_per_weight = 8.25;
  kept.group = kept.slot = 0;
  kept.bytes_before = 64;
  kept.bytes_after = 32;
  kept.parts = {{0, "qweight", part.name, 0, 32, 0xfULL}};
  l.experts = {pruned, kept};
  m.layers = {l};
  compute_counts(m);
  m.packing = {1.5, 1 << 30, 1 << 20, 1 << 24, 1 << 25, 1 << 24, 2};
  return m;
}

// The writer's output for small_manifest(): docs/manifest.md's layout, one
// tensor and one layer per line.
const char* const kSmallManifest = R"MANIFEST({
  "schema": "expertquant.manifest",
  "version": 2,
  "checksum": "0123456789abcdef",
  "tool": {"name":"expertquant","version":"9.8.7"},
  "source": {"path":"/models/tiny","model_type":"qwen3_moe","fingerprint":"fedcba9876543210","num_layers":1,"num_experts":2,"hidden_size":4,"moe_intermediate_size":8,"tensors":[{"name":"a.weight","sample_xxh64":"1111111111111111","xxh64":null},{"name":"b.weight","sample_xxh64":"2222222222222222","xxh64":"3333333333333333"}]},
  "policy": {"kind":"allocation","attn_format":null,"shared_format":"int8_row","allocation_xxh64":"00000000000000ff","importance_xxh64":"1000000000000000"},
  "layer_range": {"first":0,"last":0},
  "has_globals": true,
  "complete": true,
  "shard_size": 1048576,
  "shards": [{"file":"model-00001-of-00001.safetensors","file_bytes":4096,"header_bytes":256,"header_xxh64":"000000000000000a","data_xxh64":"000000000000000b"}],
  "files": [{"file":"config.json","bytes":100,"xxh64":"000000000000000c"}],
  "tensors": [
    {"name":"model.embed_tokens.weight","kind":"copy","layer":null,"source":"model.embed_tokens.weight","dtype":"BF16","shape":[16,4],"bytes":128,"bytes_before":128,"xxh64":"000000000000000d","shard":0},
    {"name":"model.layers.0.mlp.groups.0.gate.qweight","kind":"group_part","layer":0,"format":"int8_row","part":"qweight","dtype":"U8","shape":[1,8,4],"bytes":32,"bytes_before":0,"xxh64":"000000000000000e","shard":0}
  ],
  "layers": [
    {"layer":0,"moe":true,"groups":[{"id":0,"format":"int8_row","expert_ids":[1],"prefix":"model.layers.0.mlp.groups.0","expert_ids_tensor":"model.layers.0.mlp.groups.0.expert_ids","parts":["qweight","scales"]}],"experts":[{"expert":0,"class":"pruned","format":null,"bits_per_weight":0.0,"group":null,"slot":null,"bytes_before":64,"bytes_after":0,"parts":[]},{"expert":1,"class":"critical","format":"int8_row","bits_per_weight":8.25,"group":0,"slot":0,"bytes_before":64,"bytes_after":32,"parts":[{"proj":"gate","part":"qweight","tensor":"model.layers.0.mlp.groups.0.gate.qweight","offset":0,"bytes":32,"xxh64":"000000000000000f"}]}],"totals":{"bytes_before":128,"bytes_after":32,"expert_bytes_before":128,"expert_bytes_after":32,"expert_weights":192,"avg_bits_per_expert_weight":1.3333333333333333,"class_counts":{"critical":1,"standard":0,"deprioritized":0,"pruned":1},"pruned":1}}
  ],
  "totals": {"bytes_before":256,"bytes_after":160,"expert_bytes_before":128,"expert_bytes_after":32,"expert_weights":192,"avg_bits_per_expert_weight":1.3333333333333333,"class_counts":{"critical":1,"standard":0,"deprioritized":0,"pruned":1},"pruned":1,"file_bytes":4096},
  "packing": {"seconds":1.5,"threads":2,"max_memory_bytes":1073741824,"estimated_peak_bytes":1048576,"baseline_rss_bytes":16777216,"peak_rss_bytes":33554432,"peak_above_baseline_bytes":16777216}
}
)MANIFEST";

std::string written(const Manifest& m, const std::string& tag) {
  const fs::path dir = test::temp_dir(tag);
  write_manifest(dir.string(), m);
  return io::read_file_bytes((dir / "manifest.json").string());
}

TEST(ManifestJson, WriterGivesTheDocumentedBytes) {
  EXPECT_EQ(written(small_manifest(), "manifest_json_small"), kSmallManifest);
  // Each entry's to_json is the element the file holds.
  const nlohmann::ordered_json file = nlohmann::ordered_json::parse(kSmallManifest);
  const Manifest m = small_manifest();
  EXPECT_EQ(nlohmann::ordered_json(m.tensors[0]), file["tensors"][0]);
  EXPECT_EQ(nlohmann::ordered_json(m.layers[0]), file["layers"][0]);
  EXPECT_EQ(nlohmann::ordered_json(m.shards), file["shards"]);
  EXPECT_EQ(nlohmann::ordered_json(m.packing), file["packing"]);
}

TEST(ManifestJson, PackedManifestParsedAndWrittenAgainIsByteIdentical) {
  const fs::path dir = test::temp_dir("manifest_json_pack");
  PackRequest rq;
  rq.model_path = (test::data_dir() / "tinymoe").string();
  rq.out_path = (dir / "packed").string();
  rq.uniform_format = "fp4_g32";
  rq.attn_format = "int8_row";
  rq.shard_size = 1 << 20;
  run_pack(rq);
  const std::string original = io::read_file_bytes((dir / "packed" / "manifest.json").string());
  const Manifest m = parse_manifest_text(original, "packed manifest.json");
  ASSERT_GT(m.layers.size(), 0u);
  ASSERT_GT(m.shards.size(), 1u);
  EXPECT_EQ(written(m, "manifest_json_rewrite"), original);
}

// Side files are copied byte for byte and recorded, a compressed
// tokenizer.json.zst as well as the plain one.
TEST(SideFiles, TokenizerFilesAreCopiedAndRecordedInEitherForm) {
  const fs::path src = test::temp_dir("side_files_src"), out = test::temp_dir("side_files_out");
  const std::string zst = std::string("\x28\xb5\x2f\xfd", 4) + "compressed bytes", cfg = "{\"add_bos_token\": true}";
  std::ofstream(src / "config.json") << "{}";
  std::ofstream(src / "tokenizer.json.zst", std::ios::binary) << zst;
  std::ofstream(src / "tokenizer_config.json") << cfg;
  std::ofstream(src / "model.safetensors") << "not a side file";
  copy_side_files(src.string(), out.string());
  EXPECT_EQ(io::read_file_bytes((out / "tokenizer_config.json").string()), cfg);
  std::ifstream in(out / "tokenizer.json.zst", std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), zst);
  EXPECT_FALSE(fs::exists(out / "model.safetensors"));
  EXPECT_FALSE(fs::exists(out / "config.json"));  // written by write_packed_config, not copied
  std::vector<std::string> recorded;
  for (const ManifestFile& f : describe_files(src.string())) recorded.push_back(f.file);
  EXPECT_EQ(recorded, (std::vector<std::string>{"config.json", "tokenizer.json.zst", "tokenizer_config.json"}));
}

}  // namespace
}  // namespace eq::pack
