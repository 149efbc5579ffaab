#include "exec/synthetic_layer.h"

#include "core/hash.h"
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <numeric>

#include "core/error.h"
#include "core/numeric.h"
#include "core/thread_pool.h"

namespace eq::exec {
namespace {

constexpr size_t kAlign = 64;
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// A side part gets a constant-ish valid value; a code part random bits. The
// values only need to be finite and of a plausible size (no denormals, no
// NaN) so the kernels run at their normal speed.
void fill_random_part(const quant::PartSpec& spec, quant::PartRole role, uint8_t* dst, size_t nbytes,
                      uint64_t state) {
  const size_t count = nbytes / dtype_size(spec.dtype);
  auto random_bytes = [&] {
    size_t i = 0;
    for (; i + 8 <= nbytes; i += 8) {
      const uint64_t r = splitmix64(state);
      std::memcpy(dst + i, &r, 8);
    }
    const uint64_t r = splitmix64(state);
    std::memcpy(dst + i, &r, nbytes - i);
  };
  if (role == quant::PartRole::kSigns) {
    for (size_t i = 0; i < count; ++i) reinterpret_cast<int8_t*>(dst)[i] = (splitmix64(state) >> 63) ? -1 : 1;
    return;
  }
  if (role != quant::PartRole::kCodes) {
    const float value = role == quant::PartRole::kBiases ? -0.01f : role == quant::PartRole::kTensorScale ? 1.0f : 0.005f;
    for (size_t i = 0; i < count; ++i) {
      const float v = value * (1.0f + 0.5f * static_cast<float>(splitmix64(state) >> 40) / 16777216.0f);
      switch (spec.dtype) {
        case DType::kF16: reinterpret_cast<uint16_t*>(dst)[i] = f32_to_f16(v); break;
        case DType::kF32: reinterpret_cast<float*>(dst)[i] = v; break;
        case DType::kF8_E8M0: dst[i] = 127 - 8; break;  // 2^-8
        case DType::kF8_E4M3: dst[i] = 0x38; break;     // 1.0 (times tensor_scale)
        default: EQ_CHECK(false, "synthetic layer: unexpected side part dtype for " + spec.name);
      }
    }
    return;
  }
  random_bytes();
  if (spec.dtype == DType::kBF16) {
    // Random sign and mantissa, exponent 2^-7..2^-4: finite, no denormals.
    uint16_t* w = reinterpret_cast<uint16_t*>(dst);
    for (size_t i = 0; i < count; ++i) w[i] = static_cast<uint16_t>((w[i] & 0x807f) | ((0x78 + (w[i] >> 7 & 3)) << 7));
  } else if (spec.dtype == DType::kI8) {
    int8_t* q = reinterpret_cast<int8_t*>(dst);  // int8_row codes are in [-127, 127]
    for (size_t i = 0; i < count; ++i) q[i] = std::max<int8_t>(q[i], -127);
  }
}

struct Projection {
  int64_t rows, cols;
};

}  // namespace

std::span<const LayerShape> preset_layer_shapes() {
  static const std::vector<LayerShape> shapes = {
      {"qwen3-30b-a3b", 128, 8, 2048, 768},
      {"mixtral-8x7b", 8, 2, 4096, 14336},
      {"e512", 512, 10, 2048, 512},
      {"deepseek-v3", 256, 8, 7168, 2048, 1},
      {"glm-4.5", 160, 8, 5120, 1536, 1},
      {"gpt-oss-120b", 128, 4, 2880, 2880, 0, true},
      {"qwen3-next-80b", 512, 10, 2048, 512, 1},
      {"qwen3-235b-a22b", 128, 8, 4096, 1536},
      {"qwen3.5-397b-a17b", 512, 10, 4096, 1024, 1},
  };
  return shapes;
}

const LayerShape* find_layer_shape(std::string_view name) {
  for (const LayerShape& s : preset_layer_shapes())
    if (s.name == name) return &s;
  return nullptr;
}

std::span<const FormatMix> preset_format_mixes() {
  static const std::vector<FormatMix> mixes = [] {
    auto f = [](std::string_view n) { return &quant::format_by_name(n); };
    return std::vector<FormatMix>{
        {"bf16", {{f("bf16"), 1.0}}},
        {"int8_row", {{f("int8_row"), 1.0}}},
        {"fp4_g32", {{f("fp4_g32"), 1.0}}},
        {"trellis2", {{f("trellis2"), 1.0}}},
        {"trellis3", {{f("trellis3"), 1.0}}},
        {"trellis4", {{f("trellis4"), 1.0}}},
        {"mix842", {{f("int8_row"), 0.15}, {f("fp4_g32"), 0.60}, {f("int2_g32"), 0.25}}},
        {"mix842t", {{f("int8_row"), 0.15}, {f("fp4_g32"), 0.60}, {f("trellis2"), 0.25}}},
        {"trellis2_lut", {{f("trellis2_lut"), 1.0}}},
        {"trellis3_lut", {{f("trellis3_lut"), 1.0}}},
        {"trellis4_lut", {{f("trellis4_lut"), 1.0}}},
        {"mix842tl", {{f("int8_row"), 0.15}, {f("fp4_g32"), 0.60}, {f("trellis2_lut"), 0.25}}},
    };
  }();
  return mixes;
}

const FormatMix* find_format_mix(std::string_view name) {
  for (const FormatMix& m : preset_format_mixes())
    if (m.name == name) return &m;
  // Any registered format name is the uniform mix of that format (kept for
  // the process's life: callers hold the pointer).
  const quant::FormatTraits* format = quant::find_format(name);
  if (!format) return nullptr;
  static std::mutex mu;
  static std::deque<FormatMix> uniform;
  std::lock_guard<std::mutex> lock(mu);
  for (const FormatMix& m : uniform)
    if (m.name == name) return &m;
  return &uniform.emplace_back(FormatMix{std::string(name), {{format, 1.0}}});
}

void SyntheticLayer::FreeBytes::operator()(uint8_t* p) const { std::free(p); }

uint64_t SyntheticLayer::packed_bytes() const {
  uint64_t b = 0;
  for (const BitGroup& g : layer_.groups) b += g.bytes;
  return b;
}

std::unique_ptr<SyntheticLayer> make_synthetic_layer(const LayerShape& shape, const FormatMix& mix, uint64_t seed,
                                                     const ExpertSource& source) {
  const int64_t E = shape.experts + shape.shared_experts, H = shape.hidden, I = shape.intermediate;
  if (shape.experts <= 0 || shape.shared_experts < 0 || H <= 0 || I <= 0 || shape.top_k <= 0 ||
      shape.top_k > shape.experts)
    invalid("synthetic layer " + shape.name + ": bad shape");
  auto out = std::unique_ptr<SyntheticLayer>(new SyntheticLayer());
  PackedLayer& L = out->layer_;
  L.num_experts = E;
  L.experts.assign(static_cast<size_t>(E), {});
  L.survivors.resize(static_cast<size_t>(E));
  std::iota(L.survivors.begin(), L.survivors.end(), 0);

  // Seeded shuffle, then consecutive runs of the shuffled ids per format.
  std::vector<int64_t> ids(static_cast<size_t>(E));
  std::iota(ids.begin(), ids.end(), 0);
  uint64_t state = seed;
  for (int64_t i = E - 1; i > 0; --i) std::swap(ids[i], ids[splitmix64(state) % static_cast<uint64_t>(i + 1)]);
  int64_t taken = 0;
  std::vector<std::string_view> random_filled;  // slow-to-quantize formats filled with random codes
  for (size_t s = 0; s < mix.shares.size(); ++s) {
    const int64_t n = s + 1 == mix.shares.size() ? E - taken
                                                  : std::min<int64_t>(E - taken, std::llround(mix.shares[s].fraction * E));
    if (n <= 0) continue;
    BitGroup g;
    g.id = static_cast<int>(L.groups.size());
    g.format = mix.shares[s].format;
    g.expert_ids.assign(ids.begin() + taken, ids.begin() + taken + n);
    std::sort(g.expert_ids.begin(), g.expert_ids.end());
    taken += n;
    if (source && g.format->slow_quantizer) random_filled.push_back(g.format->name);
    L.groups.push_back(std::move(g));
  }

  const Projection proj[3] = {{I, H}, {I, H}, {H, I}};
  for (BitGroup& g : L.groups) {
    const quant::FormatTraits& f = *g.format;
    if (!f.part_specs_of) invalid("synthetic layer: format " + std::string(f.name) + " has no part_specs");
    std::vector<quant::PartSpec> specs[3];
    size_t per_expert = 0;
    for (int p = 0; p < 3; ++p) {
      if (proj[p].rows % f.row_multiple || proj[p].cols % f.col_multiple)
        invalid("synthetic layer " + shape.name + ": format " + std::string(f.name) + " cannot take [" +
                std::to_string(proj[p].rows) + ", " + std::to_string(proj[p].cols) + "]");
      specs[p] = f.part_specs(proj[p].rows, proj[p].cols);
      for (const quant::PartSpec& s : specs[p]) {
        int64_t n = 1;
        for (int64_t d : s.shape) n *= d;
        per_expert += align_up(static_cast<size_t>(n) * dtype_size(s.dtype));
      }
    }
    const size_t slots = g.expert_ids.size(), total = per_expert * slots;
    uint8_t* base = static_cast<uint8_t*>(std::aligned_alloc(kAlign, std::max<size_t>(total, kAlign)));
    if (!base) fail(ErrorKind::kResource, "synthetic layer: cannot allocate " + std::to_string(total) + " bytes");
    out->storage_.emplace_back(base);
    g.bytes = 0;
    g.slots.resize(slots);
    for (size_t slot = 0; slot < slots; ++slot) {
      uint8_t* at = base + slot * per_expert;
      quant::PackedMatrix* mats[3] = {&g.slots[slot].gate, &g.slots[slot].up, &g.slots[slot].down};
      for (int p = 0; p < 3; ++p) {
        *mats[p] = {&f, proj[p].rows, proj[p].cols, {}};
        for (const quant::PartSpec& s : specs[p]) {
          int64_t n = 1;
          for (int64_t d : s.shape) n *= d;
          const size_t nbytes = static_cast<size_t>(n) * dtype_size(s.dtype);
          mats[p]->parts.push_back({at, s.dtype, s.shape, nbytes});
          at += align_up(nbytes);
          g.bytes += nbytes;
        }
      }
      L.experts[static_cast<size_t>(g.expert_ids[slot])] = {g.id, static_cast<int>(slot)};
    }
    const bool quantize = source && !f.slow_quantizer;
    default_pool().run(slots, [&, quantize](size_t slot) {
      ExpertWeights& w = g.slots[slot];
      quant::PackedMatrix* mats[3] = {&w.gate, &w.up, &w.down};
      if (!quantize) {
        for (int p = 0; p < 3; ++p)
          for (size_t i = 0; i < specs[p].size(); ++i) {
            const quant::PartView& v = mats[p]->parts[i];
            fill_random_part(specs[p][i], f.parts[i].role, static_cast<uint8_t*>(const_cast<void*>(v.data)), v.nbytes,
                             seed ^ (static_cast<uint64_t>(g.expert_ids[slot]) << 20) ^ (p << 8) ^ i);
          }
        return;
      }
      std::vector<float> dense[3];
      source(g.expert_ids[slot], dense[0], dense[1], dense[2]);
      for (int p = 0; p < 3; ++p) {
        if (static_cast<int64_t>(dense[p].size()) != proj[p].rows * proj[p].cols)
          invalid("synthetic layer: expert source gave the wrong size for expert " +
                  std::to_string(g.expert_ids[slot]));
        const quant::QuantizedMatrix q = f.quantize(dense[p].data(), proj[p].rows, proj[p].cols, {});
        EQ_CHECK(q.parts.size() == mats[p]->parts.size(), "synthetic layer: part count");
        for (size_t i = 0; i < q.parts.size(); ++i) {
          EQ_CHECK(q.parts[i].bytes.size() == mats[p]->parts[i].nbytes, "synthetic layer: part size");
          std::memcpy(const_cast<void*>(mats[p]->parts[i].data), q.parts[i].bytes.data(), q.parts[i].bytes.size());
        }
      }
    });
  }
  if (shape.biased_clamped) {
    const int64_t rows[3] = {I, I, H};
    for (int p = 0; p < 3; ++p) {
      std::vector<float>& b = L.expert_bias[p];
      b.resize(static_cast<size_t>(E * rows[p]));
      uint64_t bias_state = seed ^ (0xb1a5ull << p);
      for (float& v : b) v = static_cast<float>(static_cast<int64_t>(splitmix64(bias_state) % 2001) - 1000) * 1e-4f;
    }
    for (BitGroup& g : L.groups)
      for (size_t slot = 0; slot < g.slots.size(); ++slot) {
        const int64_t e = g.expert_ids[slot];
        ExpertWeights& w = g.slots[slot];
        w.gate_bias = L.expert_bias[0].data() + e * I;
        w.up_bias = L.expert_bias[1].data() + e * I;
        w.down_bias = L.expert_bias[2].data() + e * H;
        w.act = {.kind = model::ActivationKind::kSwiGluClamped, .alpha = 1.702f, .limit = 7.0f};
      }
  }
  out->fill_ = !source ? "random codes" : "quantized";
  if (!random_filled.empty()) {
    out->fill_ += " (random codes:";
    for (std::string_view n : random_filled) out->fill_ += " " + std::string(n);
    out->fill_ += ")";
  }
  return out;
}

std::vector<int32_t> random_expert_ids(int64_t num_experts, int64_t top_k, int64_t tokens, uint64_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(tokens * top_k));
  uint64_t state = seed;
  for (int64_t t = 0; t < tokens; ++t) {
    int32_t* row = ids.data() + t * top_k;
    for (int64_t j = 0; j < top_k; ++j) {
      int32_t e;
      do e = static_cast<int32_t>(splitmix64(state) % static_cast<uint64_t>(num_experts));
      while (std::find(row, row + j, e) != row + j);
      row[j] = e;
    }
  }
  return ids;
}

std::vector<int32_t> with_shared_experts(const std::vector<int32_t>& ids, const LayerShape& shape) {
  const int64_t k = shape.top_k, s = shape.shared_experts, tokens = static_cast<int64_t>(ids.size()) / k;
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(tokens * (k + s)));
  for (int64_t t = 0; t < tokens; ++t) {
    out.insert(out.end(), ids.begin() + t * k, ids.begin() + (t + 1) * k);
    for (int64_t j = 0; j < s; ++j) out.push_back(static_cast<int32_t>(shape.experts + j));
  }
  return out;
}

}  // namespace eq::exec
