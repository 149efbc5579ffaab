// Reading profile.json defensively: the sidecar must be the one profile.json
// was written with (its XXH64 is recorded), and the dims and expert lists are
// checked before any per-expert table is sized from them.
#include <gtest/gtest.h>

#include <filesystem>
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
  // (written before it existed, or by hand) is read as before.
  auto edited = ja;
  edited["importance_xxh64"] = "not-a-hash";
  fs::copy_file(side_b, a / "edited.importance.safetensors");
  edited["importance_file"] = "edited.importance.safetensors";
  write_text(a / "edited.json", edited.dump());
  EXPECT_NE(error_of([&] { read_profile((a / "edited.json").string()); })
                .find("field 'importance_xxh64': expected 16 hex digits"),
            std::string::npos);
  edited.erase("importance_xxh64");
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

}  // namespace
}  // namespace eq::profile
