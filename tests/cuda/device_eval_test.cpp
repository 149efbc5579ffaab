// `eval --device cuda` against `eval` on the CPU's float32 path (ctest label
// `cuda`): with the quality passes' expert prefill x as two bf16 parts (the
// default there) the bundled model's bits per byte match the CPU's within
// 2e-5 relative (measured 1.4e-6), and with x rounded to bf16 once
// (EXPERTQUANT_GPU_SPLIT_X=0) they move by more than 1e-5 (measured -2.6e-4),
// so the test sees which one ran; the report says which.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "exec/cuda/device_exec.h"
#include "exec/packed_fixture.h"
#include "test_support.h"

namespace eq::eval {
namespace {

namespace fs = std::filesystem;

struct Quality {
  double bits = 0;
  bool split = false;
};

// eval of `packed` against the bundled model on 2,048 tokens of prose, its
// quality pass only, under the environment `env` ("VAR=VALUE ..." or "").
Quality eval_of(const fs::path& packed, const std::string& device, const std::string& env, const fs::path& json) {
  std::string output;
  const std::string cmd = env + (env.empty() ? "" : " ") + test::binary() + " eval --packed " + packed.string() +
                          " --model " + test::tinymoe_path() + " --text " +
                          (test::data_dir() / "corpus" / "eval_prose.txt.zst").string() +
                          " --max-tokens 2048 --no-collapse --no-latency --device " + device + " --json-out " +
                          json.string();
  const int rc = test::run_command(cmd, &output);
  EXPECT_EQ(rc, 0) << cmd << "\n" << output;
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  Quality q;
  q.bits = j.at("quality").at("overall").at("bits_packed").get<double>();
  if (device == "cuda") q.split = j.at("machine").at("gpu").at("quality_x_split").get<bool>();
  return q;
}

TEST(DeviceEval, QualityMatchesTheCpusFloat32Path) {
  const std::string why = exec::cuda::unavailable_reason();
  if (!why.empty()) GTEST_SKIP() << "no GPU: " << why;
  const fs::path dir = test::temp_dir("device_eval");
  const fs::path packed = dir / "packed";
  std::string output;
  ASSERT_EQ(test::run_command(test::binary() + " pack --model " + test::tinymoe_path() +
                                  " --uniform int8_row --force -o " + packed.string(),
                              &output),
            0)
      << output;
  const Quality cpu = eval_of(packed, "cpu", "EXPERTQUANT_BATCH_INT8=0", dir / "cpu.json");
  const Quality split = eval_of(packed, "cuda", "", dir / "split.json");
  const Quality once = eval_of(packed, "cuda", "EXPERTQUANT_GPU_SPLIT_X=0", dir / "once.json");
  std::printf("bits per byte: CPU float32 %.7f, GPU x in two bf16 parts %.7f (%+.2e), in one %.7f (%+.2e)\n",
              cpu.bits, split.bits, split.bits / cpu.bits - 1, once.bits, once.bits / cpu.bits - 1);
  EXPECT_TRUE(split.split);
  EXPECT_FALSE(once.split);
  EXPECT_LE(std::fabs(split.bits / cpu.bits - 1), 2e-5);
  EXPECT_GT(std::fabs(once.bits / cpu.bits - 1), 1e-5);
}

}  // namespace
}  // namespace eq::eval
