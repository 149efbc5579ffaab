// Resource limits: inputs that declare absurd sizes are rejected with a
// message before anything is sized from them, and deep or wide JSON is
// handled in linear time without recursing on the stack.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/json_guard.h"
#include "io/safetensors.h"
#include "io/text_file.h"
#include "io/tokens.h"
#include "model/config.h"
#include "plan/allocation.h"
#include "pack/manifest.h"

namespace eq {
namespace {

using nlohmann::json;

// Runs `f`, expects an eq::Error whose message contains `needle`.
template <typename F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "accepted; expected an error mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

std::vector<uint8_t> safetensors_with_header(const std::string& header, size_t data_bytes = 0) {
  std::vector<uint8_t> file(8 + header.size() + data_bytes, 0);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) file[i] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(file.data() + 8, header.data(), header.size());
  return file;
}

std::string deep_json(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

const std::string kTinyConfig = R"({"model_type": "qwen3_moe", "vocab_size": 256, "hidden_size": 128,
  "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
  "num_local_experts": 32, "num_experts_per_tok": 4, "moe_intermediate_size": 64, "intermediate_size": 256})";

TEST(Limits, SafetensorsHugeShapeRejectedBeforeAllocation) {
  // 2^40 x 2^40 f32 overflows 64 bits; 2^31 x 2^30 f32 (2^63 bytes) does not, but the file holds no data.
  expect_error([] {
    io::SafetensorsFile::validate_buffer(
        safetensors_with_header(R"({"w":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,0]}})"),
        "huge");
  }, "overflows");
  expect_error([] {
    io::SafetensorsFile::validate_buffer(
        safetensors_with_header(
            R"({"w":{"dtype":"F32","shape":[2147483648,1073741824],"data_offsets":[0,9223372036854775808]}})"),
        "huge");
  }, "truncated");
  std::vector<uint8_t> claims_terabyte_header(16, 0);
  claims_terabyte_header[5] = 1;  // 2^40-byte header length
  expect_error([&] { io::SafetensorsFile::validate_buffer(claims_terabyte_header, "len"); }, "100,000,000");
}

TEST(Limits, TokenFileClaimingBillionsOfTokens) {
  auto npy = [](const std::string& descr, const std::string& shape) {
    std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
    header.append(64 - (10 + header.size() + 1) % 64, ' ');
    header += '\n';
    std::string file("\x93NUMPY\x01\x00", 8);
    file += static_cast<char>(header.size() & 0xff);
    file += static_cast<char>(header.size() >> 8);
    return file + header;
  };
  const auto t0 = std::chrono::steady_clock::now();
  expect_error([&] { io::parse_token_buffer(npy("<i4", "(4000000000,)"), io::TokenFileFormat::kNpy, "t.npy"); },
               "implies 16000000000");
  // rows x cols x width wraps 64 bits to 0 bytes: must not be taken for an empty file.
  expect_error([&] { io::parse_token_buffer(npy("<i8", "(576460752303423488, 64)"), io::TokenFileFormat::kNpy, "t.npy"); },
               "more than 2^64");
  expect_error([&] { io::parse_token_buffer(npy("<i4", "(1000000000000000, 0)"), io::TokenFileFormat::kNpy, "t.npy"); },
               "empty sequences");
  expect_error([&] { io::parse_token_buffer(npy("<i4", "(-1, -1)"), io::TokenFileFormat::kNpy, "t.npy"); },
               "not a tuple of integers");
  expect_error([&] { io::parse_token_buffer(npy("<i4", "(99999999999999999999999,)"), io::TokenFileFormat::kNpy, "t.npy"); },
               "too large");
  // A 4 MB version-2 header no longer goes through std::regex (which
  // recursed per character and overflowed the stack).
  std::string header = "{'descr': '<i4', 'fortran_order': False, 'shape': (" + std::string(4 << 20, ' ') + "1,), }\n";
  std::string v2("\x93NUMPY\x02\x00", 8);
  for (int i = 0; i < 4; ++i) v2 += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  const std::string one_token("\x05\x00\x00\x00", 4);
  EXPECT_EQ(io::parse_token_buffer(v2 + header + one_token, io::TokenFileFormat::kNpy, "t.npy").sequences.at(0).at(0), 5);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
}

TEST(Limits, ConfigDeclaringHugeModelIsRejected) {
  json j = json::parse(kTinyConfig);
  EXPECT_NO_THROW(model::parse_config(j, "ok"));
  for (const auto& [key, value] : std::vector<std::pair<std::string, int64_t>>{
           {"num_hidden_layers", 1'000'000'000'000}, {"num_local_experts", 100'000'000},
           {"hidden_size", int64_t(1) << 40}, {"vocab_size", int64_t(1) << 40}}) {
    json big = j;
    big[key] = value;
    if (key == "hidden_size") big["head_dim"] = 32;
    SCOPED_TRACE(key);
    try {
      model::parse_config(big, "config.json");
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kResource) << e.what();
      EXPECT_NE(std::string(e.what()).find("more than the supported"), std::string::npos) << e.what();
    }
  }
  json product = j;  // each bound alone is fine, the product is not
  product["num_hidden_layers"] = 4000;
  product["num_local_experts"] = 60000;
  expect_error([&] { model::parse_config(product, "config.json"); }, "num_hidden_layers x experts");
  json wrong = j;
  wrong["dtype"] = 7;  // json::value() would throw nlohmann's type_error here
  expect_error([&] { model::parse_config(wrong, "config.json"); }, "config.json: field 'dtype': expected a string, found number");
}

TEST(Limits, ManifestWithAMillionExpertsIsRejected) {
  json m = {{"schema", "expertquant.manifest"},
            {"version", 2},
            {"tool", {{"version", "0"}}},
            {"source",
             {{"path", "x"},
              {"model_type", "qwen3_moe"},
              {"fingerprint", "0000000000000000"},
              {"num_layers", 1},
              {"num_experts", 1'000'000},
              {"hidden_size", 8},
              {"moe_intermediate_size", 8}}}};
  expect_error([&] { pack::parse_manifest(m, "manifest"); }, "source.num_experts");
}

TEST(Limits, AllocationLimitsAndLinearDuplicateCheck) {
  json a = {{"version", 1}, {"layers", json::array()}};
  // 4,000 layers with no experts: the duplicate check used to search every
  // earlier layer (quadratic); now it compares with the previous one.
  for (int l = 0; l < 4000; ++l) a["layers"].push_back({{"layer", l}, {"experts", json::array()}});
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(plan::parse_allocation(a, "alloc").layers.size(), 4000u);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  a["layers"].push_back({{"layer", 3999}, {"experts", json::array()}});
  expect_error([&] { plan::parse_allocation(a, "alloc"); }, "listed twice");
  json far = {{"version", 1}, {"layers", {{{"layer", 1'000'000'000}, {"experts", json::array()}}}}};
  expect_error([&] { plan::parse_allocation(far, "alloc"); }, "beyond the supported");
}

TEST(Limits, DeepJsonRejectedByEveryReader) {
  const std::string deep = deep_json(1'000'000);
  expect_error([&] { model::parse_config_text(deep, "config.json"); }, "nests deeper");
  expect_error([&] { pack::parse_manifest_text(deep, "manifest.json"); }, "nests deeper");
  expect_error([&] { plan::parse_allocation_text(deep, "alloc.json"); }, "nests deeper");
  expect_error([&] { io::parse_shard_index(deep, "index.json"); }, "nests deeper");
  expect_error([&] { io::parse_token_buffer(deep, io::TokenFileFormat::kJson, "t.json"); }, "nests deeper");
  expect_error([&] { io::parse_token_buffer("{\"tokens\": " + deep + "}", io::TokenFileFormat::kJson, "t.json"); },
               "nests deeper");
  expect_error([&] { io::SafetensorsFile::validate_buffer(safetensors_with_header("{\"a\":" + deep + "}"), "st"); },
               "nests deeper");
  // The allocation reader used to dump() the offending "schema" value into its message.
  expect_error([&] {
    plan::parse_allocation_text("{\"version\": 1, \"schema\": " + deep_json(100) + ", \"layers\": []}", "alloc.json");
  }, "an array");
  // Brackets inside strings do not count; the limit itself is accepted.
  EXPECT_NO_THROW(io::check_json_depth("[\"" + std::string(1000, '[') + "\"]", "s"));
  EXPECT_NO_THROW(io::check_json_depth(deep_json(io::kMaxJsonDepth), "s"));
  expect_error([] { io::check_json_depth(deep_json(io::kMaxJsonDepth + 1), "s"); }, "nests deeper");
}

TEST(Limits, WideJsonIsLinear) {
  // 200,000 token ids: parsed in one pass (no per-id string formatting).
  std::string ids = "[";
  for (int i = 0; i < 200000; ++i) ids += (i ? "," : "") + std::to_string(i % 256);
  ids += "]";
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(io::parse_token_buffer(ids, io::TokenFileFormat::kJson, "wide.json").total(), 200000);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
}

TEST(Limits, ZstdBombStopsAtTheLimit) {
  const std::string zeros(8 << 20, '\0');
  const auto packed = io::zstd_compress(zeros.data(), zeros.size(), 19);
  ASSERT_LT(packed.size(), 4096u);
  try {
    io::zstd_decompress(packed.data(), packed.size(), "bomb.zst", 1 << 20);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kResource) << e.what();
    // The one-shot compressor records the size: refused before decoding.
    EXPECT_NE(std::string(e.what()).find("bomb.zst: declares 8388608 bytes, more than the limit of 1048576"),
              std::string::npos)
        << e.what();
  }
}

// A frame that does not declare its size (as streaming compressors write
// them): 64 RLE blocks of 128 KiB (8 MiB) in 262 bytes stop at the cap while
// decoding.
TEST(Limits, ZstdBombWithoutDeclaredSizeStopsAtTheLimit) {
  std::vector<uint8_t> frame = {0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x38};  // magic; no size, no checksum; window 128 KiB
  for (int b = 0; b < 64; ++b) {
    const uint32_t header = (128u << 10) << 3 | 1u << 1 | (b == 63 ? 1u : 0u);  // RLE block of 128 KiB
    for (int i = 0; i < 3; ++i) frame.push_back(uint8_t(header >> (8 * i)));
    frame.push_back(0);
  }
  ASSERT_EQ(io::zstd_decompress(frame.data(), frame.size(), "bomb.zst", 16 << 20).size(), size_t(8) << 20);
  try {
    io::zstd_decompress(frame.data(), frame.size(), "bomb.zst", 1 << 20);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kResource) << e.what();
    EXPECT_NE(std::string(e.what()).find("bomb.zst: decompresses to more than 1048576 bytes"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace eq
