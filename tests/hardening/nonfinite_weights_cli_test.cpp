// One finiteness rule for every weight a command reads (io/finite_values.h),
// end to end through the expertquant binary: a checkpoint with a NaN expert
// weight, a NaN norm or an F16 infinity is refused by generate, perplexity and
// pack naming the tensor and the flat index of the value, never run into
// garbage text or a "nan" figure; verify reports a non-finite value copied
// into a pack. Every test writes its own checkpoint from the bundled model.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/numeric.h"
#include "io/safetensors.h"
#include "hardening/cli_checks.h"
#include "test_support.h"

namespace eq {
namespace {

namespace fs = std::filesystem;

int run(const std::string& args, std::string* out) { return test::run_cli(args, out); }

void expect_error(int rc, const std::string& out, int code, const std::vector<std::string>& needles) {
  test::expect_cli_error(rc, out, code, needles);
}

struct Stored {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// The bundled model copied to a fresh folder with its tensors passed through
// `edit` (which may change a tensor's dtype and bytes).
fs::path hostile_copy(const std::string& tag, const std::function<void(Stored&)>& edit) {
  const fs::path dir = test::temp_dir(tag) / "model";
  fs::copy(test::data_dir() / "tinymoe", dir, fs::copy_options::recursive);
  const std::string file = (dir / "model.safetensors").string();
  std::vector<Stored> tensors;
  {
    const auto st = io::SafetensorsFile::open(file);
    for (const io::TensorInfo& t : st->tensors()) {
      const auto b = st->view(t).bytes();
      tensors.push_back({t.name, t.dtype, t.shape, {b.begin(), b.end()}});
    }
  }
  for (Stored& t : tensors) edit(t);
  std::vector<io::TensorToWrite> w;
  for (const Stored& t : tensors) w.push_back({t.name, t.dtype, t.shape, t.bytes});
  fs::remove(file);
  io::write_safetensors(file, w);
  return dir;
}

void set_bf16(Stored& t, size_t index, uint16_t value) {
  ASSERT_EQ(t.dtype, DType::kBF16) << t.name;
  std::memcpy(t.bytes.data() + 2 * index, &value, 2);
}

constexpr uint16_t kBf16Nan = 0x7fc0;

fs::path text_file(const fs::path& dir) {
  const fs::path p = dir.parent_path() / "t.txt";
  std::ofstream(p) << std::string(200, 'a');
  return p;
}

// Every routed expert's gate of layer 0 holds a NaN at [0, 7]: whichever the
// router picks, the run reads one.
TEST(NonFiniteWeights, NanExpertWeightIsRefusedByEveryCommand) {
  const fs::path dir = hostile_copy("nan-expert", [](Stored& t) {
    if (t.name.starts_with("model.layers.0.mlp.experts.") && t.name.ends_with(".gate_proj.weight"))
      set_bf16(t, 7, kBf16Nan);
  });
  const std::string where = "gate_proj.weight' holds a non-finite value (nan) at flat index 7 [0, 7]";
  std::string out;
  expect_error(run("generate --model " + dir.string() + " --prompt abc -n 4", &out), out, 2,
               {"model.layers.0.mlp.experts.", where});
  expect_error(run("perplexity --model " + dir.string() + " --text " + text_file(dir).string(), &out), out, 2,
               {"model.layers.0.mlp.experts.", where});
  EXPECT_EQ(out.find("bits per byte"), std::string::npos) << out;
  const fs::path packed = dir.parent_path() / "packed";
  expect_error(run("pack --model " + dir.string() + " --uniform int8_row --threads 1 -o " + packed.string(), &out),
               out, 2, {"model.layers.0.mlp.experts.", where});
  EXPECT_FALSE(fs::exists(packed));
}

// A non-expert tensor is copied into a pack as stored: pack refuses it
// before writing, as generate does before generating.
TEST(NonFiniteWeights, NanNormIsRefusedByPackAndGenerate) {
  const fs::path dir = hostile_copy("nan-norm", [](Stored& t) {
    if (t.name == "model.norm.weight") set_bf16(t, 3, kBf16Nan);
  });
  const std::string where = "tensor 'model.norm.weight' holds a non-finite value (nan) at flat index 3 [3]";
  std::string out;
  const fs::path packed = dir.parent_path() / "packed";
  expect_error(run("pack --model " + dir.string() + " --uniform int8_row --threads 1 -o " + packed.string(), &out),
               out, 2, {where});
  EXPECT_FALSE(fs::exists(packed));
  expect_error(run("generate --model " + dir.string() + " --prompt abc -n 4", &out), out, 2, {where});
}

// An F16 infinity: decoded, it is +inf.
TEST(NonFiniteWeights, F16InfinityIsRefusedNamingTheIndex) {
  const fs::path dir = hostile_copy("f16-inf", [](Stored& t) {
    if (t.name != "model.layers.1.input_layernorm.weight") return;
    std::vector<uint8_t> f16(t.bytes.size());
    for (size_t i = 0; i < t.bytes.size() / 2; ++i) {
      uint16_t b;
      std::memcpy(&b, t.bytes.data() + 2 * i, 2);
      const uint16_t h = i == 5 ? uint16_t{0x7c00} : f32_to_f16(bf16_to_f32(b));
      std::memcpy(f16.data() + 2 * i, &h, 2);
    }
    t.dtype = DType::kF16;
    t.bytes = std::move(f16);
  });
  std::string out;
  expect_error(run("perplexity --model " + dir.string() + " --text " + text_file(dir).string(), &out), out, 2,
               {"tensor 'model.layers.1.input_layernorm.weight' holds a non-finite value (+inf) at flat index 5 [5]"});
}

// verify checks the values of the tensors a pack copies, not only their
// checksums: a NaN written into a finished pack is reported by name.
TEST(NonFiniteWeights, VerifyReportsANonFiniteCopiedTensor) {
  const fs::path dir = test::temp_dir("nan-verify");
  const fs::path packed = dir / "packed";
  std::string out;
  ASSERT_EQ(run("pack --model " + (test::data_dir() / "tinymoe").string() + " --uniform int8_row --threads 1 -o " +
                    packed.string(),
                &out),
            0)
      << out;
  fs::path shard;
  uint64_t offset = 0;
  for (const auto& entry : fs::directory_iterator(packed)) {
    if (entry.path().extension() != ".safetensors") continue;
    const auto st = io::SafetensorsFile::open(entry.path().string());
    const io::TensorInfo* t = st->find("model.norm.weight");
    if (!t) continue;
    ASSERT_EQ(t->dtype, DType::kBF16);
    shard = entry.path();
    std::ifstream in(shard, std::ios::binary);
    unsigned char len[8];
    in.read(reinterpret_cast<char*>(len), 8);
    uint64_t header = 0;
    for (int i = 7; i >= 0; --i) header = (header << 8) | len[i];
    offset = 8 + header + t->begin + 2 * 3;
  }
  ASSERT_FALSE(shard.empty());
  {
    std::fstream f(shard, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(reinterpret_cast<const char*>(&kBf16Nan), 2);
  }
  EXPECT_EQ(run("verify " + packed.string(), &out), 1) << out;
  EXPECT_NE(out.find("tensor 'model.norm.weight' holds a non-finite value (nan) at flat index 3 [3]"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace eq
