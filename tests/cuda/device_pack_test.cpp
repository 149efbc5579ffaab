// expertquant pack --device cuda (ctest label `cuda`): without a GPU (or in a
// build without CUDA) one line and exit 4 before any output (profile too); with one, the
// output folder equals a CPU pack's byte for byte, except the manifest's
// run figures (packing: seconds, threads, memory) and the checksum over them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "quant/cuda/cuda_quantize.h"
#include "test_support.h"

namespace eq {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string pack_command(const std::string& format, const fs::path& out, const std::string& device) {
  return test::binary() + " pack --model " + (test::data_dir() / "tinymoe").string() + " --uniform " + format +
         " -o " + out.string() + " --device " + device;
}

TEST(DevicePack, RefusedWithoutGpu) {
  const std::string why = quant::cuda::unavailable_reason();
  if (why.empty()) GTEST_SKIP() << "a GPU is present: the refusal is not reachable";
  const fs::path out = test::temp_dir("device_pack_refused") / "packed";
  std::string output;
  EXPECT_EQ(test::run_command(pack_command("fp4_g32", out, "cuda"), &output), 4) << output;
  EXPECT_EQ(output, "expertquant: error: --device cuda: " + why + "\n");
  EXPECT_FALSE(fs::exists(out));
}

TEST(DeviceProfile, RefusedWithoutGpu) {
  const std::string why = quant::cuda::unavailable_reason();
  if (why.empty()) GTEST_SKIP() << "a GPU is present: the refusal is not reachable";
  const fs::path out = test::temp_dir("device_profile_refused") / "profile.json";
  std::string output;
  EXPECT_EQ(test::run_command(test::binary() + " profile --model " + (test::data_dir() / "tinymoe").string() +
                                  " --calib " + (test::data_dir() / "corpus" / "calib_small.txt.zst").string() +
                                  " --max-tokens 64 -o " + out.string() + " --device cuda",
                              &output),
            4)
      << output;
  EXPECT_EQ(output, "expertquant: error: --device cuda: " + why + "\n");
  EXPECT_FALSE(fs::exists(out));
}

TEST(DevicePack, SameFolderAsCpu) {
  const std::string why = quant::cuda::unavailable_reason();
  if (!why.empty()) GTEST_SKIP() << "no GPU quantizer: " << why;
  const fs::path dir = test::temp_dir("device_pack_same");
  for (const std::string format : {"fp4_g32", "mxfp4", "nvfp4", "int4_g32", "int2_g64", "int3_g32", "trellis2",
                                   "trellis3_lut", "trellis4"}) {
    const fs::path cpu = dir / (format + "-cpu"), gpu = dir / (format + "-cuda");
    std::string output;
    ASSERT_EQ(test::run_command(pack_command(format, cpu, "cpu"), &output), 0) << output;
    // The exact search: the CPU's bit for bit (the half search is DevicePack.HalfSearchMarked's).
    ASSERT_EQ(test::run_command(pack_command(format, gpu, "cuda --trellis-search exact"), &output), 0) << output;
    size_t files = 0;
    for (const auto& entry : fs::directory_iterator(cpu)) {
      const std::string name = entry.path().filename().string();
      ++files;
      const std::string a = read_file(entry.path()), b = read_file(gpu / name);
      if (name != "manifest.json") {
        EXPECT_TRUE(a == b) << format << ": " << name << " differs";
        continue;
      }
      nlohmann::json ma = nlohmann::json::parse(a), mb = nlohmann::json::parse(b);
      for (auto* m : {&ma, &mb}) {
        m->erase("packing");
        m->erase("checksum");
      }
      EXPECT_EQ(ma, mb) << format << ": manifests differ beyond the run figures";
    }
    EXPECT_GE(files, 3u) << format;
  }
}

// The default GPU search of trellis rows is the half one: the manifest marks
// every expert it made, and no other; a GPU list of one GPU packs the same bytes.
TEST(DevicePack, HalfSearchMarked) {
  const std::string why = quant::cuda::unavailable_reason();
  if (!why.empty()) GTEST_SKIP() << "no GPU quantizer: " << why;
  const fs::path dir = test::temp_dir("device_pack_half");
  for (const std::string format : {"trellis2", "fp4_g32"}) {
    const fs::path all = dir / (format + "-cuda"), first = dir / (format + "-cuda0");
    std::string output;
    ASSERT_EQ(test::run_command(pack_command(format, all, "cuda"), &output), 0) << output;
    ASSERT_EQ(test::run_command(pack_command(format, first, "cuda:0"), &output), 0) << output;
    const nlohmann::json m = nlohmann::json::parse(read_file(all / "manifest.json"));
    size_t experts = 0, marked = 0;
    for (const auto& layer : m["layers"])
      for (const auto& e : layer["experts"]) {
        ++experts;
        if (e.contains("search")) {
          ++marked;
          EXPECT_EQ(e["search"], "half");
        }
      }
    EXPECT_GT(experts, 0u);
    EXPECT_EQ(marked, format == "trellis2" ? experts : 0u) << format;
    for (const auto& entry : fs::directory_iterator(all)) {
      const std::string name = entry.path().filename().string();
      if (name != "manifest.json") {
        EXPECT_TRUE(read_file(entry.path()) == read_file(first / name)) << format << " " << name;
      }
    }
  }
}

}  // namespace
}  // namespace eq
