// Reading profile.json defensively: the sidecar must be the one profile.json
// was written with (its XXH64 is recorded), and the dims and expert lists are
// checked before any per-expert table is sized from them.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/hash.h"
#include "plan/allocation.h"
#include "plan/importance.h"
#include "plan/profile_inputs.h"
#include "profile/profile.h"
#include "profile/run.h"
#include "test_support.h"

namespace eq::profile {
namespace {

namespace fs = std::filesystem;

Profile calib_profile(int64_t max_tokens) {
  ProfileRequest r;
  r.model_path = (test::data_dir() / "tinymoe").string();
  r.source = SourceKind::kCalib;
  r.input_path = (test::data_dir() / "corpus/calib_small.txt.zst").string();
  r.policy = default_policy();
  r.sensitivity = false;
  r.max_tokens = max_tokens;
  return run_profile(r);
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A kill between the final renames of `expertquant profile` can leave the new
// sidecar beside the previous profile.json (simulated here by copying it
// there): both readers refuse the pair, naming both files.
TEST(ProfileSidecar, MismatchedSidecarIsRefusedNamingBothFiles) {
  const fs::path a = test::temp_dir("sidecar_a"), b = test::temp_dir("sidecar_b");
  Profile pa = calib_profile(128), pb = calib_profile(256);
  write_profile(pa, (a / "profile.json").string());
  write_profile(pb, (b / "profile.json").string());
  ASSERT_EQ(pa.importance_file, "profile.importance.safetensors");
  const fs::path side_a = a / pa.importance_file, side_b = b / pb.importance_file;

  // profile.json records the sidecar's hash, and the matching pair reads back.
  const auto ja = nlohmann::json::parse(read_text(a / "profile.json"));
  EXPECT_EQ(ja["importance_xxh64"], hash_hex(xxhash64(read_text(side_a))));
  const Profile back = read_profile((a / "profile.json").string());
  EXPECT_EQ(back.stats.layers[0].experts.size(), pa.stats.layers[0].experts.size());
  for (size_t e = 0; e < back.stats.layers[0].experts.size(); ++e) {
    if (pa.stats.layers[0].experts[e].tokens > 0) {
      EXPECT_EQ(back.stats.layers[0].experts[e].energy_in, pa.stats.layers[0].experts[e].energy_in);
    } else {
      EXPECT_TRUE(back.stats.layers[0].experts[e].energy_in.empty());  // absent from the sidecar
    }
  }
  EXPECT_NO_THROW(plan::read_profile_inputs((a / "profile.json").string()));

  ASSERT_NE(read_text(side_a), read_text(side_b));  // different calibration, different energies
  fs::copy_file(side_b, side_a, fs::copy_options::overwrite_existing);
  const std::string expect_hash = hash_hex(xxhash64(read_text(side_b)));
  for (const std::string& msg : {error_of([&] { read_profile((a / "profile.json").string()); }),
                                 error_of([&] { plan::read_profile_inputs((a / "profile.json").string()); })}) {
    EXPECT_NE(msg.find("profile " + (a / "profile.json").string() + " and importance file " + side_a.string() +
                       " do not belong together"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("the sidecar's XXH64 is " + expect_hash + ", the profile records " +
                       ja["importance_xxh64"].get<std::string>()),
              std::string::npos)
        << msg;
  }

  // A malformed recorded hash is an error too; a profile without the field
  // (written before it existed, or by hand) is read as before (b's own pair:
  // a foreign sidecar has energies of experts the profile never routed).
  auto edited = nlohmann::json::parse(read_text(b / "profile.json"));
  edited["importance_xxh64"] = "not-a-hash";
  fs::copy_file(side_b, a / "edited.importance.safetensors");
  edited["importance_file"] = "edited.importance.safetensors";
  plan::seal_profile(edited);
  write_text(a / "edited.json", edited.dump());
  EXPECT_NE(error_of([&] { read_profile((a / "edited.json").string()); })
                .find("field 'importance_xxh64': expected 16 hex digits"),
            std::string::npos);
  edited.erase("importance_xxh64");
  plan::seal_profile(edited);
  write_text(a / "edited.json", edited.dump());
  EXPECT_NO_THROW(read_profile((a / "edited.json").string()));
}

// Dims and expert lists are checked before the statistics are sized: a
// profile.json of a few hundred bytes cannot make the reader allocate
// gigabytes of per-expert energies.
TEST(ProfileRead, DeclaredSizesAreBoundedBeforeAllocating) {
  const fs::path dir = test::temp_dir("profile_limits");
  Profile p = calib_profile(128);
  write_profile(p, (dir / "profile.json").string());
  const auto good = nlohmann::json::parse(read_text(dir / "profile.json"));
  const std::string path = (dir / "bad.json").string();
  auto expect = [&](const nlohmann::json& j, const std::string& needle, ErrorKind kind) {
    write_text(path, j.dump());
    try {
      read_profile(path);
      ADD_FAILURE() << "accepted; expected " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("profile " + path + ": " + needle), std::string::npos) << e.what();
      EXPECT_EQ(e.kind(), kind) << e.what();
    }
  };
  auto with_model = [&](const std::string& key, const nlohmann::json& v) {
    auto j = good;
    j["model"][key] = v;
    return j;
  };
  expect(with_model("hidden_size", int64_t(1) << 40), "field 'model.hidden_size': 1099511627776 exceeds the limit of 16777216",
         ErrorKind::kResource);
  expect(with_model("moe_intermediate_size", -5), "field 'model.moe_intermediate_size': expected an integer >= 1",
         ErrorKind::kInvalidInput);
  // Before these checks a negative count reached vector::resize (std::length_error
  // escaped the reader: tests/fuzz/corpus/profile/crash_negative_num_experts).
  expect(with_model("num_experts", -1), "field 'model.num_experts': expected an integer >= 1", ErrorKind::kInvalidInput);
  expect(with_model("num_experts", 1000000), "field 'model.num_experts': 1000000 exceeds the limit of 65536",
         ErrorKind::kResource);
  expect(with_model("top_k", 100), "field 'model.top_k': 100 is more than num_experts " +
                                       std::to_string(p.stats.num_experts), ErrorKind::kInvalidInput);
  // num_experts within the bounds but not what the layers list.
  expect(with_model("num_experts", 60000), "field 'layers[0].experts': " + std::to_string(p.stats.num_experts) +
                                               " entries, expected 60000", ErrorKind::kInvalidInput);
  auto many_layers = good;
  many_layers["layers"] = nlohmann::json::array();
  for (int i = 0; i < 5000; ++i) many_layers["layers"].push_back(nlohmann::json::object());
  expect(many_layers, "field 'layers': 5000 entries exceed the limit of 4096", ErrorKind::kResource);
}

// Finding: profile.json was not sealed. Any edit is refused by both readers
// (pack's and merge's) naming the file; a re-sealed file that breaks a value
// rule is refused naming the field.
class ProfileSeal : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(test::temp_dir("profile_seal"));
    Profile a = calib_profile(128), b = calib_profile(256), c = calib_profile(8);
    write_profile(a, (*dir_ / "a" / "profile.json").string());
    write_profile(b, (*dir_ / "b" / "profile.json").string());
    write_profile(c, (*dir_ / "c" / "profile.json").string());
  }
  static void TearDownTestSuite() { delete dir_; }
  static nlohmann::json good() { return nlohmann::json::parse(read_text(*dir_ / "a" / "profile.json")); }
  // `j` written beside a's sidecar; the messages of both readers.
  static std::vector<std::string> errors(const nlohmann::json& j) {
    const std::string path = (*dir_ / "a" / "edited.json").string();
    write_text(path, j.dump(1));
    return {error_of([&] { read_profile(path); }), error_of([&] { plan::read_profile_inputs(path); })};
  }
  static std::string label() { return "profile " + (*dir_ / "a" / "edited.json").string() + ": "; }
  static fs::path* dir_;
};
fs::path* ProfileSeal::dir_ = nullptr;

TEST_F(ProfileSeal, WrittenProfilesAreSealedAndReadBack) {
  const auto j = good();
  ASSERT_TRUE(j.contains("checksum"));
  EXPECT_EQ(j["checksum"], hash_hex(plan::profile_checksum(j)));
  EXPECT_EQ(j["version"], 3);
  for (const std::string& e : errors(j)) EXPECT_EQ(e, "");
}

TEST_F(ProfileSeal, AnyEditIsRefusedNamingTheFile) {
  const auto side_b = *dir_ / "b" / "profile.importance.safetensors";
  std::vector<nlohmann::json> edits;
  auto j = good();
  j["layers"][0]["experts"][0]["gate_sum"] = 12.5;  // a value no rule checks
  edits.push_back(j);
  j = good();
  j["calibration"]["slices"][0]["first_token"] = 1024;  // would dodge merge's overlap check
  edits.push_back(j);
  j = good();
  // A foreign sidecar with its hash rewritten.
  fs::copy_file(side_b, *dir_ / "a" / "foreign.importance.safetensors", fs::copy_options::overwrite_existing);
  j["importance_file"] = "foreign.importance.safetensors";
  j["importance_xxh64"] = hash_hex(xxhash64(read_text(side_b)));
  edits.push_back(j);
  for (const auto& edit : edits)
    for (const std::string& e : errors(edit)) {
      EXPECT_NE(e.find(label() + "content checksum "), std::string::npos) << e;
      EXPECT_NE(e.find("differs from the recorded checksum " + good()["checksum"].get<std::string>()), std::string::npos)
          << e;
    }
  // The same edit re-sealed is read: the checksum is what refused it.
  plan::seal_profile(edits[0]);
  for (const std::string& e : errors(edits[0])) EXPECT_EQ(e, "");
  auto old = good();
  old["version"] = 2;
  for (const std::string& e : errors(old)) EXPECT_NE(e.find(label() + "field 'version': 2 predates the content checksum"), std::string::npos) << e;
}

TEST_F(ProfileSeal, ResealedValuesBreakingARuleAreRefusedNamingTheField) {
  const auto g = good();
  const int64_t top_k = g["model"]["top_k"];
  struct Case {
    std::function<void(nlohmann::json&)> edit;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {[](auto& j) { j["layers"][1]["experts"][2]["tokens"] = -3; }, "field 'layers[1].experts[2].tokens': expected an integer in [0, 128], got -3"},
      {[](auto& j) { j["layers"][1]["tokens"] = -1; }, "field 'layers[1].tokens': expected an integer >= 0"},
      {[](auto& j) { j["layers"][0]["experts"][5]["tokens"] = j["layers"][0]["experts"][5]["tokens"].template get<int64_t>() + 1; },
       "field 'layers[0].tokens': 128 tokens × top_k " + std::to_string(top_k) + " routed slots, but the experts' tokens sum to " +
           std::to_string(128 * top_k + 1)},
      {[](auto& j) { j["calibration"]["slices"][0]["tokens"] = -128; }, "field 'calibration.slices[0].tokens': expected an integer >= 0"},
      {[](auto& j) { j["calibration"]["tokens"] = 4096; }, "field 'calibration.tokens': 4096, but the slices hold 128 tokens"},
      {[](auto& j) {
         auto& x = j["layers"][0]["experts"][3];
         x["class"] = x["class"] == "critical" ? "standard" : "critical";
       },
       "field 'layers[0].experts[3].class': "},
      {[](auto& j) {
         // Two slices of the same tokens in one profile.
         j["calibration"]["slices"].push_back(j["calibration"]["slices"][0]);
         j["calibration"]["tokens"] = 256;
       },
       ""},
  };
  for (const Case& c : cases) {
    auto j = good();
    c.edit(j);
    plan::seal_profile(j);
    const auto e = errors(j);
    if (c.needle.empty()) {  // merge's reader only: pack reads no slices' tokens
      EXPECT_NE(e[0].find("both hold tokens [0, 128) of "), std::string::npos) << e[0];
      continue;
    }
    for (const std::string& msg : e) EXPECT_NE(msg.find(label() + c.needle), std::string::npos) << msg;
  }
}

// A foreign sidecar behind a re-sealed profile: the writer leaves never-routed
// experts out, so energies for one of them are another run's.
TEST_F(ProfileSeal, ResealedForeignSidecarIsRefusedNamingTheExpert) {
  auto j = nlohmann::json::parse(read_text(*dir_ / "c" / "profile.json"));  // 8 tokens: most experts never routed
  int64_t never = -1;
  for (size_t e = 0; e < j["layers"][0]["experts"].size() && never < 0; ++e)
    if (j["layers"][0]["experts"][e]["tokens"] == 0) never = int64_t(e);
  ASSERT_GE(never, 0);
  const fs::path foreign = *dir_ / "c" / "foreign.importance.safetensors";
  fs::copy_file(*dir_ / "b" / "profile.importance.safetensors", foreign, fs::copy_options::overwrite_existing);
  j["importance_file"] = "foreign.importance.safetensors";
  j["importance_xxh64"] = hash_hex(xxhash64(read_text(foreign)));
  plan::seal_profile(j);
  const std::string path = (*dir_ / "c" / "edited.json").string();
  write_text(path, j.dump(1));
  EXPECT_NE(error_of([&] { read_profile(path); })
                .find("importance file " + foreign.string() + " holds energies of expert "),
            std::string::npos)
      << error_of([&] { read_profile(path); });
}

// Finding: merging a profile without sensitivity into one with it dropped the
// table silently. Refused, naming both files.
TEST(ProfileMerge, SensitivityInSomePartsOnlyIsRefusedNamingBoth) {
  Profile a = calib_profile(128);
  Profile b = a;
  b.calibration[0].first_token = 128;  // disjoint slices: only the sensitivity rule can refuse
  ASSERT_NO_THROW(merge_profiles({a, b}, {"a.json", "b.json"}));
  a.sensitivity.formats = {"int8_row"};
  a.sensitivity.proxy_of = {""};
  for (const auto& ls : a.stats.layers) a.sensitivity.layers.emplace_back(ls.experts.size(), ExpertSensitivity{});
  ASSERT_FALSE(a.sensitivity.empty());
  EXPECT_NE(error_of([&] { merge_profiles({a, b}, {"a.json", "b.json"}); })
                .find("merge: a.json has a sensitivity table, b.json has none"),
            std::string::npos);
  EXPECT_NE(error_of([&] { merge_profiles({b, a}, {"b.json", "a.json"}); })
                .find("merge: a.json has a sensitivity table, b.json has none"),
            std::string::npos);
  b.sensitivity = a.sensitivity;
  b.sensitivity.formats = {"fp4_g32"};
  EXPECT_NE(error_of([&] { merge_profiles({a, b}, {"a.json", "b.json"}); })
                .find("merge: a.json and b.json measured sensitivity for different formats"),
            std::string::npos);
}

}  // namespace
}  // namespace eq::profile
