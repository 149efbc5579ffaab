// SourceTensors: the logical (dequantized) view of a checkpoint. The
// constructor pairs every quantized tensor with its scales and checks their
// shapes, so a layout we cannot decode exactly is refused before any work;
// decoding then runs row by row through 256-entry tables.
#include "io/quantized_source.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "core/error.h"
#include "core/numeric.h"
#include "core/shape.h"
#include "io/finite_values.h"

namespace eq::io {

namespace {

constexpr std::string_view kScaleInv = "_scale_inv";
constexpr std::string_view kBlocks = "_blocks";
constexpr std::string_view kScales = "_scales";
constexpr int64_t kMxBlockBytes = 16;  // 32 E2M1 codes
constexpr int64_t kMxGroup = 32;

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() > suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// ceil(n / d) for n >= 0, d > 0, without the overflow of (n + d - 1) / d
// when a config declares a huge block.
int64_t ceil_div(int64_t n, int64_t d) { return n == 0 ? 0 : (n - 1) / d + 1; }

bool is_fp8(DType t) { return t == DType::kF8_E4M3 || t == DType::kF8_E5M2; }

// Product of dims [from, to) of a shape (clamped to its rank).
uint64_t product(const std::vector<int64_t>& shape, size_t from = 0, size_t to = SIZE_MAX) {
  const auto end = shape.begin() + static_cast<std::ptrdiff_t>(std::min(to, shape.size()));
  uint64_t n = 1;
  for (auto it = shape.begin() + static_cast<std::ptrdiff_t>(std::min(from, shape.size())); it < end; ++it)
    n *= static_cast<uint64_t>(*it);
  return n;
}

std::string hex(uint8_t v) {
  static const char* digits = "0123456789abcdef";
  return std::string("0x") + digits[v >> 4] + digits[v & 15];
}

// fp8 byte -> float32, and whether the code is NaN/Inf (refused rather than
// decoded: a non-finite weight poisons every product it enters).
struct Fp8Table {
  std::array<float, 256> value;
  std::array<uint8_t, 256> non_finite;
};

Fp8Table make_fp8_table(float (*decode)(uint8_t)) {
  Fp8Table t;
  for (int i = 0; i < 256; ++i) {
    t.value[i] = decode(static_cast<uint8_t>(i));
    t.non_finite[i] = std::isfinite(t.value[i]) ? 0 : 1;
  }
  return t;
}

const Fp8Table& fp8_table(DType t) {
  static const Fp8Table e4m3 = make_fp8_table(fp8_e4m3_to_f32);
  static const Fp8Table e5m2 = make_fp8_table(fp8_e5m2_to_f32);
  return t == DType::kF8_E4M3 ? e4m3 : e5m2;
}

// One mxfp4 byte -> its two E2M1 values (low nibble = even element).
struct E2m1Pair {
  float lo, hi;
};

const std::array<E2m1Pair, 256>& e2m1_pairs() {
  static const std::array<E2m1Pair, 256> table = [] {
    constexpr float kE2M1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                 -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
    std::array<E2m1Pair, 256> t{};
    for (int b = 0; b < 256; ++b) t[b] = {kE2M1[b & 15], kE2M1[b >> 4]};
    return t;
  }();
  return table;
}

const std::array<float, 256>& e8m0_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b) t[b] = e8m0_to_f32(static_cast<uint8_t>(b));
    return t;
  }();
  return table;
}

}  // namespace

uint64_t SourceTensors::Info::numel() const { return product(shape); }

SourceTensors::SourceTensors(const Checkpoint& ckpt, SourceQuantization q, const std::function<bool(std::string_view)>& opaque)
    : ckpt_(ckpt), quant_(std::move(q)) {
  const std::string& where = ckpt_.path();
  if (quant_.method == SourceQuant::kFp8Block && (quant_.block_rows <= 0 || quant_.block_cols <= 0))
    invalid(where + ": fp8 block quantization needs a positive block size, got " + std::to_string(quant_.block_rows) +
            "x" + std::to_string(quant_.block_cols));
  auto add = [&](Entry e) {
    const std::string name = e.info.name;
    const std::string data_name = e.data->name;
    if (!entries_.emplace(name, std::move(e)).second)
      invalid(where + ": two stored tensors both read as logical tensor '" + name + "'");
    logical_of_data_.emplace(data_name, name);
  };
  for (const std::string& name : ckpt_.tensor_names()) {
    const TensorInfo& t = ckpt_.info(name);
    if (opaque && opaque(name)) {
      add({{name, t.shape, t.dtype, Encoding::kPlain, t.nbytes()}, &t, nullptr});
      continue;
    }
    if (is_fp8(t.dtype)) {
      const std::string dt(dtype_name(t.dtype));
      if (quant_.method != SourceQuant::kFp8Block)
        unsupported(where + ": tensor '" + name + "' is " + dt + " but config.json declares no fp8 block " +
                    "quantization (quantization_config: " + quant_.summary() + "), so its codes cannot be read as weights");
      if (!quant_.fp8_fmt.empty() && (quant_.fp8_fmt == "e4m3") != (t.dtype == DType::kF8_E4M3))
        invalid(where + ": tensor '" + name + "' is " + dt + " but quantization_config.fmt is '" + quant_.fp8_fmt + "'");
      if (t.shape.size() < 2)
        unsupported(where + ": tensor '" + name + "' is " + dt + " of shape " + shape_str(t.shape) +
                    "; fp8 block scales need at least 2 dimensions [out, in]");
      const std::string scale_name = name + std::string(kScaleInv);
      if (!ckpt_.has(scale_name))
        unsupported(where + ": " + dt + " tensor '" + name + "' has no scale tensor '" + scale_name + "'");
      const TensorInfo& s = ckpt_.info(scale_name);
      if (s.dtype != DType::kF32 && s.dtype != DType::kBF16 && s.dtype != DType::kF16)
        unsupported(where + ": scale tensor '" + scale_name + "' is " + std::string(dtype_name(s.dtype)) +
                    ", expected F32, BF16 or F16");
      std::vector<int64_t> expect(t.shape.begin(), t.shape.end() - 2);
      const int64_t out = t.shape[t.shape.size() - 2], in = t.shape.back();
      expect.push_back(ceil_div(out, quant_.block_rows));
      expect.push_back(ceil_div(in, quant_.block_cols));
      if (s.shape != expect)
        invalid(where + ": scale tensor '" + scale_name + "' has shape " + shape_str(s.shape) + ", but '" + name +
                "' " + shape_str(t.shape) + " with " + std::to_string(quant_.block_rows) + "x" +
                std::to_string(quant_.block_cols) + " blocks needs " + shape_str(expect));
      add({{name, t.shape, t.dtype, Encoding::kFp8Block, t.nbytes() + s.nbytes()}, &t, &s});
      continue;
    }
    if (ends_with(name, kBlocks)) {
      const std::string base = name.substr(0, name.size() - kBlocks.size());
      const std::string scales_name = base + std::string(kScales);
      if (t.dtype == DType::kU8 || ckpt_.has(scales_name)) {
        if (!ckpt_.has(scales_name))
          unsupported(where + ": mxfp4 tensor '" + name + "' has no scale tensor '" + scales_name + "'");
        if (quant_.method != SourceQuant::kMxfp4)
          unsupported(where + ": tensors '" + name + "' and '" + scales_name + "' are mxfp4 blocks and scales but " +
                      "config.json declares no mxfp4 quantization (quantization_config: " + quant_.summary() + ")");
        const TensorInfo& s = ckpt_.info(scales_name);
        if (t.dtype != DType::kU8 || s.dtype != DType::kU8)
          invalid(where + ": mxfp4 tensors '" + name + "' (" + std::string(dtype_name(t.dtype)) + ") and '" +
                  scales_name + "' (" + std::string(dtype_name(s.dtype)) + ") must both be U8");
        if ((t.shape.size() != 3 && t.shape.size() != 4) || t.shape.back() != kMxBlockBytes)
          invalid(where + ": mxfp4 tensor '" + name + "' has shape " + shape_str(t.shape) +
                  ", expected [E, R, G, 16] or [R, G, 16]");
        const std::vector<int64_t> expect(t.shape.begin(), t.shape.end() - 1);
        if (s.shape != expect)
          invalid(where + ": mxfp4 tensors '" + name + "' " + shape_str(t.shape) + " and '" + scales_name + "' " +
                  shape_str(s.shape) + " do not match: the scales must be " + shape_str(expect));
        std::vector<int64_t> logical(t.shape.begin(), t.shape.end() - 2);
        logical.push_back(t.shape[t.shape.size() - 2] * kMxGroup);
        add({{base, logical, t.dtype, Encoding::kMxfp4, t.nbytes() + s.nbytes()}, &t, &s});
        continue;
      }
    }
    if (ends_with(name, kScales)) {
      const std::string blocks_name = name.substr(0, name.size() - kScales.size()) + std::string(kBlocks);
      if (ckpt_.has(blocks_name)) continue;  // paired with its blocks (above or below)
      if (t.dtype == DType::kU8)
        unsupported(where + ": mxfp4 scale tensor '" + name + "' has no blocks tensor '" + blocks_name + "'");
    }
    if (ends_with(name, kScaleInv)) {
      const std::string base = name.substr(0, name.size() - kScaleInv.size());
      if (!ckpt_.has(base) || !is_fp8(ckpt_.info(base).dtype))
        invalid(where + ": scale tensor '" + name + "' has no F8 tensor '" + base + "' to scale" +
                (ckpt_.has(base) ? " ('" + base + "' is " + std::string(dtype_name(ckpt_.info(base).dtype)) + ")"
                                 : std::string()));
      continue;  // paired above or below with its F8 tensor
    }
    add({{name, t.shape, t.dtype, Encoding::kPlain, t.nbytes()}, &t, nullptr});
  }
}

std::vector<std::string> SourceTensors::stored_names(std::string_view name) const {
  const Entry& e = entry(name);
  std::vector<std::string> out{e.data->name};
  if (e.scale) out.push_back(e.scale->name);
  return out;
}

std::vector<std::string> SourceTensors::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& [name, _] : entries_) out.push_back(name);
  return out;
}

bool SourceTensors::has(std::string_view name) const { return entries_.find(name) != entries_.end(); }

const SourceTensors::Entry& SourceTensors::entry(std::string_view name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) invalid(ckpt_.path() + ": tensor '" + std::string(name) + "' not found in the checkpoint");
  return it->second;
}

const SourceTensors::Info& SourceTensors::info(std::string_view name) const { return entry(name).info; }

void SourceTensors::require_float(const Entry& e) const {
  if (!dtype_is_float(e.data->dtype))
    invalid(ckpt_.path() + ": tensor '" + e.info.name + "' is " + std::string(dtype_name(e.data->dtype)) +
            ", which cannot be converted to float32");
}

void SourceTensors::release(const TensorInfo& t, uint64_t offset, uint64_t length) const {
  ckpt_.shard_of(t.name).release(t, offset, length);
}

// Matrices [first, first + count) of an fp8 tensor viewed as [M, out, in].
void SourceTensors::decode_fp8(const Entry& e, int64_t first, int64_t count, float* dst) const {
  const std::vector<int64_t>& shape = e.info.shape;
  const int64_t out = shape[shape.size() - 2], in = shape.back();
  const int64_t br = quant_.block_rows, bc = quant_.block_cols;
  const int64_t gr = ceil_div(out, br), gc = ceil_div(in, bc);
  const Fp8Table& table = fp8_table(e.info.stored);

  // The scales are 1/(br*bc) of the codes: convert them once, check once.
  const TensorView sv = ckpt_.shard_of(e.scale->name).view(*e.scale);
  const uint64_t scale_begin = static_cast<uint64_t>(first * gr * gc), scale_count = static_cast<uint64_t>(count * gr * gc);
  std::vector<float> scales(scale_count);
  convert_to_f32(e.scale->dtype, sv.data + scale_begin * dtype_size(e.scale->dtype), scales.data(), scale_count);
  // A block's scale_inv is max|block| / fmax: positive, or 0 for a block of
  // zeros (the reference quantizer divides by it, so a 0 scale only stands
  // for zero codes). A negative scale flips the block's signs and a 0 scale
  // over non-zero codes erases them: neither is a quantized weight.
  const uint8_t* all_codes = ckpt_.shard_of(e.data->name).view(*e.data).data;
  for (uint64_t i = 0; i < scale_count; ++i) {
    const float s = scales[i];
    if (!std::isfinite(s))
      invalid(ckpt_.path() + ": scale tensor '" + e.scale->name + "' holds a non-finite value at " +
              flat_position(scale_begin + i, e.scale->shape));
    if (s < 0)
      invalid(ckpt_.path() + ": scale tensor '" + e.scale->name + "' holds the negative scale " + std::to_string(s) +
              " at " + flat_position(scale_begin + i, e.scale->shape) + " (a block scale is > 0)");
    if (s == 0) {
      // Block (m, br0, bc0) of the codes must be all (+/-) zero.
      const uint64_t flat = scale_begin + i;
      const int64_t m = static_cast<int64_t>(flat / static_cast<uint64_t>(gr * gc));
      const int64_t bi = static_cast<int64_t>(flat % static_cast<uint64_t>(gr * gc));
      const int64_t r0 = (bi / gc) * br, c0 = (bi % gc) * bc;
      for (int64_t r = r0; r < std::min(r0 + br, out); ++r)
        for (int64_t k = c0; k < std::min(c0 + bc, in); ++k) {
          const uint8_t code = all_codes[static_cast<uint64_t>((m * out + r) * in + k)];
          if ((code & 0x7f) != 0)
            invalid(ckpt_.path() + ": scale tensor '" + e.scale->name + "' holds the scale 0 at " +
                    flat_position(flat, e.scale->shape) + " but its block of '" + e.info.name + "' holds the code " +
                    hex(code) + " at " + flat_position(static_cast<uint64_t>((m * out + r) * in + k), shape) +
                    " (a 0 scale stands only for a block of zeros)");
        }
    }
  }

  const uint8_t* codes = all_codes + static_cast<uint64_t>(first * out * in);
  for (int64_t m = 0; m < count; ++m) {
    for (int64_t r = 0; r < out; ++r) {
      const float* srow = scales.data() + (m * gr + r / br) * gc;
      const uint8_t* c = codes + (m * out + r) * in;
      float* o = dst + (m * out + r) * in;
      uint8_t bad = 0;
      for (int64_t b = 0, c0 = 0; c0 < in; ++b, c0 += bc) {
        const float s = srow[b];
        const int64_t c1 = std::min(c0 + bc, in);
        for (int64_t k = c0; k < c1; ++k) {
          o[k] = table.value[c[k]] * s;
          bad |= table.non_finite[c[k]];
        }
      }
      if (bad) {
        const int64_t k = std::find_if(c, c + in, [&](uint8_t v) { return table.non_finite[v] != 0; }) - c;
        invalid(ckpt_.path() + ": tensor '" + e.info.name + "' holds the non-finite " +
                std::string(dtype_name(e.info.stored)) + " code " + hex(c[k]) + " at " +
                flat_position(static_cast<uint64_t>(((first + m) * out + r) * in + k), shape));
      }
    }
  }
}

// Block rows [first_row, first_row + rows) of an mxfp4 tensor viewed as
// [rows total, G, 16] -> float32 [rows, G*32].
void SourceTensors::decode_mxfp4(const Entry& e, int64_t first_row, int64_t rows, float* dst) const {
  const int64_t groups = e.data->shape[e.data->shape.size() - 2];
  const uint8_t* blocks = ckpt_.shard_of(e.data->name).view(*e.data).data + first_row * groups * kMxBlockBytes;
  const uint8_t* scales = ckpt_.shard_of(e.scale->name).view(*e.scale).data + first_row * groups;
  const auto& pairs = e2m1_pairs();
  const auto& pow2 = e8m0_table();
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* sr = scales + r * groups;
    uint8_t bad = 0;
    for (int64_t g = 0; g < groups; ++g) {
      const float s = pow2[sr[g]];
      bad |= static_cast<uint8_t>(sr[g] == 0xFF);
      const uint8_t* b = blocks + (r * groups + g) * kMxBlockBytes;
      float* o = dst + (r * groups + g) * kMxGroup;
      for (int j = 0; j < kMxBlockBytes; ++j) {
        const E2m1Pair p = pairs[b[j]];
        o[2 * j] = p.lo * s;
        o[2 * j + 1] = p.hi * s;
      }
    }
    if (bad) {
      const int64_t g = std::find(sr, sr + groups, uint8_t{0xFF}) - sr;
      invalid(ckpt_.path() + ": scale tensor '" + e.scale->name + "' holds the E8M0 NaN byte 0xff at " +
              flat_position(static_cast<uint64_t>((first_row + r) * groups + g), e.scale->shape));
    }
  }
}

void SourceTensors::to_f32(std::string_view name, float* dst) const {
  const Entry& e = entry(name);
  switch (e.info.encoding) {
    case Encoding::kPlain:
      require_float(e);
      ckpt_.shard_of(e.data->name).view(*e.data).to_f32(dst);
      break;
    case Encoding::kFp8Block:
      decode_fp8(e, 0, static_cast<int64_t>(product(e.info.shape, 0, e.info.shape.size() - 2)), dst);
      break;
    case Encoding::kMxfp4:
      decode_mxfp4(e, 0, static_cast<int64_t>(product(e.info.shape, 0, e.info.shape.size() - 1)), dst);
      break;
  }
  require_finite(dst, static_cast<size_t>(e.info.numel()), ckpt_.path(), e.info.name, e.info.shape);
  release(*e.data, 0, e.data->nbytes());
  if (e.scale) release(*e.scale, 0, e.scale->nbytes());
  bytes_converted_.fetch_add(e.info.stored_bytes, std::memory_order_relaxed);
  if (observer_) observer_(name);
}

std::vector<float> SourceTensors::load_f32(std::string_view name) const {
  std::vector<float> out(info(name).numel());
  to_f32(name, out.data());
  return out;
}

void SourceTensors::slice_to_f32(std::string_view name, int64_t index, float* dst) const {
  const Entry& e = entry(name);
  const std::vector<int64_t>& shape = e.info.shape;
  if (shape.size() < 3)
    invalid(ckpt_.path() + ": tensor '" + e.info.name + "' of shape " + shape_str(shape) +
            " is not a stacked tensor (slices need at least 3 dimensions)");
  if (index < 0 || index >= shape[0])
    invalid(ckpt_.path() + ": slice " + std::to_string(index) + " of tensor '" + e.info.name + "' is out of range " +
            shape_str(shape));
  const uint64_t slice_numel = product(shape, 1);
  bytes_converted_.fetch_add(e.info.stored_bytes / static_cast<uint64_t>(shape[0]), std::memory_order_relaxed);
  switch (e.info.encoding) {
    case Encoding::kPlain: {
      require_float(e);
      const TensorView v = ckpt_.shard_of(e.data->name).view(*e.data);
      const uint64_t bytes = slice_numel * dtype_size(e.data->dtype);
      convert_to_f32(e.data->dtype, v.data + static_cast<uint64_t>(index) * bytes, dst, slice_numel);
      require_finite(dst, static_cast<size_t>(slice_numel), ckpt_.path(), e.info.name, shape,
                     static_cast<uint64_t>(index) * slice_numel);
      release(*e.data, static_cast<uint64_t>(index) * bytes, bytes);
      if (observer_) observer_(name);
      return;
    }
    case Encoding::kFp8Block: {
      const int64_t per_slice = static_cast<int64_t>(product(shape, 1, shape.size() - 2));
      decode_fp8(e, index * per_slice, per_slice, dst);
      break;
    }
    case Encoding::kMxfp4: {
      const int64_t per_slice = static_cast<int64_t>(product(shape, 1, shape.size() - 1));
      decode_mxfp4(e, index * per_slice, per_slice, dst);
      break;
    }
  }
  require_finite(dst, static_cast<size_t>(slice_numel), ckpt_.path(), e.info.name, shape,
                 static_cast<uint64_t>(index) * slice_numel);
  const uint64_t data_bytes = e.data->nbytes() / static_cast<uint64_t>(shape[0]);
  const uint64_t scale_bytes = e.scale->nbytes() / static_cast<uint64_t>(shape[0]);
  release(*e.data, static_cast<uint64_t>(index) * data_bytes, data_bytes);
  release(*e.scale, static_cast<uint64_t>(index) * scale_bytes, scale_bytes);
  if (observer_) observer_(name);
}

void SourceTensors::check_finite(std::string_view stored) const {
  const auto it = logical_of_data_.find(stored);
  if (it == logical_of_data_.end()) return;
  const Entry& e = entry(it->second);
  const std::vector<int64_t>& shape = e.info.shape;
  switch (e.info.encoding) {
    case Encoding::kPlain:
      io::require_finite_stored(ckpt_.shard_of(e.data->name).view(*e.data), ckpt_.path());
      return;
    case Encoding::kFp8Block: {
      // One [out, in] matrix at a time.
      const int64_t per = shape[shape.size() - 2] * shape.back();
      const int64_t count = static_cast<int64_t>(product(shape, 0, shape.size() - 2));
      std::vector<float> buf(static_cast<size_t>(per));
      for (int64_t m = 0; m < count; ++m) {
        decode_fp8(e, m, 1, buf.data());
        require_finite(buf.data(), buf.size(), ckpt_.path(), e.info.name, shape, static_cast<uint64_t>(m * per));
      }
      return;
    }
    case Encoding::kMxfp4: {
      // One row of blocks at a time.
      const int64_t per = shape.back();
      const int64_t rows = static_cast<int64_t>(product(shape, 0, shape.size() - 1));
      std::vector<float> buf(static_cast<size_t>(per));
      for (int64_t r = 0; r < rows; ++r) {
        decode_mxfp4(e, r, 1, buf.data());
        require_finite(buf.data(), buf.size(), ckpt_.path(), e.info.name, shape, static_cast<uint64_t>(r * per));
      }
      return;
    }
  }
}

SourceTensors::Mxfp4Slice SourceTensors::mxfp4_slice(std::string_view name, int64_t index) const {
  const Entry& e = entry(name);
  if (e.info.encoding != Encoding::kMxfp4)
    invalid(ckpt_.path() + ": tensor '" + e.info.name + "' is not stored as mxfp4 blocks and scales");
  const std::vector<int64_t>& bshape = e.data->shape;
  const int64_t count = bshape.size() == 4 ? bshape[0] : 1;
  if (index < 0 || index >= count)
    invalid(ckpt_.path() + ": slice " + std::to_string(index) + " of mxfp4 tensor '" + e.info.name +
            "' is out of range " + shape_str(e.info.shape));
  const int64_t rows = bshape[bshape.size() - 3], groups = bshape[bshape.size() - 2];
  const uint64_t block_bytes = static_cast<uint64_t>(rows * groups * kMxBlockBytes);
  const uint64_t scale_bytes = static_cast<uint64_t>(rows * groups);
  const uint8_t* b = ckpt_.shard_of(e.data->name).view(*e.data).data;
  const uint8_t* s = ckpt_.shard_of(e.scale->name).view(*e.scale).data;
  // Bytes handed out raw follow the finiteness rule too: only a scale of
  // 2^126 or 2^127 can overflow an E2M1 code (6 x 2^125 is finite), so only
  // those blocks are decoded to check.
  const auto& pairs = e2m1_pairs();
  const auto& pow2 = e8m0_table();
  const uint8_t* slice_scales = s + static_cast<uint64_t>(index) * scale_bytes;
  const uint8_t* slice_blocks = b + static_cast<uint64_t>(index) * block_bytes;
  for (uint64_t i = 0; i < scale_bytes; ++i) {
    if (slice_scales[i] != 0xFD && slice_scales[i] != 0xFE) continue;
    float v[kMxGroup];
    for (int j = 0; j < kMxBlockBytes; ++j) {
      const E2m1Pair p = pairs[slice_blocks[i * kMxBlockBytes + static_cast<uint64_t>(j)]];
      v[2 * j] = p.lo * pow2[slice_scales[i]];
      v[2 * j + 1] = p.hi * pow2[slice_scales[i]];
    }
    const uint64_t row = i / static_cast<uint64_t>(groups), g = i % static_cast<uint64_t>(groups);
    require_finite(v, kMxGroup, ckpt_.path(), e.info.name, e.info.shape,
                   (static_cast<uint64_t>(index) * static_cast<uint64_t>(rows) + row) * static_cast<uint64_t>(groups * kMxGroup) +
                       g * kMxGroup);
  }
  return {{b + static_cast<uint64_t>(index) * block_bytes, block_bytes},
          {s + static_cast<uint64_t>(index) * scale_bytes, scale_bytes},
          rows,
          groups * kMxGroup};
}

}  // namespace eq::io
