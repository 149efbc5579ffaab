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
    ASSERT_EQ(test::run_command(pack_command(format, gpu, "cuda"), &output), 0) << output;
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

}  // namespace
}  // namespace eq
