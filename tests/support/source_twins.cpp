#include "support/source_twins.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/numeric.h"
#include "io/safetensors.h"

namespace eq::test {

namespace fs = std::filesystem;

double fp8_e4m3_reference(uint8_t v) {
  const int sign = v >> 7, exp = (v >> 3) & 15, man = v & 7;
  if (exp == 15 && man == 7) return std::numeric_limits<double>::quiet_NaN();
  const double mag = exp == 0 ? std::ldexp(man / 8.0, 1 - 7) : std::ldexp(1.0 + man / 8.0, exp - 7);
  return sign ? -mag : mag;
}

double fp8_e5m2_reference(uint8_t v) {
  const int sign = v >> 7, exp = (v >> 2) & 31, man = v & 3;
  double mag;
  if (exp == 31)
    mag = man == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  else
    mag = exp == 0 ? std::ldexp(man / 4.0, 1 - 15) : std::ldexp(1.0 + man / 4.0, exp - 15);
  return sign ? -mag : mag;
}

double e2m1_reference(uint8_t nibble) {
  const int sign = (nibble >> 3) & 1, exp = (nibble >> 1) & 3, man = nibble & 1;
  const double mag = exp == 0 ? 0.5 * man : std::ldexp(1.0 + 0.5 * man, exp - 1);
  return sign ? -mag : mag;  // nibble 8 gives -0.0
}

bool fp8_twin_quantizes(const std::string& name, const std::vector<int64_t>& shape) {
  auto ends_with = [&](const std::string& s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  return shape.size() == 2 && ends_with(".weight") && !ends_with(".gate.weight") &&
         name.find("embed_tokens") == std::string::npos && name.find("lm_head") == std::string::npos &&
         name.find("norm") == std::string::npos;
}

namespace {

constexpr int64_t kBlock = 128;

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
  if (!f) fail(ErrorKind::kIo, p.string() + ": cannot write");
}

template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

struct Fp8Tensor {
  std::vector<uint8_t> codes;
  std::vector<float> scale_inv, dequantized;
  int64_t grid_rows = 0, grid_cols = 0;
};

Fp8Tensor quantize_fp8_blocks(const std::vector<float>& w, int64_t rows, int64_t cols) {
  Fp8Tensor t;
  t.grid_rows = (rows + kBlock - 1) / kBlock;
  t.grid_cols = (cols + kBlock - 1) / kBlock;
  t.codes.resize(w.size());
  t.dequantized.resize(w.size());
  t.scale_inv.resize(static_cast<size_t>(t.grid_rows * t.grid_cols));
  for (int64_t br = 0; br < t.grid_rows; ++br) {
    for (int64_t bc = 0; bc < t.grid_cols; ++bc) {
      const int64_t r1 = std::min(rows, (br + 1) * kBlock), c1 = std::min(cols, (bc + 1) * kBlock);
      float amax = 0.0f;
      for (int64_t r = br * kBlock; r < r1; ++r)
        for (int64_t c = bc * kBlock; c < c1; ++c) amax = std::max(amax, std::fabs(w[r * cols + c]));
      const float s = amax == 0.0f ? 1.0f : amax / 448.0f;
      t.scale_inv[br * t.grid_cols + bc] = s;
      for (int64_t r = br * kBlock; r < r1; ++r) {
        for (int64_t c = bc * kBlock; c < c1; ++c) {
          const uint8_t code = f32_to_fp8_e4m3(w[r * cols + c] / s);
          t.codes[r * cols + c] = code;
          t.dequantized[r * cols + c] = static_cast<float>(fp8_e4m3_reference(code) * static_cast<double>(s));
        }
      }
    }
  }
  return t;
}

}  // namespace

SourceTwins write_source_twins(const fs::path& source, const fs::path& out) {
  SourceTwins twins{out / "fp8", out / "f32", {}};
  fs::create_directories(twins.fp8);
  fs::create_directories(twins.f32);
  const auto ckpt = io::Checkpoint::open(source.string());

  std::vector<std::vector<uint8_t>> storage;  // owns every buffer the writes borrow
  struct Pending {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    size_t buffer;
  };
  std::vector<Pending> fp8, f32;
  auto keep = [&](std::vector<uint8_t> bytes) {
    storage.push_back(std::move(bytes));
    return storage.size() - 1;
  };
  for (const std::string& name : ckpt->tensor_names()) {
    const io::TensorInfo& info = ckpt->info(name);
    const auto raw = ckpt->view(name).bytes();
    if (!dtype_is_float(info.dtype)) {
      const size_t b = keep({raw.begin(), raw.end()});
      fp8.push_back({name, info.dtype, info.shape, b});
      f32.push_back({name, info.dtype, info.shape, b});
      continue;
    }
    const std::vector<float> w = ckpt->load_f32(name);
    if (fp8_twin_quantizes(name, info.shape)) {
      const Fp8Tensor q = quantize_fp8_blocks(w, info.shape[0], info.shape[1]);
      fp8.push_back({name, DType::kF8_E4M3, info.shape, keep(q.codes)});
      fp8.push_back({name + "_scale_inv", DType::kF32, {q.grid_rows, q.grid_cols}, keep(bytes_of(q.scale_inv))});
      f32.push_back({name, DType::kF32, info.shape, keep(bytes_of(q.dequantized))});
      twins.quantized.push_back(name);
    } else {
      fp8.push_back({name, info.dtype, info.shape, keep({raw.begin(), raw.end()})});
      f32.push_back({name, DType::kF32, info.shape, keep(bytes_of(w))});
    }
  }
  auto write = [&](const std::vector<Pending>& list, const fs::path& dir) {
    std::vector<io::TensorToWrite> tensors;
    for (const Pending& p : list) tensors.push_back({p.name, p.dtype, p.shape, storage[p.buffer]});
    io::write_safetensors((dir / "model.safetensors").string(), tensors);
  };
  write(fp8, twins.fp8);
  write(f32, twins.f32);

  const std::string config_text = read_text(source / "config.json");
  nlohmann::json config = nlohmann::json::parse(config_text);
  config["quantization_config"] = {{"quant_method", "fp8"},
                                   {"fmt", "e4m3"},
                                   {"activation_scheme", "dynamic"},
                                   {"weight_block_size", {kBlock, kBlock}}};
  write_text(twins.fp8 / "config.json", config.dump(2) + "\n");
  write_text(twins.f32 / "config.json", config_text);
  for (const auto& entry : fs::directory_iterator(source)) {
    const std::string file = entry.path().filename().string();
    if (!entry.is_regular_file() || file == "config.json" || file == "model.safetensors.index.json" ||
        entry.path().extension() == ".safetensors")
      continue;
    fs::copy_file(entry.path(), twins.fp8 / file, fs::copy_options::overwrite_existing);
    fs::copy_file(entry.path(), twins.f32 / file, fs::copy_options::overwrite_existing);
  }
  return twins;
}

}  // namespace eq::test
