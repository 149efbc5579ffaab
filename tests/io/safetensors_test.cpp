#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "core/numeric.h"
#include "io/safetensors.h"
#include "safetensors_fixture.h"
#include "test_support.h"

namespace eq {
namespace {

namespace fs = std::filesystem;
using test::raw_safetensors;
using test::write_bytes;

std::string error_of(const std::string& bytes) {
  const auto dir = test::temp_dir("st");
  const std::string path = (dir / "bad.safetensors").string();
  write_bytes(path, bytes);
  try {
    io::SafetensorsFile::open(path);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << "error must name the file: " << e.what();
    return e.what();
  }
  return "";
}

const std::string k8(8, 'x');

struct BadCase {
  const char* label;
  std::string bytes;
  const char* expect;  // substring of the message
};

TEST(SafetensorsRead, RejectsEveryMalformedCase) {
  const std::string ok_entry = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  std::vector<BadCase> cases = {
      {"short file", std::string(5, '\0'), "shorter than the 8-byte"},
      {"huge header length", raw_safetensors("{}", "", 100'000'001), "100,000,000"},
      {"header past end", raw_safetensors("{}", "", 4096), "past the end"},
      {"not starting with brace", raw_safetensors(" {}", ""), "does not start with '{'"},
      {"invalid json", raw_safetensors("{\"a\":", ""), "not valid UTF-8 JSON"},
      {"invalid utf8", raw_safetensors("{\"\xff\xfe\":1}", ""), "not valid UTF-8 JSON"},
      {"not object entry", raw_safetensors(R"({"a":3})", ""), "tensor 'a' entry is not an object"},
      {"unknown dtype", raw_safetensors(R"({"a":{"dtype":"F12","shape":[2],"data_offsets":[0,8]}})", k8),
       "unknown dtype 'F12'"},
      {"negative shape", raw_safetensors(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", k8),
       "tensor 'a' has a shape entry"},
      {"float shape", raw_safetensors(R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", k8),
       "tensor 'a' has a shape entry"},
      {"missing offsets", raw_safetensors(R"({"a":{"dtype":"F32","shape":[2]}})", k8), "data_offsets"},
      {"end before begin", raw_safetensors(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", k8),
       "end < begin"},
      {"size mismatch", raw_safetensors(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", k8),
       "needs 12"},
      {"shape overflow",
       raw_safetensors(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", k8),
       "overflows"},
      {"hole", raw_safetensors(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", k8), "hole"},
      {"overlap",
       raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                       k8),
       "overlaps"},
      {"trailing bytes", raw_safetensors("{" + ok_entry + "}", k8 + "zz"), "trailing bytes"},
      {"truncated data", raw_safetensors("{" + ok_entry + "}", "xxxx"), "truncated"},
      {"metadata not object", raw_safetensors(R"({"__metadata__":3})", ""), "__metadata__ is not an object"},
      {"metadata non-string", raw_safetensors(R"({"__metadata__":{"k":1}})", ""), "is not a string"},
      {"duplicate name", raw_safetensors("{" + ok_entry + "," + ok_entry + "}", k8 + k8), "appears twice"},
      {"nul in header", raw_safetensors(std::string("{}\0", 3), ""), "NUL"},
      {"header is array", raw_safetensors("[1]", ""), "does not start with '{'"},
  };
  for (const auto& c : cases) {
    const std::string msg = error_of(c.bytes);
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.label << ": got '" << msg << "'";
  }
}

TEST(SafetensorsRead, AcceptsValidFileWithPaddingAndEmptyTensor) {
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"e":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"a":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]}})";
  std::string padded = header + std::string((8 - (8 + header.size()) % 8) % 8, ' ');
  std::string data(8, '\0');
  const uint16_t vals[4] = {f32_to_bf16(1.0f), f32_to_bf16(-2.0f), f32_to_bf16(0.5f), f32_to_bf16(3.0f)};
  std::memcpy(data.data(), vals, 8);
  const auto dir = test::temp_dir("st");
  const std::string path = (dir / "ok.safetensors").string();
  write_bytes(path, raw_safetensors(padded, data));
  auto f = io::SafetensorsFile::open(path);
  ASSERT_EQ(f->tensors().size(), 2u);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  const auto* a = f->find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 2}));
  auto v = f->view(*a).to_f32();
  EXPECT_EQ(v, (std::vector<float>{1.0f, -2.0f, 0.5f, 3.0f}));
  EXPECT_EQ(f->find("e")->numel(), 0u);
}

TEST(SafetensorsWrite, RoundTripsEveryDtypeAndPadsHeader) {
  const auto dir = test::temp_dir("st");
  const std::string path = (dir / "all.safetensors").string();
  std::vector<std::vector<uint8_t>> storage;
  std::vector<io::TensorToWrite> tensors;
  std::mt19937 rng(5);
  for (DType t : kAllDTypes) {
    const std::vector<int64_t> shape{3, 5};
    std::vector<uint8_t> bytes(15 * dtype_size(t));
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    storage.push_back(bytes);
    tensors.push_back({"t." + std::string(dtype_name(t)), t, shape, {}});
  }
  for (size_t i = 0; i < tensors.size(); ++i) tensors[i].data = storage[i];
  io::write_safetensors(path, tensors, {{"producer", "test"}});
  EXPECT_FALSE(fs::exists(path + ".tmp"));

  // Header length keeps the data 8-aligned and the header is padded with spaces.
  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ((8 + n) % 8, 0u);
  std::string header(n, '\0');
  in.read(header.data(), static_cast<std::streamsize>(n));
  EXPECT_EQ(header[0], '{');
  auto j = nlohmann::json::parse(header);
  EXPECT_EQ(j["__metadata__"]["format"], "pt");
  EXPECT_EQ(j["__metadata__"]["producer"], "test");

  auto f = io::SafetensorsFile::open(path);  // the strict reader accepts what we write
  ASSERT_EQ(f->tensors().size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto* info = f->find(tensors[i].name);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(info->dtype, tensors[i].dtype);
    EXPECT_EQ(info->shape, tensors[i].shape);
    auto bytes = f->view(*info).bytes();
    EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), storage[i].begin())) << tensors[i].name;
  }
}

TEST(SafetensorsWrite, StreamingWriterRemovesTempFileWhenAbandoned) {
  const auto dir = test::temp_dir("st");
  const std::string path = (dir / "partial.safetensors").string();
  {
    io::SafetensorsWriter w(path, {{"a", DType::kF32, {2}}, {"b", DType::kF32, {2}}});
    const float a[2] = {1, 2};
    w.append("a", {reinterpret_cast<const uint8_t*>(a), 8});
    EXPECT_TRUE(fs::exists(path + ".tmp"));
    // destroyed before finish(): e.g. an exception while quantizing the next group
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  io::SafetensorsWriter w(path, {{"a", DType::kF32, {2}}});
  EXPECT_THROW(w.finish(), Error);  // declared tensor never written
}

TEST(SafetensorsWrite, RejectsDuplicateDeclarations) {
  const auto dir = test::temp_dir("st");
  EXPECT_THROW(io::SafetensorsWriter((dir / "d.safetensors").string(),
                                     {{"a", DType::kF32, {1}}, {"a", DType::kF32, {1}}}),
               Error);
}

// ---- sharded checkpoints ----

void write_shard(const fs::path& p, const std::vector<std::string>& names) {
  std::vector<float> v(4, 1.0f);
  std::vector<io::TensorToWrite> t;
  for (const auto& n : names)
    t.push_back({n, DType::kF32, {4}, {reinterpret_cast<const uint8_t*>(v.data()), 16}});
  io::write_safetensors(p.string(), t);
}

void write_index(const fs::path& dir, const nlohmann::json& weight_map) {
  std::ofstream(dir / "model.safetensors.index.json") << nlohmann::json{{"metadata", {{"total_size", 0}}},
                                                                      {"weight_map", weight_map}};
}

std::string checkpoint_error(const fs::path& dir) {
  try {
    io::Checkpoint::open(dir.string());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Checkpoint, ShardedIndexResolvesTensors) {
  auto dir = test::temp_dir("shards");
  write_shard(dir / "model-00001-of-00002.safetensors", {"a", "b"});
  write_shard(dir / "model-00002-of-00002.safetensors", {"c"});
  write_index(dir, {{"a", "model-00001-of-00002.safetensors"},
                    {"b", "model-00001-of-00002.safetensors"},
                    {"c", "model-00002-of-00002.safetensors"}});
  auto c = io::Checkpoint::open(dir.string());
  EXPECT_EQ(c->shards().size(), 2u);
  EXPECT_EQ(c->tensor_names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(c->load_f32("c"), (std::vector<float>{1, 1, 1, 1}));
  EXPECT_THROW(c->info("zzz"), Error);
}

TEST(Checkpoint, BrokenIndexesAreNamed) {
  {
    auto dir = test::temp_dir("shards");
    write_shard(dir / "s1.safetensors", {"a"});
    write_index(dir, {{"a", "s1.safetensors"}, {"b", "s2.safetensors"}});
    auto msg = checkpoint_error(dir);
    EXPECT_NE(msg.find("shard 's2.safetensors' listed in weight_map is missing"), std::string::npos) << msg;
  }
  {
    auto dir = test::temp_dir("shards");
    write_shard(dir / "s1.safetensors", {"a"});
    write_index(dir, {{"a", "s1.safetensors"}, {"b", "s1.safetensors"}});
    auto msg = checkpoint_error(dir);
    EXPECT_NE(msg.find("tensor 'b' is listed in shard 's1.safetensors' but not stored there"), std::string::npos)
        << msg;
  }
  {
    auto dir = test::temp_dir("shards");
    write_shard(dir / "s1.safetensors", {"a", "extra"});
    write_index(dir, {{"a", "s1.safetensors"}});
    auto msg = checkpoint_error(dir);
    EXPECT_NE(msg.find("tensor 'extra' is not listed"), std::string::npos) << msg;
    EXPECT_NE(msg.find("s1.safetensors"), std::string::npos) << msg;
  }
  {
    auto dir = test::temp_dir("shards");
    write_shard(dir / "s1.safetensors", {"a"});
    write_shard(dir / "s2.safetensors", {"a", "b"});  // 'a' stored twice
    write_index(dir, {{"a", "s1.safetensors"}, {"b", "s2.safetensors"}});
    auto msg = checkpoint_error(dir);
    EXPECT_NE(msg.find("tensor 'a' is listed in"), std::string::npos) << msg;
  }
  {
    auto dir = test::temp_dir("shards");
    write_shard(dir / "s1.safetensors", {"a"});
    write_index(dir, {{"a", "../s1.safetensors"}});
    auto msg = checkpoint_error(dir);
    EXPECT_NE(msg.find("outside the checkpoint folder"), std::string::npos) << msg;
  }
}

TEST(Checkpoint, ReadsTheSharedShardedModel) {
  EQ_REQUIRE_SHARED();
  auto c = io::Checkpoint::open((test::shared_dir() / "models/qwen3moe-small").string());
  EXPECT_EQ(c->shards().size(), 3u);
  EXPECT_EQ(c->tensor_names().size(), 1209u);
  const auto& e = c->info("model.layers.5.mlp.experts.63.down_proj.weight");
  EXPECT_EQ(e.shape, (std::vector<int64_t>{192, 64}));
  EXPECT_EQ(e.dtype, DType::kBF16);
}

}  // namespace
}  // namespace eq
