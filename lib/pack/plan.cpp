#include "pack/plan.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <set>

#include "core/error.h"
#include "core/memory.h"
#include "io/layer_names.h"
#include "io/quantized_source.h"
#include "io/safetensors.h"
#include "model/expert_reader.h"

namespace eq::pack {

namespace {

constexpr uint64_t kPage = 4096;
// Bytes per weight a quantizer may hold besides its f32 input (rotated or
// residual copies); a deliberate over-estimate, see docs/allocation.md.
constexpr uint64_t kQuantizerScratchPerWeight = 8;
// Code pages first run while packing (quantizers, JSON), allocator and stacks:
// measured 1.2-1.5 MiB on qwen3moe-small, rounded up.
constexpr uint64_t kFixedOverhead = 3ULL << 20;
// Manifest records (kept until the end, then streamed to disk layer by layer).
constexpr uint64_t kPerExpertRecord = 2048, kPerTensorRecord = 512;


// Memory to quantize one [rows, cols] matrix on one thread: its source pages,
// the f32 copy, quantizer scratch, the packed result and an importance vector.
uint64_t per_matrix_bytes(const MatrixLayout& l, uint64_t src_elem) {
  const uint64_t rc = uint64_t(l.rows) * uint64_t(l.cols);
  return rc * (4 + kQuantizerScratchPerWeight + src_elem) + 2 * kPage + l.nbytes + uint64_t(l.cols) * 4;
}

// Peak of packing `n` experts of a group on `t` threads: one projection at a
// time, its stacked parts held until appended.
uint64_t chunk_bytes(const GroupPlan& g, uint64_t n, uint64_t t, uint64_t src_elem) {
  uint64_t worst = 0;
  for (int p = 0; p < 3; ++p) {
    const MatrixLayout& l = *g.layout[p];
    worst = std::max(worst, n * (l.nbytes + 2 * kPage) + std::min(n, t) * (per_matrix_bytes(l, src_elem) + g.read_scratch[p]));
  }
  return worst;
}

// Peak while unit (a, pa) — projection pa of group a — is finished and
// written and the next unit (b, pb) has started: both stacked outputs, and at
// most t matrices in flight between them.
uint64_t unit_pair_bytes(const GroupPlan& a, int pa, const GroupPlan& b, int pb, uint64_t t, uint64_t src_elem) {
  const MatrixLayout& la = *a.layout[pa];
  const MatrixLayout& lb = *b.layout[pb];
  const uint64_t na = a.experts.size(), nb = b.experts.size();
  const uint64_t matrix = std::max(per_matrix_bytes(la, src_elem) + a.read_scratch[pa],
                                   per_matrix_bytes(lb, src_elem) + b.read_scratch[pb]);
  return na * (la.nbytes + 2 * kPage) + nb * (lb.nbytes + 2 * kPage) + std::min(na + nb, t) * matrix;
}

}  // namespace

std::string_view tensor_kind_name(TensorKind k) {
  switch (k) {
    case TensorKind::kCopy: return "copy";
    case TensorKind::kQuantized: return "quantized";
    case TensorKind::kGroupPart: return "group_part";
    case TensorKind::kExpertIds: return "expert_ids";
  }
  return "?";
}

bool is_attention_or_head(const model::ModelConfig& c, const std::string& name) {
  if (name == "lm_head.weight") return true;
  return model::tensor_part(c, name) == "attention" && model::expected_shape(c, name).has_value();
}

const MatrixLayout& matrix_layout(const quant::FormatTraits& f, int64_t rows, int64_t cols) {
  static std::mutex mu;
  static std::map<std::tuple<std::string, int64_t, int64_t>, MatrixLayout> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_tuple(std::string(f.name), rows, cols);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  MatrixLayout l;
  l.format = &f;
  l.rows = rows;
  l.cols = cols;
  if (f.part_specs_of != nullptr) {
    // The row's declared parts, which every quantize() result has
    // (validate_packed; tests/quant/registry_test.cpp). A probe quantization
    // would cost a whole matrix's search for a trellis row: seconds a shape.
    for (const quant::PartSpec& spec : f.part_specs(rows, cols)) {
      uint64_t n = dtype_size(spec.dtype);
      for (const int64_t d : spec.shape) n *= uint64_t(d);
      l.parts.push_back({spec.name, spec.dtype, spec.shape, n});
      l.nbytes += n;
    }
    return cache.emplace(key, std::move(l)).first->second;
  }
  // A row without part_specs: a smooth, non-degenerate probe, of which only
  // the shapes and dtypes of the result are kept.
  std::vector<float> probe(size_t(rows) * size_t(cols));
  for (size_t i = 0; i < probe.size(); ++i) probe[i] = 0.02f * std::sin(0.37f * float(i % 9973));
  quant::QuantizeOptions qo;
  qo.tensor_name = "layout probe " + std::string(f.name) + " [" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
  quant::QuantizedMatrix q = f.quantize(probe.data(), rows, cols, qo);
  for (auto& p : q.parts) {
    l.parts.push_back({p.name, p.dtype, p.shape, p.bytes.size()});
    l.nbytes += p.bytes.size();
  }
  return cache.emplace(key, std::move(l)).first->second;
}

std::vector<int> assign_shards(const std::vector<uint64_t>& sizes, uint64_t shard_size, int* num_shards) {
  std::vector<int> shard(sizes.size());
  int current = 0;
  uint64_t filled = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (filled > 0 && filled + sizes[i] > shard_size) ++current, filled = 0;
    shard[i] = current;
    filled += sizes[i];
  }
  *num_shards = current + 1;
  return shard;
}

namespace {

// The steps of make_plan, in order: the tensors copied or quantized whole
// (globals, then each layer's), the layers' bit groups, the thread count the
// memory bound allows, the groups split into chunks that fit, and the shards.
class Planner {
 public:
  Planner(const io::SourceTensors& src, const model::ModelConfig& c, const plan::Allocation& a, const PlanOptions& o)
      : src_(src), c_(c), a_(a), o_(o) {
    if (!o.attn_format.empty()) attn_ = &quant::format_by_name(o.attn_format);
    if (!o.shared_format.empty()) shared_ = &quant::format_by_name(o.shared_format);
    if (!o.dense_format.empty()) dense_ = &quant::format_by_name(o.dense_format);
  }

  PackPlan run(int64_t first, int64_t last) {
    PackPlan plan;
    std::map<int64_t, std::vector<std::string>> by_layer = non_expert_tensors_by_layer(plan.mtp_tensors_dropped);
    // Tensors outside the layers travel with the part that holds layer 0.
    plan.has_globals = first == 0;
    if (plan.has_globals)
      for (const auto& name : by_layer[-1]) add_plain(name, -1, plan.tensors);
    uint64_t experts_in_range = 0;
    std::map<int64_t, std::vector<PlannedTensor>> layer_plain;  // written before the layer's groups
    for (int64_t L = first; L <= last; ++L) {
      for (const auto& name : by_layer[L]) add_plain(name, L, layer_plain[L]);
      plan.layers.push_back(plan_layer(L, experts_in_range));
    }
    size_t plain_tensors = plan.tensors.size();
    for (const auto& [L, v] : layer_plain) plain_tensors += v.size();
    fixed_ = kFixedOverhead + experts_in_range * kPerExpertRecord +
             (plain_tensors + experts_in_range) * kPerTensorRecord;
    plan.threads = choose_threads(plan);
    uint64_t peak = unit_max_;
    for (auto& lp : plan.layers) {
      split_groups(lp, plan.threads, peak);
      overlap_units(lp, plan.threads, peak);
      for (auto& t : layer_plain[lp.layer]) plan.tensors.push_back(std::move(t));
      add_group_tensors(lp, plan.tensors);
    }
    plan.estimated_peak = fixed_ + peak;
    assign_shards_and_totals(plan);
    return plan;
  }

 private:
  // Which source tensors are routed-expert weights (packed into groups);
  // their biases are copied like any non-expert tensor. The others by layer
  // (-1: globals). A quantized source weight and its scales are one logical
  // entry, copied as stored or quantized from its exact dequantized values.
  // Multi-token-prediction layers are dropped (no command runs them): counted
  // in `mtp_dropped`, never copied or quantized.
  std::map<int64_t, std::vector<std::string>> non_expert_tensors_by_layer(int64_t& mtp_dropped) const {
    std::set<std::string> expert_tensors;
    for (const auto& la : a_.layers)
      for (const model::ExpertTensor& t : model::routed_expert_tensors(c_, src_, la.layer))
        if (!t.bias) expert_tensors.insert(t.name);
    std::map<int64_t, std::vector<std::string>> by_layer;
    for (const auto& name : src_.names())
      if (model::is_mtp_tensor(c_, name)) ++mtp_dropped;
      else if (!expert_tensors.count(name)) by_layer[io::layer_of(name).value_or(-1)].push_back(name);
    return by_layer;
  }

  // The format a non-routed matrix is quantized to (null: copied as stored),
  // and the option that asked for it (named in errors).
  std::pair<const quant::FormatTraits*, std::string> format_for(const std::string& name) const {
    if (attn_ && is_attention_or_head(c_, name)) return {attn_, "--attn-format " + o_.attn_format};
    if (shared_ && model::tensor_part(c_, name) == "shared_experts" && model::expected_shape(c_, name))
      return {shared_, "--shared-format " + o_.shared_format};
    if (dense_ && model::tensor_part(c_, name) == "dense_mlp" && model::expected_shape(c_, name))
      return {dense_, "--dense-format " + o_.dense_format};
    return {nullptr, ""};
  }

  void add_plain(const std::string& name, int64_t layer, std::vector<PlannedTensor>& dst) {
    const io::SourceTensors::Info& logical = src_.info(name);
    const bool plain = logical.encoding == io::SourceTensors::Encoding::kPlain;
    src_elem_ = std::max<uint64_t>(src_elem_, plain ? dtype_size(logical.stored) : sizeof(float));
    const auto [fmt, option] = format_for(name);
    if (fmt && logical.shape.size() == 2 && (!plain || dtype_is_float(logical.stored)))
      add_quantized(name, layer, *fmt, option, dst);
    else
      add_copies(name, layer, dst);
  }

  void add_quantized(const std::string& name, int64_t layer, const quant::FormatTraits& fmt, const std::string& option,
                     std::vector<PlannedTensor>& dst) {
    const io::SourceTensors::Info& info = src_.info(name);
    const int64_t rows = info.shape[0], cols = info.shape[1];
    if ((fmt.row_multiple > 0 && rows % fmt.row_multiple) || (fmt.col_multiple > 0 && cols % fmt.col_multiple))
      invalid(option + ": tensor " + name + " [" + std::to_string(rows) + ", " + std::to_string(cols) +
              "] is not a multiple of [" + std::to_string(fmt.row_multiple) + ", " + std::to_string(fmt.col_multiple) +
              "]");
    const MatrixLayout& l = matrix_layout(fmt, rows, cols);
    const std::string base = name.substr(0, name.size() - std::string(".weight").size());
    for (size_t i = 0; i < l.parts.size(); ++i) {
      PlannedTensor t;
      t.name = base + "." + l.parts[i].name;
      t.kind = TensorKind::kQuantized;
      t.dtype = l.parts[i].dtype;
      t.shape = l.parts[i].shape;
      t.nbytes = l.parts[i].nbytes;
      t.bytes_before = i == 0 ? info.stored_bytes : 0;
      t.layer = layer;
      t.source = name;
      t.format = &fmt;
      t.part = l.parts[i].name;
      t.part_index = int(i);
      dst.push_back(std::move(t));
    }
    unit_max_ = std::max(unit_max_, per_matrix_bytes(l, sizeof(float)) + info.stored_bytes);
  }

  // Copied as stored: a quantized source weight keeps its scales beside it
  // (the packed config.json keeps the quantization_config that reads them).
  void add_copies(const std::string& name, int64_t layer, std::vector<PlannedTensor>& dst) {
    for (const std::string& stored : src_.stored_names(name)) {
      const io::TensorInfo& info = src_.checkpoint().info(stored);
      PlannedTensor t;
      t.name = stored;
      t.kind = TensorKind::kCopy;
      t.dtype = info.dtype;
      t.shape = info.shape;
      t.nbytes = t.bytes_before = info.nbytes();
      t.layer = layer;
      t.source = stored;
      dst.push_back(std::move(t));
      unit_max_ = std::max(unit_max_, info.nbytes() + 2 * kPage);
    }
  }

  // Groups of one format per layer, formats in registry order.
  LayerPlan plan_layer(int64_t L, uint64_t& experts_in_range) const {
    LayerPlan lp;
    lp.layer = L;
    const plan::LayerAllocation* la = a_.find(L);
    lp.moe = la != nullptr;
    if (!la) return lp;
    lp.experts = la->experts;
    lp.expert_group.assign(la->experts.size(), -1);
    lp.expert_slot.assign(la->experts.size(), -1);
    experts_in_range += la->experts.size();
    for (const auto& f : quant::all_formats()) {
      GroupPlan g;
      g.format = &f;
      for (size_t e = 0; e < la->experts.size(); ++e)
        if (la->experts[e].cls != plan::ExpertClass::kPruned && la->experts[e].format == f.name) g.experts.push_back(int64_t(e));
      if (g.experts.empty()) continue;
      g.layout[0] = g.layout[1] = &matrix_layout(f, c_.moe_intermediate_size, c_.hidden_size);
      g.layout[2] = &matrix_layout(f, c_.hidden_size, c_.moe_intermediate_size);
      for (int p = 0; p < 3; ++p) g.read_scratch[p] = model::expert_read_scratch_bytes(c_, src_, L, model::Proj(p));
      lp.groups.push_back(std::move(g));
    }
    return lp;
  }

  // Threads under the bound: fewer threads before giving up.
  int choose_threads(const PackPlan& plan) const {
    int threads = std::max(1, o_.max_threads);
    for (;; --threads) {
      bool fits = fixed_ + unit_max_ <= o_.max_memory;
      for (const auto& lp : plan.layers)
        for (const auto& g : lp.groups) fits = fits && fixed_ + chunk_bytes(g, 1, threads, src_elem_) <= o_.max_memory;
      if (fits) return threads;
      if (threads == 1) fail_below_smallest_unit(plan);
    }
  }

  [[noreturn]] void fail_below_smallest_unit(const PackPlan& plan) const {
    uint64_t need = fixed_ + unit_max_;
    std::string what = "copying the largest non-expert tensor";
    for (const auto& lp : plan.layers)
      for (const auto& g : lp.groups)
        if (fixed_ + chunk_bytes(g, 1, 1, src_elem_) > need)
          need = fixed_ + chunk_bytes(g, 1, 1, src_elem_),
          what = "quantizing one " + std::string(g.format->name) + " expert of layer " + std::to_string(lp.layer);
    fail(ErrorKind::kResource, "--max-memory " + std::to_string(o_.max_memory) + " (" + format_bytes(o_.max_memory) +
                                   ") is below the " + std::to_string(need) + " bytes (" + format_bytes(need) +
                                   ") needed for " + what + "; raise --max-memory");
  }

  // Splits each group into chunks that fit; each chunk becomes its own group.
  void split_groups(LayerPlan& lp, int threads, uint64_t& peak) const {
    std::vector<GroupPlan> split;
    for (auto& g : lp.groups) {
      const uint64_t total = g.experts.size();
      uint64_t n = total;
      while (n > 1 && fixed_ + chunk_bytes(g, n, threads, src_elem_) > o_.max_memory) --n;
      const uint64_t chunks = (total + n - 1) / n;
      for (uint64_t k = 0; k < chunks; ++k) {
        GroupPlan part = g;
        const uint64_t b = total * k / chunks, e = total * (k + 1) / chunks;
        part.experts.assign(g.experts.begin() + b, g.experts.begin() + e);
        part.working_set = chunk_bytes(part, part.experts.size(), threads, src_elem_);
        peak = std::max(peak, part.working_set);
        split.push_back(std::move(part));
      }
    }
    lp.groups = std::move(split);
  }

  // Lets a layer's units overlap (LayerPlan::overlap_units) when every two
  // consecutive ones fit under the bound together; the groups are split as
  // without it, so the output does not depend on it.
  void overlap_units(LayerPlan& lp, int threads, uint64_t& peak) const {
    uint64_t worst = 0;
    for (size_t gi = 0; gi < lp.groups.size(); ++gi)
      for (int p = 0; p < 3; ++p) {
        if (p < 2) worst = std::max(worst, unit_pair_bytes(lp.groups[gi], p, lp.groups[gi], p + 1, threads, src_elem_));
        else if (gi + 1 < lp.groups.size())
          worst = std::max(worst, unit_pair_bytes(lp.groups[gi], 2, lp.groups[gi + 1], 0, threads, src_elem_));
      }
    lp.overlap_units = fixed_ + worst <= o_.max_memory;
    if (lp.overlap_units) peak = std::max(peak, worst);
  }

  // Names the groups, gives each expert its slot, and appends each group's
  // expert-id tensor and stacked parts (proj-major).
  static void add_group_tensors(LayerPlan& lp, std::vector<PlannedTensor>& tensors) {
    for (size_t gi = 0; gi < lp.groups.size(); ++gi) {
      GroupPlan& g = lp.groups[gi];
      g.id = int(gi);
      g.prefix = "model.layers." + std::to_string(lp.layer) + ".mlp.groups." + std::to_string(gi);
      g.first_tensor = tensors.size();
      for (size_t s = 0; s < g.experts.size(); ++s) {
        lp.expert_group[g.experts[s]] = int(gi);
        lp.expert_slot[g.experts[s]] = int(s);
      }
      const int64_t n = int64_t(g.experts.size());
      PlannedTensor ids;
      ids.name = g.prefix + ".expert_ids";
      ids.kind = TensorKind::kExpertIds;
      ids.dtype = DType::kI32;
      ids.shape = {n};
      ids.nbytes = uint64_t(n) * 4;
      ids.layer = lp.layer;
      ids.group = int(gi);
      tensors.push_back(std::move(ids));
      for (int p = 0; p < 3; ++p) add_group_parts(lp, g, p, tensors);
    }
  }

  static void add_group_parts(const LayerPlan& lp, const GroupPlan& g, int p, std::vector<PlannedTensor>& tensors) {
    const int64_t n = int64_t(g.experts.size());
    const MatrixLayout& l = *g.layout[p];
    for (size_t i = 0; i < l.parts.size(); ++i) {
      PlannedTensor t;
      t.name = g.prefix + "." + std::string(p == 0 ? "gate" : p == 1 ? "up" : "down") + "." + l.parts[i].name;
      t.kind = TensorKind::kGroupPart;
      t.dtype = l.parts[i].dtype;
      t.shape = l.parts[i].shape;
      t.shape.insert(t.shape.begin(), n);
      t.nbytes = uint64_t(n) * l.parts[i].nbytes;
      t.layer = lp.layer;
      t.format = g.format;
      t.part = l.parts[i].name;
      t.part_index = int(i);
      t.group = g.id;
      t.proj = p;
      tensors.push_back(std::move(t));
    }
  }

  // Non-expert tensors of a layer were added before its groups; the writer
  // needs exactly this order, so shards are assigned over it.
  void assign_shards_and_totals(PackPlan& plan) const {
    std::vector<uint64_t> sizes;
    for (const auto& t : plan.tensors) sizes.push_back(t.nbytes);
    std::vector<int> shard = assign_shards(sizes, o_.shard_size, &plan.num_shards);
    for (size_t i = 0; i < plan.tensors.size(); ++i) {
      plan.tensors[i].shard = shard[i];
      plan.total_bytes_before += plan.tensors[i].bytes_before;
      plan.total_bytes_after += plan.tensors[i].nbytes;
    }
    for (const auto& lp : plan.layers)
      for (size_t e = 0; e < lp.experts.size(); ++e)
        for (int p = 0; p < 3; ++p)
          plan.total_bytes_before += model::expert_stored_bytes(c_, src_, lp.layer, int64_t(e), model::Proj(p));
  }

  const io::SourceTensors& src_;
  const model::ModelConfig& c_;
  const plan::Allocation& a_;
  const PlanOptions& o_;
  const quant::FormatTraits* attn_ = nullptr;
  const quant::FormatTraits* shared_ = nullptr;
  const quant::FormatTraits* dense_ = nullptr;
  uint64_t unit_max_ = 0;  // largest single-thread unit outside the groups
  uint64_t src_elem_ = 2;  // widest source element read (bytes)
  uint64_t fixed_ = 0;     // bytes held whatever the thread count: overhead and manifest records
};

}  // namespace

PackPlan make_plan(const io::SourceTensors& src, const model::ModelConfig& c, const plan::Allocation& a,
                   const PlanOptions& o) {
  const int64_t first = o.first_layer, last = o.last_layer < 0 ? c.num_layers - 1 : o.last_layer;
  if (first < 0 || last >= c.num_layers || first > last)
    invalid("--layers " + std::to_string(first) + "-" + std::to_string(last) + ": the model has layers 0-" +
            std::to_string(c.num_layers - 1));
  return Planner(src, c, a, o).run(first, last);
}

}  // namespace eq::pack
