// parse_quantization_config: the methods we read exactly, and one-line
// refusals (exit 4 for a method, exit 2 for a malformed field) for the rest.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/quantized_source.h"

namespace eq {
namespace {

using nlohmann::json;
using io::parse_quantization_config;
using io::SourceQuant;

const std::string kPath = "/models/x/config.json";

json with_qc(const json& qc) { return json{{"model_type", "deepseek_v3"}, {"quantization_config", qc}}; }

// The error thrown for `config`; fails the test if none.
Error error_of(const json& config) {
  try {
    parse_quantization_config(config, kPath);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(kPath), std::string::npos) << "names the file: " << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line: " << e.what();
    return e;
  }
  ADD_FAILURE() << "no error for " << config.dump();
  return Error(ErrorKind::kInternal, "");
}

TEST(QuantizationConfig, AbsentOrNullIsNone) {
  EXPECT_EQ(parse_quantization_config(json{{"model_type", "qwen3_moe"}}, kPath).method, SourceQuant::kNone);
  EXPECT_EQ(parse_quantization_config(with_qc(nullptr), kPath).method, SourceQuant::kNone);
  EXPECT_EQ(parse_quantization_config(json::object(), kPath).summary(), "none");
}

TEST(QuantizationConfig, Fp8BlockScales) {
  const auto q = parse_quantization_config(
      with_qc({{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"},
               {"weight_block_size", {128, 128}}}),
      kPath);
  EXPECT_EQ(q.method, SourceQuant::kFp8Block);
  EXPECT_EQ(q.block_rows, 128);
  EXPECT_EQ(q.block_cols, 128);
  EXPECT_EQ(q.fp8_fmt, "e4m3");
  EXPECT_EQ(q.summary(), "fp8 e4m3, 128x128 block scales");

  const auto r = parse_quantization_config(with_qc({{"quant_method", "fp8"}, {"weight_block_size", {64, 32}}}), kPath);
  EXPECT_EQ(r.block_rows, 64);
  EXPECT_EQ(r.block_cols, 32);
  EXPECT_EQ(r.fp8_fmt, "");
  EXPECT_EQ(r.summary(), "fp8, 64x32 block scales");
  EXPECT_EQ(parse_quantization_config(
                with_qc({{"quant_method", "fp8"}, {"fmt", "e5m2"}, {"weight_block_size", {128, 128}}}), kPath)
                .fp8_fmt,
            "e5m2");
}

TEST(QuantizationConfig, Mxfp4IgnoresModulesToNotConvert) {
  const auto q = parse_quantization_config(
      with_qc({{"quant_method", "mxfp4"}, {"modules_to_not_convert", {"model.layers.*.self_attn", "lm_head"}}}),
      kPath);
  EXPECT_EQ(q.method, SourceQuant::kMxfp4);
  EXPECT_EQ(q.summary(), "mxfp4");
}

TEST(QuantizationConfig, OtherMethodsAreUnsupported) {
  for (const char* method : {"gptq", "awq", "compressed-tensors", "bitsandbytes", "hqq", "fbgemm_fp8", "aqlm"}) {
    SCOPED_TRACE(method);
    const Error e = error_of(with_qc({{"quant_method", method}, {"bits", 4}}));
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_EQ(e.exit_code(), 4);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("quantization_config.quant_method '" + std::string(method) + "' is not supported"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("fp8 with block scales, mxfp4"), std::string::npos) << msg;
  }
  const Error missing = error_of(with_qc({{"bits", 4}}));
  EXPECT_EQ(missing.kind(), ErrorKind::kUnsupported);
  EXPECT_NE(std::string(missing.what()).find("quant_method"), std::string::npos) << missing.what();
}

TEST(QuantizationConfig, Fp8WithoutBlockSizeIsUnsupported) {
  const Error e = error_of(with_qc({{"quant_method", "fp8"}, {"activation_scheme", "static"}}));
  EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  EXPECT_NE(std::string(e.what()).find("weight_block_size"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("'fp8'"), std::string::npos) << e.what();
  const Error fmt = error_of(with_qc({{"quant_method", "fp8"}, {"fmt", "e3m4"}, {"weight_block_size", {128, 128}}}));
  EXPECT_EQ(fmt.kind(), ErrorKind::kUnsupported);
  EXPECT_NE(std::string(fmt.what()).find("fmt 'e3m4'"), std::string::npos) << fmt.what();
}

TEST(QuantizationConfig, MalformedFieldsAreInvalid) {
  const std::vector<std::pair<json, std::string>> cases = {
      {with_qc({{"quant_method", "fp8"}, {"weight_block_size", {128}}}), "weight_block_size"},
      {with_qc({{"quant_method", "fp8"}, {"weight_block_size", {128, 128, 1}}}), "weight_block_size"},
      {with_qc({{"quant_method", "fp8"}, {"weight_block_size", {0, 128}}}), "weight_block_size"},
      {with_qc({{"quant_method", "fp8"}, {"weight_block_size", {-128, 128}}}), "weight_block_size"},
      {with_qc({{"quant_method", "fp8"}, {"weight_block_size", {128.5, 128}}}), "weight_block_size"},
      {with_qc({{"quant_method", "fp8"}, {"weight_block_size", {"128", 128}}}), "weight_block_size"},
      {with_qc({{"quant_method", "fp8"}, {"weight_block_size", "128x128"}}), "weight_block_size"},
      {with_qc({{"quant_method", "fp8"}, {"weight_block_size", {18446744073709551615ull, 128}}}),
       "weight_block_size"},
      {with_qc({{"quant_method", "fp8"}, {"fmt", 4}, {"weight_block_size", {128, 128}}}), "fmt"},
      {with_qc({{"quant_method", 8}}), "quant_method"},
      {with_qc("fp8"), "quantization_config"},
      {json::array(), "config"},
  };
  for (const auto& [config, field] : cases) {
    SCOPED_TRACE(config.dump());
    const Error e = error_of(config);
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << e.what();
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace eq
