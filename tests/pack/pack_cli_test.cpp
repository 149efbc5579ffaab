// End-to-end: expertquant pack / verify / merge run as subprocesses on the
// bundled tinymoe and the shared qwen3moe-small.
#include <gtest/gtest.h>

#include <cstdio>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/build_info.h"
#include "test_support.h"

namespace eq::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

json read_json(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

// Runs a command; returns {exit status, combined output}.
std::pair<int, std::string> run(const std::string& cmd) {
  std::string out;
  const int rc = run_command(cmd, &out);
  return {rc, out};
}

fs::path tinymoe() { return data_dir() / "tinymoe"; }
fs::path small_model() { return shared_dir() / "models" / "qwen3moe-small"; }

uint64_t checkpoint_bytes(const fs::path& folder) {
  uint64_t n = 0;
  for (const auto& e : fs::directory_iterator(folder))
    if (e.path().extension() == ".safetensors") n += fs::file_size(e.path());
  return n;
}

// critical int8_row / pruned (or standard when !prune) / deprioritized `two_bit` / standard fp4_g32, by expert id.
json mixed_allocation(int layers, int experts, const std::string& two_bit = "int2_g32", bool prune = true) {
  json a = {{"schema", "expertquant.allocation"}, {"version", 1}, {"layers", json::array()}};
  for (int l = 0; l < layers; ++l) {
    json ex = json::array();
    for (int e = 0; e < experts; ++e) {
      const int k = (e + l) % 8;
      if (k == 0) ex.push_back({{"class", "critical"}, {"format", "int8_row"}});
      else if (k == 1 && prune) ex.push_back({{"class", "pruned"}});
      else if (k == 1) ex.push_back({{"class", "standard"}, {"format", "fp4_g32"}});
      else if (k <= 3) ex.push_back({{"class", "deprioritized"}, {"format", two_bit}});
      else ex.push_back({{"class", "standard"}, {"format", "fp4_g32"}});
    }
    a["layers"].push_back({{"layer", l}, {"experts", ex}});
  }
  return a;
}

fs::path write_allocation(const fs::path& dir, const json& a) {
  const fs::path p = dir / "alloc.json";
  std::ofstream(p) << a.dump(1);
  return p;
}

fs::path pack_tiny(const fs::path& dir) {
  const fs::path alloc = write_allocation(dir, mixed_allocation(4, 32));
  const fs::path out = dir / "packed";
  auto [rc, text] = run(binary() + " pack --model " + q(tinymoe()) + " --allocation " + q(alloc) + " -o " + q(out) +
                        " --shard-size 1M --json");
  EXPECT_EQ(rc, 0) << text;
  return out;
}

TEST(PackCli, ManifestTotalsEqualEntriesAndFilesAndVerifyPasses) {
  if (!fs::exists(tinymoe() / "config.json")) GTEST_SKIP() << "data/tinymoe not bundled yet";
  const fs::path dir = temp_dir("pack_totals");
  const fs::path out = pack_tiny(dir);
  const json m = read_json(out / "manifest.json");

  uint64_t tensor_bytes = 0, data_bytes = 0, file_bytes = 0, layer_after = 0, expert_after = 0;
  for (const auto& t : m["tensors"]) tensor_bytes += t["bytes"].get<uint64_t>();
  ASSERT_GT(m["shards"].size(), 1u) << "--shard-size 1M should give several shards";
  for (const auto& s : m["shards"]) {
    const uint64_t real = fs::file_size(out / s["file"].get<std::string>());
    EXPECT_EQ(real, s["file_bytes"].get<uint64_t>()) << s["file"];
    file_bytes += real;
    data_bytes += real - s["header_bytes"].get<uint64_t>();
  }
  int pruned = 0;
  for (const auto& l : m["layers"]) {
    layer_after += l["totals"]["bytes_after"].get<uint64_t>();
    for (const auto& e : l["experts"]) {
      expert_after += e["bytes_after"].get<uint64_t>();
      if (e["class"] == "pruned") {
        ++pruned;
        EXPECT_TRUE(e["parts"].empty());
        EXPECT_TRUE(e["group"].is_null());
      }
    }
  }
  const json& totals = m["totals"];
  EXPECT_EQ(totals["bytes_after"].get<uint64_t>(), tensor_bytes);
  EXPECT_EQ(data_bytes, tensor_bytes);
  EXPECT_EQ(totals["file_bytes"].get<uint64_t>(), file_bytes);
  EXPECT_EQ(totals["expert_bytes_after"].get<uint64_t>(), expert_after);
  EXPECT_EQ(totals["pruned"].get<int>(), pruned);
  EXPECT_EQ(pruned, 4 * 4);  // one in eight of 32 experts, 4 layers
  EXPECT_LT(totals["bytes_after"].get<uint64_t>(), totals["bytes_before"].get<uint64_t>());
  EXPECT_EQ(read_json(out / "config.json")["quantization"]["manifest"], "manifest.json");
  EXPECT_TRUE(fs::exists(out / "model.safetensors.index.json"));

  auto [rc, text] = run(binary() + " verify " + q(out));
  EXPECT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("OK"), std::string::npos) << text;
}

// pack's summary says which formats it packed: the JSON's format_mix holds
// the allocation's counts (per layer 4 int8_row, 8 int2_g32, 16 fp4_g32, 4
// pruned) and the manifest's bytes, most bytes first; the text names them.
TEST(PackCli, FormatMixCountsTheAllocation) {
  if (!fs::exists(tinymoe() / "config.json")) GTEST_SKIP() << "data/tinymoe not bundled yet";
  const fs::path dir = temp_dir("pack_format_mix");
  const fs::path alloc = write_allocation(dir, mixed_allocation(4, 32));
  auto [rc, text] = run(binary() + " pack --model " + q(tinymoe()) + " --allocation " + q(alloc) + " -o " +
                        q(dir / "packed") + " --json-out " + q(dir / "pack.json"));
  ASSERT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("formats: fp4_g32 64 experts "), std::string::npos) << text;
  EXPECT_NE(text.find(", pruned 16 experts\n"), std::string::npos) << text;
  const json m = read_json(dir / "packed" / "manifest.json");
  std::map<std::string, uint64_t> bytes;
  for (const auto& l : m["layers"])
    for (const auto& e : l["experts"])
      if (e["class"] != "pruned") bytes[e["format"].get<std::string>()] += e["bytes_after"].get<uint64_t>();
  const json mix = read_json(dir / "pack.json")["format_mix"];
  ASSERT_EQ(mix.size(), 4u) << mix.dump();
  const std::vector<std::pair<std::string, int64_t>> expected = {
      {"fp4_g32", 64}, {"int8_row", 16}, {"int2_g32", 32}};  // by bytes: 64 x 4.5 > 16 x 8 > 32 x 3 bits
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(mix[i]["format"], expected[i].first) << mix.dump();
    EXPECT_EQ(mix[i]["experts"].get<int64_t>(), expected[i].second) << mix.dump();
    EXPECT_EQ(mix[i]["bytes"].get<uint64_t>(), bytes[expected[i].first]) << mix.dump();
  }
  EXPECT_TRUE(mix[3]["format"].is_null());
  EXPECT_EQ(mix[3]["experts"].get<int64_t>(), 16);
  EXPECT_EQ(mix[3]["bytes"].get<uint64_t>(), 0u);
}

// The LUT trellis code end to end (pack -> verify -> eval against the
// reference): three experts in eight in trellis2_lut score like the same
// allocation in 1MAD trellis2 (docs/formats.md: the codes' errors are equal),
// so neither the code nor its kernels lose accuracy on the way. Mean KL over
// 16k tokens is the steady measure (bits per byte over 1k tokens swung by a
// point either way; over the 261k of eval_prose: KL 0.0369 vs 0.0377).
TEST(PackCli, TrellisLutPacksVerifiesAndScoresLikeOneMad) {
  if (!fs::exists(tinymoe() / "config.json")) GTEST_SKIP() << "data/tinymoe not bundled yet";
  const fs::path dir = temp_dir("pack_trellis_lut");
  double kl[2] = {0, 0}, delta_percent[2] = {0, 0};
  const char* formats[2] = {"trellis2", "trellis2_lut"};
  // Instrumented, the paths only: 16k tokens of two forwards and 32 trellis experts take minutes, and
  // the accuracy comparison below needs them; layer 0's trellis experts cover the code.
  const bool sanitized = eq::built_with_sanitizers();
  const int kTokens = sanitized ? 1024 : 16384, kTrellisLayers = sanitized ? 1 : 4;
  for (int i = 0; i < 2; ++i) {
    const fs::path sub = dir / formats[i];
    fs::create_directories(sub);
    // No pruning: its loss would hide the 2-bit format's.
    json allocation = mixed_allocation(4, 32, formats[i], false);
    for (int l = kTrellisLayers; l < 4; ++l)
      for (auto& e : allocation["layers"][l]["experts"])
        if (e.value("format", "") == formats[i]) e["format"] = "int2_g32";
    const fs::path alloc = write_allocation(sub, allocation);
    const fs::path out = sub / "packed";
    auto [rc, text] = run(binary() + " pack --model " + q(tinymoe()) + " --allocation " + q(alloc) + " -o " + q(out));
    ASSERT_EQ(rc, 0) << text;
    int two_bit = 0;
    const json manifest = read_json(out / "manifest.json");
    for (const auto& l : manifest["layers"])
      for (const auto& e : l["experts"]) two_bit += e.value("format", "") == formats[i];
    EXPECT_EQ(two_bit, kTrellisLayers * 8) << formats[i];  // two in eight of 32 experts per layer
    auto [vrc, vtext] = run(binary() + " verify " + q(out));
    EXPECT_EQ(vrc, 0) << vtext;
    const fs::path report = sub / "eval.json";
    auto [erc, etext] = run(binary() + " eval --packed " + q(out) + " --model " + q(tinymoe()) + " --text " +
                            q(data_dir() / "corpus" / "eval_prose.txt.zst") +
                            " --max-tokens " + std::to_string(kTokens) + " --ctx 256 --no-latency --json-out " +
                            q(report));
    ASSERT_EQ(erc, 0) << etext;
    const json overall = read_json(report)["quality"]["overall"];
    kl[i] = overall["kl_mean"].get<double>();
    delta_percent[i] = overall["bits_delta_percent"].get<double>();
  }
  std::printf("KL mean: trellis2 %.5f, trellis2_lut %.5f; bits per byte: %+.2f%%, %+.2f%%\n", kl[0], kl[1],
              delta_percent[0], delta_percent[1]);
  if (sanitized) {
    EXPECT_GT(kl[1], 0.0);
    return;
  }
  EXPECT_GT(kl[0], 1e-3);  // quantization costs something: the comparison is live
  EXPECT_GT(delta_percent[0], 0.5);
  EXPECT_LT(kl[1], 1.15 * kl[0]) << "the LUT code lost accuracy against 1MAD";
  EXPECT_LT(delta_percent[1], 1.3 * delta_percent[0] + 0.5);
}

TEST(PackCli, FlippedByteIsDetectedAndNamed) {
  if (!fs::exists(tinymoe() / "config.json")) GTEST_SKIP() << "data/tinymoe not bundled yet";
  const fs::path dir = temp_dir("pack_flip");
  const fs::path out = pack_tiny(dir);
  const json m = read_json(out / "manifest.json");
  // Flip one byte in the middle of every shard, one shard at a time.
  for (const auto& s : m["shards"]) {
    const fs::path copy = dir / "flipped";
    fs::remove_all(copy);
    fs::copy(out, copy);
    const fs::path shard = copy / s["file"].get<std::string>();
    const uint64_t header = s["header_bytes"].get<uint64_t>();
    const uint64_t pos = header + (fs::file_size(shard) - header) / 2;
    flip_byte(shard, pos, 0x10);
    auto [rc, text] = run(binary() + " verify " + q(copy));
    EXPECT_NE(rc, 0) << text;
    EXPECT_NE(text.find(s["file"].get<std::string>()), std::string::npos) << text;
    EXPECT_NE(text.find("checksum mismatch"), std::string::npos) << text;
    EXPECT_NE(text.find("tensor "), std::string::npos) << text;
  }
}

TEST(PackCli, BadInputsFailClearlyWithoutOutput) {
  if (!fs::exists(tinymoe() / "config.json")) GTEST_SKIP() << "data/tinymoe not bundled yet";
  const fs::path dir = temp_dir("pack_bad");
  const fs::path out = dir / "out";
  const std::string base = binary() + " pack --model " + q(tinymoe()) + " -o " + q(out);

  auto [rc1, t1] = run(base + " --uniform fp5_magic");
  EXPECT_NE(rc1, 0);
  EXPECT_NE(t1.find("fp5_magic"), std::string::npos) << t1;

  json a = mixed_allocation(4, 32);
  a["layers"][2]["experts"].erase(a["layers"][2]["experts"].size() - 1);
  auto [rc2, t2] = run(base + " --allocation " + q(write_allocation(dir, a)));
  EXPECT_NE(rc2, 0);
  EXPECT_NE(t2.find("31 entries"), std::string::npos) << t2;
  EXPECT_NE(t2.find("layer=2"), std::string::npos) << t2;

  a = mixed_allocation(4, 32);
  a["layers"][1]["experts"][3]["class"] = "vip";
  auto [rc3, t3] = run(base + " --allocation " + q(write_allocation(dir, a)));
  EXPECT_NE(rc3, 0);
  EXPECT_NE(t3.find("layers[1].experts[3].class"), std::string::npos) << t3;

  // Finding: a layer pruned below top_k (4 in tinymoe) was packed, then
  // refused by every consumer; pack refuses it first, naming the layer.
  a = mixed_allocation(4, 32);
  for (size_t e = 3; e < 32; ++e) a["layers"][2]["experts"][e] = {{"class", "pruned"}};
  auto [rc3b, t3b] = run(base + " --allocation " + q(write_allocation(dir, a)));
  EXPECT_EQ(rc3b, 2) << t3b;
  EXPECT_NE(t3b.find("field 'layers[layer=2].experts': 3 experts not pruned, the model routes each token to "
                     "top_k = 4"),
            std::string::npos)
      << t3b;

  auto [rc4, t4] = run(base + " --uniform fp4_g32 --max-memory 64K");
  EXPECT_NE(rc4, 0);
  EXPECT_NE(t4.find("--max-memory"), std::string::npos) << t4;

  auto [rc5, t5] = run(base + " --uniform fp4_g32 --layers 2-9");
  EXPECT_NE(rc5, 0);
  EXPECT_NE(t5.find("--layers"), std::string::npos) << t5;

  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(output_leftovers(out).empty());

  // An existing output needs --force.
  fs::create_directories(out);
  auto [rc6, t6] = run(base + " --uniform bf16");
  EXPECT_NE(rc6, 0);
  EXPECT_NE(t6.find("--force"), std::string::npos) << t6;
  auto [rc7, t7] = run(base + " --uniform bf16 --force");
  EXPECT_EQ(rc7, 0) << t7;
  EXPECT_TRUE(fs::exists(out / "manifest.json"));
}

TEST(PackCli, PeakRssStaysUnderQuarterOfCheckpoint) {
  if (eq::built_with_sanitizers()) GTEST_SKIP() << "RSS bounds do not hold under AddressSanitizer (shadow memory, quarantine)";
  EQ_REQUIRE_SHARED();
  const fs::path dir = temp_dir("pack_rss");
  const uint64_t bound = checkpoint_bytes(small_model()) / 4;
  // The bound counts bytes above the process baseline (RSS when packing
  // starts: binary, libraries, checkpoint index); we read the OS peak (VmHWM)
  // at exit, after the manifest was written.
  for (const char* extra : {"", " --max-memory 4900K"}) {
    const fs::path out = dir / (std::string("out") + (*extra ? "_split" : ""));
    const std::string limit = *extra ? std::string(extra) : " --max-memory " + std::to_string(bound);
    auto [rc, text] = run(binary() + " pack --model " + q(small_model()) + " --uniform fp4_g32 -o " + q(out) + limit +
                          " --json");
    ASSERT_EQ(rc, 0) << text;
    const json s = json::parse(text);
    const uint64_t above = s["packing"]["final_peak_above_baseline_bytes"].get<uint64_t>();
    const uint64_t max_memory = s["packing"]["max_memory_bytes"].get<uint64_t>();
    std::printf("[pack rss] bound %llu, peak above baseline %llu, baseline %llu, VmHWM %llu, estimate %llu\n",
                (unsigned long long)max_memory, (unsigned long long)above,
                (unsigned long long)s["packing"]["baseline_rss_bytes"].get<uint64_t>(),
                (unsigned long long)s["packing"]["final_peak_rss_bytes"].get<uint64_t>(),
                (unsigned long long)s["packing"]["estimated_peak_bytes"].get<uint64_t>());
    EXPECT_LE(above, max_memory);
    EXPECT_GT(above, 0u);
    if (*extra) {  // the tight bound splits groups by experts
      const json m = read_json(out / "manifest.json");
      EXPECT_GT(m["layers"][0]["groups"].size(), 1u);
      auto [vrc, vtext] = run(binary() + " verify " + q(out));
      EXPECT_EQ(vrc, 0) << vtext;
    }
  }
}

TEST(PackCli, SigkillLeavesNoOutputAndRerunSucceeds) {
  EQ_REQUIRE_SHARED();
  const fs::path dir = temp_dir("pack_kill");
  const fs::path out = dir / "out";
  const std::string cmd = binary() + " pack --model " + q(small_model()) + " --uniform fp4_g32 -o " + q(out);
  std::mt19937 rng(static_cast<unsigned>(::getpid()));
  std::uniform_int_distribution<int> delay_ms(20, 1500);
  for (int trial = 0; trial < 2; ++trial) {
    const int ms = delay_ms(rng);
    // The pack's own exit status tells whether the kill landed: 137 (SIGKILL)
    // must leave no OUT; a pack that finished first (0) leaves a complete one.
    auto [rc, text] = run("( " + cmd + " >/dev/null 2>&1 & p=$!; sleep " + std::to_string(ms / 1000.0) +
                          "; kill -9 $p 2>/dev/null; wait $p; echo \"status $?\" )");
    ASSERT_EQ(rc, 0) << text;
    if (text.find("status 137") != std::string::npos) {
      EXPECT_FALSE(fs::exists(out)) << "a pack killed after " << ms << " ms left " << out;
    } else {
      ASSERT_NE(text.find("status 0"), std::string::npos) << text;
      auto [vrc, vtext] = run(binary() + " verify " + q(out));
      EXPECT_EQ(vrc, 0) << "a pack that finished within " << ms << " ms: " << vtext;
      fs::remove_all(out);
    }
  }
  auto [rc, text] = run(cmd + " --json");
  ASSERT_EQ(rc, 0) << text;
  EXPECT_TRUE(output_leftovers(out).empty());
  auto [vrc, vtext] = run(binary() + " verify " + q(out));
  EXPECT_EQ(vrc, 0) << vtext;
}

TEST(PackCli, LayerPartsMergeToTheSinglePack) {
  EQ_REQUIRE_SHARED();
  const fs::path dir = temp_dir("pack_merge");
  const fs::path alloc = write_allocation(dir, mixed_allocation(6, 64));
  const std::string base = binary() + " pack --model " + q(small_model()) + " --allocation " + q(alloc) +
                           " --shard-size 4M --json -o ";
  for (const auto& [name, layers] : std::vector<std::pair<std::string, std::string>>{
           {"single", ""}, {"a", " --layers 0-2"}, {"b", " --layers 3-5"}}) {
    auto [rc, text] = run(base + q(dir / name) + layers);
    ASSERT_EQ(rc, 0) << name << ": " << text;
  }
  auto [mrc, mtext] = run(binary() + " merge " + q(dir / "a") + " " + q(dir / "b") + " -o " + q(dir / "merged"));
  ASSERT_EQ(mrc, 0) << mtext;
  // Overlapping or missing layers are refused.
  auto [brc, btext] = run(binary() + " merge " + q(dir / "a") + " " + q(dir / "b") + " " + q(dir / "b") + " -o " +
                          q(dir / "bad"));
  EXPECT_NE(brc, 0);
  EXPECT_NE(btext.find("layer 3 appears in both"), std::string::npos) << btext;
  auto [crc, ctext] = run(binary() + " merge " + q(dir / "a") + " -o " + q(dir / "bad"));
  EXPECT_NE(crc, 0);
  EXPECT_NE(ctext.find("layer 3 is in none"), std::string::npos) << ctext;

  json single = read_json(dir / "single" / "manifest.json");
  json merged = read_json(dir / "merged" / "manifest.json");
  // Equivalent manifests: everything but the packing statistics (and the
  // checksum, which covers them); the source hashes are the union of the parts'.
  for (auto* m : {&single, &merged}) m->erase("packing"), m->erase("checksum");
  EXPECT_EQ(single["source"]["tensors"], merged["source"]["tensors"]);
  EXPECT_EQ(single["tensors"], merged["tensors"]);
  EXPECT_EQ(single["layers"], merged["layers"]);
  EXPECT_EQ(single["totals"], merged["totals"]);
  EXPECT_EQ(single, merged);
  // Byte-identical shards (same order, same shard size).
  ASSERT_EQ(single["shards"].size(), merged["shards"].size());
  for (const auto& s : single["shards"]) {
    const std::string f = s["file"];
    auto [rc, text] = run("cmp " + q(dir / "single" / f) + " " + q(dir / "merged" / f));
    EXPECT_EQ(rc, 0) << f << ": " << text;
  }
  auto [vrc, vtext] = run(binary() + " verify " + q(dir / "merged"));
  EXPECT_EQ(vrc, 0) << vtext;
}

}  // namespace
}  // namespace eq::test
