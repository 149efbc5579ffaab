// Manifest, identity and trace integrity, through the built CLI on the bundled
// tinymoe: every damaged input is written by the test itself, and each must
// give one clean error line (exit 2) naming the file and what did not match —
// never a crash and never a result computed from the wrong bytes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/hash.h"
#include "io/safetensors.h"
#include "pack/manifest.h"
#include "plan/profile_inputs.h"
#include "profile/profile.h"
#include "test_support.h"

namespace eq::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string q(const fs::path& p) { return "'" + p.string() + "'"; }
fs::path tinymoe() { return data_dir() / "tinymoe"; }

std::pair<int, std::string> run(const std::string& cmd) {
  std::string out;
  const int rc = run_command(cmd + " 2>&1", &out);
  return {rc, out};
}

json read_json(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}
void write_json(const fs::path& p, const json& j) { std::ofstream(p, std::ios::trunc) << j.dump(1); }

// Rewrites manifest.json with a recomputed checksum: an edit that keeps the
// manifest self-consistent, so what is tested is the check behind it.
void write_sealed(const fs::path& p, json j) {
  j["checksum"] = hash_hex(pack::manifest_checksum(j));
  write_json(p, j);
}

// One uniform pack of tinymoe, made once; tests copy it before damaging it.
const fs::path& packed(const std::string& format = "int8_row") {
  static std::map<std::string, fs::path> made;
  auto it = made.find(format);
  if (it != made.end()) return it->second;
  const fs::path out = temp_dir("integrity_pack_" + format) / "packed";
  auto [rc, text] = run(binary() + " pack --model " + q(tinymoe()) + " --uniform " + format + " -o " + q(out));
  EXPECT_EQ(rc, 0) << text;
  return made[format] = out;
}

// A pack of tinymoe in int8_row but for expert 0 of layer 0 in trellis2 (a
// trellis quantizer run over every expert is minutes under the sanitizers).
const fs::path& packed_with_one_trellis2() {
  static const fs::path out = [] {
    const fs::path dir = temp_dir("integrity_pack_one_trellis2");
    json layers = json::array();
    for (int l = 0; l < 4; ++l) {
      json experts = json::array();
      for (int e = 0; e < 32; ++e)
        experts.push_back({{"class", l == 0 && e == 0 ? "deprioritized" : "critical"},
                           {"format", l == 0 && e == 0 ? "trellis2" : "int8_row"}});
      layers.push_back({{"layer", l}, {"experts", experts}});
    }
    write_json(dir / "alloc.json", {{"version", 1}, {"layers", layers}});
    auto [rc, text] = run(binary() + " pack --model " + q(tinymoe()) + " --allocation " + q(dir / "alloc.json") +
                          " -o " + q(dir / "packed"));
    EXPECT_EQ(rc, 0) << text;
    return dir / "packed";
  }();
  return out;
}

fs::path copy_of(const fs::path& src, const std::string& tag) {
  const fs::path dst = temp_dir(tag) / src.filename();
  fs::copy(src, dst, fs::copy_options::recursive);
  return dst;
}

// A copy of tinymoe whose tensor `name` has one byte changed at `offset`
// into its data (metadata, config and index unchanged).
fs::path model_with_changed_byte(const std::string& tag, const std::string& name, uint64_t offset) {
  const fs::path dst = copy_of(tinymoe(), tag);
  uint64_t pos = 0;
  {
    const auto file = io::SafetensorsFile::open((dst / "model.safetensors").string());
    const io::TensorInfo* info = file->find(name);
    EXPECT_NE(info, nullptr) << name;
    EXPECT_LT(offset, info->nbytes());
    pos = 8 + file->header_size() + info->begin + offset;
  }
  flip_byte(dst / "model.safetensors", pos, 0x21);
  return dst;
}

const std::string kExpert = "model.layers.0.mlp.experts.3.down_proj.weight";  // bf16 [128, 64]: 16 KiB
// Byte 5000 of it is outside the sample windows (0-4 KiB, 6-10 KiB, 12-16 KiB).
constexpr uint64_t kOutsideSample = 5000, kInsideSample = 100;

// Finding: a group's expert_ids longer than its tensors made verify read past
// the tensor (segfault). Refused at load, naming the field.
TEST(Integrity, LongerExpertIdsAreRefusedNotRead) {
  const fs::path p = copy_of(packed(), "integrity_ids");
  json m = read_json(p / "manifest.json");
  m["layers"][0]["groups"][0]["expert_ids"].push_back(0);
  for (bool sealed : {false, true}) {
    sealed ? write_sealed(p / "manifest.json", m) : write_json(p / "manifest.json", m);
    const std::string corpus = (data_dir() / "corpus" / "eval_prose.txt.zst").string();
    for (const std::string& cmd : {"verify " + q(p), "eval --packed " + q(p) + " --text " + q(corpus) + " --max-tokens 64"}) {
      auto [rc, text] = run(binary() + " " + cmd);
      EXPECT_EQ(rc, 2) << cmd << text;
      EXPECT_NE(text.find("manifest.json"), std::string::npos) << text;
      EXPECT_NE(text.find("layers[0].groups[0].expert_ids"), std::string::npos) << text;
    }
  }
}

// A self-consistent (re-sealed) manifest whose tensor entry disagrees with
// the shard header is refused before any slice is read: verify reports it and
// reads no expert slice, the executor's loader (eval) stops.
TEST(Integrity, ManifestShapesAreBoundedByTheShardHeader) {
  const fs::path p = copy_of(packed(), "integrity_header");
  json m = read_json(p / "manifest.json");
  // The norm claims another dtype of the same size.
  for (auto& t : m["tensors"])
    if (t["name"] == "model.norm.weight") t["dtype"] = t["dtype"] == "BF16" ? "F16" : "BF16";
  write_sealed(p / "manifest.json", m);
  auto [rc, text] = run(binary() + " verify " + q(p));
  EXPECT_NE(rc, 0) << text;
  EXPECT_NE(text.find("tensor model.norm.weight"), std::string::npos) << text;
  EXPECT_NE(text.find("expert slices and dequantization not checked"), std::string::npos) << text;
  const std::string corpus = (data_dir() / "corpus" / "eval_prose.txt.zst").string();
  auto [erc, etext] = run(binary() + " eval --packed " + q(p) + " --text " + q(corpus) + " --max-tokens 64");
  EXPECT_EQ(erc, 2) << etext;
  EXPECT_NE(etext.find("tensor 'model.norm.weight'"), std::string::npos) << etext;
  EXPECT_NE(etext.find("manifest.json says"), std::string::npos) << etext;
}

// Finding: an edited expert offset and a renamed format were used silently.
// Both are refused at load, naming manifest.json.
TEST(Integrity, HandEditedManifestIsRefused) {
  const std::string corpus = (data_dir() / "corpus" / "eval_prose.txt.zst").string();
  {
    const fs::path p = copy_of(packed(), "integrity_offset");
    json m = read_json(p / "manifest.json");
    json& part = m["layers"][0]["experts"][0]["parts"][0];
    part["offset"] = part["offset"].get<uint64_t>() + part["bytes"].get<uint64_t>();
    write_json(p / "manifest.json", m);
    auto [rc, text] = run(binary() + " eval --packed " + q(p) + " --text " + q(corpus) + " --max-tokens 64");
    EXPECT_EQ(rc, 2) << text;
    EXPECT_NE(text.find("manifest.json"), std::string::npos) << text;
    EXPECT_NE(text.find("layers[0].experts[0].parts[0].offset"), std::string::npos) << text;
  }
  {
    // trellis2 -> trellis2_lut: the same bytes read with another code.
    const fs::path p = copy_of(packed_with_one_trellis2(), "integrity_format");
    std::ifstream in(p / "manifest.json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    in.close();
    // Every occurrence, with plain string search (std::regex trips GCC 12's
    // -Wmaybe-uninitialized under the sanitizer build's -Werror).
    const std::string from = "\"trellis2\"", to = "\"trellis2_lut\"";
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
      text.replace(at, from.size(), to);
    std::ofstream(p / "manifest.json", std::ios::trunc) << text;
    for (const std::string& cmd : {"verify " + q(p), "eval --packed " + q(p) + " --text " + q(corpus) + " --max-tokens 64"}) {
      auto [rc, out] = run(binary() + " " + cmd);
      EXPECT_EQ(rc, 2) << out;
      EXPECT_NE(out.find("manifest.json: content checksum"), std::string::npos) << out;
      EXPECT_NE(out.find("differs from the recorded checksum"), std::string::npos) << out;
    }
  }
  {
    const fs::path p = copy_of(packed(), "integrity_v1");
    json m = read_json(p / "manifest.json");
    m["version"] = 1;
    write_json(p / "manifest.json", m);
    auto [rc, text] = run(binary() + " verify " + q(p));
    EXPECT_EQ(rc, 2) << text;
    EXPECT_NE(text.find("re-pack"), std::string::npos) << text;
  }
}

// Finding: identity covered metadata only. A model with one changed byte
// (outside the sample windows: only the full hash sees it) is refused by eval.
// The full hashes are taken as the reference passes read the tensors: the
// refusal comes after them, and no report is written.
TEST(Integrity, EvalRefusesAModelWithOtherWeights) {
  const fs::path other = model_with_changed_byte("integrity_other_model", kExpert, kOutsideSample);
  const std::string corpus = (data_dir() / "corpus" / "eval_prose.txt.zst").string();
  const fs::path report = temp_dir("integrity_eval_report") / "report.json";
  auto [rc, text] = run(binary() + " eval --packed " + q(packed()) + " --model " + q(other) + " --text " + q(corpus) +
                        " --max-tokens 64 --json-out " + q(report));
  EXPECT_EQ(rc, 2) << text;
  EXPECT_FALSE(fs::exists(report));
  EXPECT_NE(text.find(other.string() + ": tensor '" + kExpert + "'"), std::string::npos) << text;
  EXPECT_NE(text.find(packed().string() + "/manifest.json records"), std::string::npos) << text;
}

// Finding: the side files of a pack were not sealed. A tokenizer file dropped
// into a finished pack (tinymoe has none: the pack lists none) is refused by
// every command that would encode with it, and by verify, naming the file.
TEST(Integrity, UnlistedSideFileOfAPackIsRefused) {
  const fs::path p = copy_of(packed(), "integrity_side_unlisted");
  std::ofstream(p / "tokenizer_config.json") << "{\"add_bos_token\": true}";
  const std::string named = (p / "tokenizer_config.json").string() + ": not listed in manifest.json files";
  const fs::path text = temp_dir("integrity_side_unlisted_text") / "t.txt";
  std::ofstream(text) << "hello";
  for (const std::string& cmd :
       {"tokenize --model " + q(p) + " --text " + q(text), "generate --packed " + q(p) + " --prompt hi -n 1",
        "eval --packed " + q(p) + " --text " + q(text) + " --no-quality --no-collapse --no-latency"}) {
    auto [rc, out] = run(binary() + " " + cmd);
    EXPECT_EQ(rc, 2) << cmd << "\n" << out;
    EXPECT_NE(out.find(named), std::string::npos) << cmd << "\n" << out;
  }
  auto [rc, out] = run(binary() + " verify " + q(p));
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find(named), std::string::npos) << out;
  fs::remove(p / "tokenizer_config.json");
  auto [rc_ok, out_ok] = run(binary() + " tokenize --model " + q(p) + " --text " + q(text));
  EXPECT_EQ(rc_ok, 0) << out_ok;
  EXPECT_EQ(out_ok, "104 101 108 108 111\n");
}

// A listed side file edited after packing: refused by the encoders (the
// packed-model loader with --no-verify too), by merge before copying it, and
// reported by verify. tokenizer.json is listed here through a re-sealed
// manifest (its recorded hash is not the file's).
TEST(Integrity, EditedSideFileOfAPackIsRefused) {
  const fs::path p = copy_of(packed(), "integrity_side_edited");
  {
    std::ofstream(p / "generation_config.json", std::ios::app) << " ";
    const std::string named = (p / "generation_config.json").string() + ": ";
    for (const std::string& cmd : {"generate --packed " + q(p) + " --prompt hi -n 1 --no-verify",
                                   "verify " + q(p)}) {
      auto [rc, out] = run(binary() + " " + cmd);
      EXPECT_EQ(rc, cmd.starts_with("verify") ? 1 : 2) << cmd << "\n" << out;
      EXPECT_NE(out.find(named), std::string::npos) << cmd << "\n" << out;
      EXPECT_NE(out.find("(edited or corrupt)"), std::string::npos) << cmd << "\n" << out;
    }
  }
  const fs::path t = copy_of(packed(), "integrity_side_tokenizer");
  json m = read_json(t / "manifest.json");
  m["files"].push_back({{"file", "tokenizer.json"}, {"bytes", 2}, {"xxh64", hash_hex(xxhash64(std::string("{}")))}});
  write_sealed(t / "manifest.json", m);
  std::ofstream(t / "tokenizer.json") << "{ }";
  auto [rc, out] = run(binary() + " tokenize --tokenizer " + q(t / "tokenizer.json") + " --text " + q(t / "config.json"));
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find((t / "tokenizer.json").string() + ": 3 bytes"), std::string::npos) << out;
  EXPECT_NE(out.find("manifest.json says 2 bytes"), std::string::npos) << out;
}

// Parts packed from two checkpoints that differ only in weights are not merged.
TEST(Integrity, MergeRefusesPartsOfDifferentCheckpoints) {
  const fs::path other = model_with_changed_byte("integrity_merge_model", kExpert, kInsideSample);
  const fs::path dir = temp_dir("integrity_merge");
  auto [rc1, t1] = run(binary() + " pack --model " + q(tinymoe()) + " --uniform int8_row --layers 0-1 -o " + q(dir / "a"));
  ASSERT_EQ(rc1, 0) << t1;
  auto [rc2, t2] = run(binary() + " pack --model " + q(other) + " --uniform int8_row --layers 2-3 -o " + q(dir / "b"));
  ASSERT_EQ(rc2, 0) << t2;
  auto [rc, text] = run(binary() + " merge " + q(dir / "a") + " " + q(dir / "b") + " -o " + q(dir / "merged"));
  EXPECT_EQ(rc, 2) << text;
  EXPECT_NE(text.find("source tensor '" + kExpert + "'"), std::string::npos) << text;
  EXPECT_NE(text.find((dir / "a").string() + "/manifest.json"), std::string::npos) << text;
  EXPECT_NE(text.find((dir / "b").string() + "/manifest.json"), std::string::npos) << text;
  EXPECT_FALSE(fs::exists(dir / "merged"));
}

// A profile.json for `pack --profile`: tinymoe's fingerprint (or `model`'s),
// a uniform allocation.
fs::path write_profile(const fs::path& dir, const fs::path& model, int version = plan::kProfileVersion) {
  const plan::ModelFingerprint f = plan::fingerprint_model(model.string());
  json layers = json::array();
  for (int l = 0; l < 4; ++l) {
    json experts = json::array();
    for (int e = 0; e < 32; ++e) experts.push_back({{"class", "standard"}, {"format", "int8_row"}});
    layers.push_back({{"layer", l}, {"experts", experts}});
  }
  const json p = {{"schema", "expertquant.profile"},
                  {"version", version},
                  {"model",
                   {{"path", model.string()},
                    {"model_type", f.model_type},
                    {"config_xxh64", f.config_xxh64},
                    {"tensor_index_xxh64", f.tensor_index_xxh64},
                    {"num_layers", f.num_layers},
                    {"tensors", json::parse(io::tensor_hashes_to_json(f.tensors).dump())}}},
                  {"allocation", {{"schema", "expertquant.allocation"}, {"version", 1}, {"layers", layers}}}};
  const fs::path path = dir / "profile.json";
  json sealed = p;
  plan::seal_profile(sealed);
  write_json(path, sealed);
  return path;
}

// Finding: pack --profile accepted a profile of another model or schema version.
TEST(Integrity, PackRefusesAProfileOfOtherWeightsOrVersion) {
  const fs::path dir = temp_dir("integrity_profile");
  {
    // Sample windows differ: refused before any output exists.
    const fs::path other = model_with_changed_byte("integrity_profile_sample", kExpert, kInsideSample);
    const fs::path prof = write_profile(dir, other);
    auto [rc, text] = run(binary() + " pack --model " + q(tinymoe()) + " --profile " + q(prof) + " -o " + q(dir / "out"));
    EXPECT_EQ(rc, 2) << text;
    EXPECT_NE(text.find("was made from a different checkpoint: tensor '" + kExpert + "'"), std::string::npos) << text;
    EXPECT_NE(text.find(prof.string()), std::string::npos) << text;
    EXPECT_FALSE(fs::exists(dir / "out"));
  }
  {
    // Only the full hash differs: found while packing, nothing written.
    const fs::path other = model_with_changed_byte("integrity_profile_full", kExpert, kOutsideSample);
    const fs::path prof = write_profile(dir, other);
    auto [rc, text] = run(binary() + " pack --model " + q(tinymoe()) + " --profile " + q(prof) + " -o " + q(dir / "out"));
    EXPECT_EQ(rc, 2) << text;
    EXPECT_NE(text.find("tensor '" + kExpert + "' has xxh64"), std::string::npos) << text;
    EXPECT_NE(text.find("profiled from different weights"), std::string::npos) << text;
    EXPECT_FALSE(fs::exists(dir / "out"));
  }
  {
    const fs::path prof = write_profile(dir, tinymoe(), 1);
    auto [rc, text] = run(binary() + " pack --model " + q(tinymoe()) + " --profile " + q(prof) + " -o " + q(dir / "out"));
    EXPECT_EQ(rc, 2) << text;
    EXPECT_NE(text.find("field 'version'"), std::string::npos) << text;
    EXPECT_FALSE(fs::exists(dir / "out"));
  }
  {
    // The profile of this very model packs.
    const fs::path prof = write_profile(dir, tinymoe());
    auto [rc, text] = run(binary() + " pack --model " + q(tinymoe()) + " --profile " + q(prof) + " -o " + q(dir / "out"));
    EXPECT_EQ(rc, 0) << text;
  }
}

// The source tensor hashes a pack records are those of the model's bytes.
TEST(Integrity, PackRecordsFullHashesOfWhatItRead) {
  const json m = read_json(packed() / "manifest.json");
  const auto ckpt = io::Checkpoint::open(tinymoe().string());
  size_t full = 0;
  ASSERT_EQ(m["source"]["tensors"].size(), ckpt->tensor_names().size());
  for (const auto& t : m["source"]["tensors"]) {
    if (t["xxh64"].is_null()) continue;
    ++full;
    const std::string name = t["name"];
    EXPECT_EQ(t["xxh64"], hash_hex(xxhash64(ckpt->view(name).bytes()))) << name;
  }
  EXPECT_EQ(full, ckpt->tensor_names().size());  // a complete pack with nothing pruned reads every tensor
}

}  // namespace
}  // namespace eq::test
