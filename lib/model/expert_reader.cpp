#include "model/expert_reader.h"

#include <cstring>

#include "core/error.h"
#include "core/shape.h"
#include "io/quantized_source.h"
#include "io/safetensors.h"

namespace eq::model {

namespace {

using Encoding = io::SourceTensors::Encoding;

bool fused(const ModelConfig& c) { return c.arch->expert_storage == ExpertStorage::kStackedFusedInterleaved; }

std::string experts_prefix(const ModelConfig& c, int64_t layer) {
  return moe_prefix(c, layer) + "experts.";
}

// kStackedFusedInterleaved: gate and up share "gate_up_proj".
std::string fused_name(const ModelConfig& c, int64_t layer, Proj p) {
  return experts_prefix(c, layer) + (p == Proj::kDown ? "down_proj" : "gate_up_proj");
}
std::string fused_bias_name(const ModelConfig& c, int64_t layer, Proj p) { return fused_name(c, layer, p) + "_bias"; }

std::string per_expert_bias_name(const ModelConfig& c, int64_t layer, int64_t e, Proj p) {
  std::string n = expert_weight_name(c, layer, e, p);
  return n.substr(0, n.size() - std::string("weight").size()) + "bias";
}

// Outputs of the stored tensor: 2I for the fused gate_up, H for down.
int64_t fused_out(const ModelConfig& c, Proj p) { return p == Proj::kDown ? c.hidden_size : 2 * c.moe_intermediate_size; }

// An mxfp4 tensor is stored [E, out, in] (the release layout); every other
// encoding as applied, x @ W: [E, in, out].
bool out_major(const io::SourceTensors& src, const std::string& name) {
  return src.has(name) && src.info(name).encoding == Encoding::kMxfp4;
}

std::vector<int64_t> fused_shape(const ModelConfig& c, const io::SourceTensors& src, int64_t layer, Proj p) {
  const std::string name = fused_name(c, layer, p);
  const int64_t out = fused_out(c, p), in = expert_cols(c, p);
  return out_major(src, name) ? std::vector<int64_t>{c.num_experts, out, in}
                              : std::vector<int64_t>{c.num_experts, in, out};
}

const io::SourceTensors::Info& checked(const io::SourceTensors& src, const std::string& name,
                                       const std::vector<int64_t>& shape) {
  const std::string& path = src.checkpoint().path();
  if (!src.has(name)) invalid(path + ": routed-expert tensor '" + name + "' is missing");
  const io::SourceTensors::Info& info = src.info(name);
  if (info.shape != shape)
    invalid(path + ": tensor '" + name + "' has shape " + shape_str(info.shape) + ", config implies " +
            shape_str(shape));
  return info;
}

void check_expert(const ModelConfig& c, const io::SourceTensors& src, int64_t e) {
  if (e < 0 || e >= c.num_experts)
    invalid(src.checkpoint().path() + ": expert " + std::to_string(e) + " out of range (the config has " +
            std::to_string(c.num_experts) + ")");
}

}  // namespace

std::string expert_source_tensor(const ModelConfig& c, int64_t layer, int64_t e, Proj p) {
  return fused(c) ? fused_name(c, layer, p) : expert_weight_name(c, layer, e, p);
}

int64_t expert_rows(const ModelConfig& c, Proj p) { return p == Proj::kDown ? c.hidden_size : c.moe_intermediate_size; }
int64_t expert_cols(const ModelConfig& c, Proj p) { return p == Proj::kDown ? c.moe_intermediate_size : c.hidden_size; }

std::vector<ExpertTensor> routed_expert_tensors(const ModelConfig& c, const io::SourceTensors& src, int64_t layer) {
  std::vector<ExpertTensor> t;
  if (fused(c)) {
    const Proj stored[2] = {Proj::kGate, Proj::kDown};  // gate_up_proj, down_proj
    for (Proj p : stored) t.push_back({fused_name(c, layer, p), fused_shape(c, src, layer, p), false});
    for (Proj p : stored) t.push_back({fused_bias_name(c, layer, p), {c.num_experts, fused_out(c, p)}, true});
    return t;
  }
  for (int64_t e = 0; e < c.num_experts; ++e)
    for (Proj p : {Proj::kGate, Proj::kUp, Proj::kDown})
      t.push_back({expert_weight_name(c, layer, e, p), {expert_rows(c, p), expert_cols(c, p)}, false});
  for (int64_t e = 0; e < c.num_experts; ++e)
    for (Proj p : {Proj::kGate, Proj::kUp, Proj::kDown})
      t.push_back({per_expert_bias_name(c, layer, e, p), {expert_rows(c, p)}, true});
  return t;
}

void read_expert_weight(const ModelConfig& c, const io::SourceTensors& src, int64_t layer, int64_t e, Proj p,
                        float* dst) {
  check_expert(c, src, e);
  const int64_t rows = expert_rows(c, p), cols = expert_cols(c, p);
  if (!fused(c)) {
    const std::string name = expert_weight_name(c, layer, e, p);
    checked(src, name, {rows, cols});
    src.to_f32(name, dst);  // dequantized exactly; pages released
    return;
  }
  const std::string name = fused_name(c, layer, p);
  checked(src, name, fused_shape(c, src, layer, p));
  const bool om = out_major(src, name);
  const int64_t out = fused_out(c, p);
  std::vector<float> s(static_cast<size_t>(out * cols));
  src.slice_to_f32(name, e, s.data());
  // Output row r of this projection is stored output index r (down) or
  // 2r + {0 gate, 1 up} (the interleaved gate_up).
  const int64_t step = p == Proj::kDown ? 1 : 2, off = p == Proj::kUp ? 1 : 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t o = r * step + off;
    float* d = dst + r * cols;
    if (om) {
      std::memcpy(d, s.data() + o * cols, static_cast<size_t>(cols) * sizeof(float));
    } else {
      for (int64_t k = 0; k < cols; ++k) d[k] = s[static_cast<size_t>(k * out + o)];
    }
  }
}

uint64_t expert_stored_bytes(const ModelConfig& c, const io::SourceTensors& src, int64_t layer, int64_t e, Proj p) {
  check_expert(c, src, e);
  if (!fused(c))
    return checked(src, expert_weight_name(c, layer, e, p), {expert_rows(c, p), expert_cols(c, p)}).stored_bytes;
  const auto& info = checked(src, fused_name(c, layer, p), fused_shape(c, src, layer, p));
  // Every expert's slice holds the same bytes; gate and up half each.
  return info.stored_bytes / static_cast<uint64_t>(c.num_experts) / (p == Proj::kDown ? 1u : 2u);
}

uint64_t expert_read_scratch_bytes(const ModelConfig& c, const io::SourceTensors& src, int64_t layer, Proj p) {
  if (!fused(c)) return 0;
  const auto& info = checked(src, fused_name(c, layer, p), fused_shape(c, src, layer, p));
  // The decoded slice and the stored bytes it was decoded from.
  return static_cast<uint64_t>(fused_out(c, p) * expert_cols(c, p)) * sizeof(float) +
         info.stored_bytes / static_cast<uint64_t>(c.num_experts);
}

std::vector<float> read_layer_expert_bias(const ModelConfig& c, const io::SourceTensors& src, int64_t layer, Proj p) {
  const int64_t E = c.num_experts, rows = expert_rows(c, p);
  if (fused(c)) {
    const std::string name = fused_bias_name(c, layer, p);
    if (!src.has(name)) return {};
    const int64_t out = fused_out(c, p);
    checked(src, name, {E, out});
    const std::vector<float> all = src.load_f32(name);
    const int64_t step = p == Proj::kDown ? 1 : 2, off = p == Proj::kUp ? 1 : 0;
    std::vector<float> b(static_cast<size_t>(E * rows));
    for (int64_t e = 0; e < E; ++e)
      for (int64_t r = 0; r < rows; ++r) b[static_cast<size_t>(e * rows + r)] = all[static_cast<size_t>(e * out + r * step + off)];
    return b;
  }
  int64_t present = 0;
  std::string missing;
  for (int64_t e = 0; e < E; ++e) {
    const std::string name = per_expert_bias_name(c, layer, e, p);
    if (src.has(name)) ++present;
    else if (missing.empty()) missing = name;
  }
  if (present == 0) return {};
  if (!missing.empty())
    invalid(src.checkpoint().path() + ": routed-expert bias '" + missing +
            "' is missing (other experts of the layer have one)");
  std::vector<float> b(static_cast<size_t>(E * rows));
  for (int64_t e = 0; e < E; ++e) {
    const std::string name = per_expert_bias_name(c, layer, e, p);
    checked(src, name, {rows});
    src.to_f32(name, b.data() + e * rows);
  }
  return b;
}

bool expert_is_mxfp4(const ModelConfig& c, const io::SourceTensors& src, int64_t layer, int64_t e, Proj p) {
  const std::string name = fused(c) ? fused_name(c, layer, p) : expert_weight_name(c, layer, e, p);
  return src.has(name) && src.info(name).encoding == Encoding::kMxfp4;
}

ExpertMxfp4 read_expert_mxfp4(const ModelConfig& c, const io::SourceTensors& src, int64_t layer, int64_t e, Proj p) {
  check_expert(c, src, e);
  const int64_t rows = expert_rows(c, p), cols = expert_cols(c, p);
  const std::string name = fused(c) ? fused_name(c, layer, p) : expert_weight_name(c, layer, e, p);
  checked(src, name, fused(c) ? fused_shape(c, src, layer, p) : std::vector<int64_t>{rows, cols});
  const io::SourceTensors::Mxfp4Slice mx = src.mxfp4_slice(name, fused(c) ? e : 0);
  const int64_t step = fused(c) && p != Proj::kDown ? 2 : 1, off = fused(c) && p == Proj::kUp ? 1 : 0;
  EQ_CHECK(mx.rows == rows * step && mx.cols == cols, "mxfp4 slice of " + name + " disagrees with its logical shape");
  const size_t scale_row = static_cast<size_t>(cols / 32), block_row = scale_row * 16;
  ExpertMxfp4 x;
  x.rows = rows;
  x.cols = cols;
  x.blocks.resize(static_cast<size_t>(rows) * block_row);
  x.scales.resize(static_cast<size_t>(rows) * scale_row);
  for (int64_t r = 0; r < rows; ++r) {
    const size_t o = static_cast<size_t>(r * step + off);
    std::memcpy(x.blocks.data() + static_cast<size_t>(r) * block_row, mx.blocks.data() + o * block_row, block_row);
    std::memcpy(x.scales.data() + static_cast<size_t>(r) * scale_row, mx.scales.data() + o * scale_row, scale_row);
  }
  return x;
}

}  // namespace eq::model
