// config.json "quantization_config": which quantized source layouts we read
// exactly, and a one-line refusal for every other one.
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/quantized_source.h"

namespace eq::io {

using nlohmann::json;

namespace {

constexpr const char* kSupported = "(supported: fp8 with block scales, mxfp4)";

// weight_block_size = [B0, B1], positive integers.
void parse_block_size(const json& qc, const std::string& path, SourceQuantization& q) {
  const auto it = qc.find("weight_block_size");
  if (it == qc.end() || it->is_null())
    unsupported(path + ": quantization_config.weight_block_size is missing for quant_method 'fp8' "
                       "(per-tensor fp8 is not supported; fp8 needs block scales [B0, B1])");
  const std::string bad = path + ": quantization_config.weight_block_size of quant_method 'fp8' must be " +
                          "two positive integers [B0, B1], found " + it->dump();
  if (!it->is_array() || it->size() != 2) invalid(bad);
  int64_t b[2];
  for (size_t i = 0; i < 2; ++i) {
    const json& v = (*it)[i];
    if (!v.is_number_integer()) invalid(bad);
    // Unsigned values beyond int64 would wrap in get<int64_t>().
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) invalid(bad);
    b[i] = v.get<int64_t>();
    if (b[i] <= 0) invalid(bad);
  }
  q.block_rows = b[0];
  q.block_cols = b[1];
}

void parse_fmt(const json& qc, const std::string& path, SourceQuantization& q) {
  const auto it = qc.find("fmt");
  if (it == qc.end() || it->is_null()) return;
  if (!it->is_string()) invalid(path + ": quantization_config.fmt of quant_method 'fp8' is not a string");
  const std::string fmt = it->get<std::string>();
  if (fmt != "e4m3" && fmt != "e5m2")
    unsupported(path + ": quantization_config.fmt '" + fmt + "' of quant_method 'fp8' is not supported " +
                "(supported: e4m3, e5m2)");
  q.fp8_fmt = fmt;
}

}  // namespace

std::string SourceQuantization::summary() const {
  switch (method) {
    case SourceQuant::kNone:
      return "none";
    case SourceQuant::kFp8Block:
      return "fp8" + (fp8_fmt.empty() ? std::string() : " " + fp8_fmt) + ", " + std::to_string(block_rows) + "x" +
             std::to_string(block_cols) + " block scales";
    case SourceQuant::kMxfp4:
      return "mxfp4";
  }
  return "unknown";
}

SourceQuantization parse_quantization_config(const json& config, const std::string& path) {
  SourceQuantization q;
  if (!config.is_object()) invalid(path + ": config is not a JSON object");
  const auto it = config.find("quantization_config");
  if (it == config.end() || it->is_null()) return q;
  if (!it->is_object()) invalid(path + ": quantization_config is not an object");
  const json& qc = *it;
  const auto m = qc.find("quant_method");
  if (m == qc.end() || m->is_null())
    unsupported(path + ": quantization_config has no quant_method, so its weights cannot be read exactly " +
                kSupported);
  if (!m->is_string()) invalid(path + ": quantization_config.quant_method is not a string");
  const std::string method = m->get<std::string>();
  if (method == "fp8") {
    q.method = SourceQuant::kFp8Block;
    parse_block_size(qc, path, q);
    parse_fmt(qc, path, q);
    return q;
  }
  if (method == "mxfp4") {
    q.method = SourceQuant::kMxfp4;
    return q;
  }
  unsupported(path + ": quantization_config.quant_method '" + method + "' is not supported " + kSupported);
}

}  // namespace eq::io
