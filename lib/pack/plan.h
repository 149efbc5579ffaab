// The pack plan: every output tensor (name, dtype, shape, bytes, shard) in
// write order, the bit groups of every layer, and the memory each step needs,
// all decided before any byte is written — so an impossible memory bound or a
// bad allocation fails before work starts, and shard headers can be written
// first by the streaming writer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "plan/allocation.h"
#include "quant/format.h"

namespace eq::io {
class Checkpoint;
class SourceTensors;
}

namespace eq::pack {

// Layout of one packed [rows, cols] matrix, once per (format, shape): the
// row's part_specs (a probe quantization for a row without them).
struct PartLayout {
  std::string name;
  DType dtype = DType::kU8;
  std::vector<int64_t> shape;
  uint64_t nbytes = 0;
};
struct MatrixLayout {
  const quant::FormatTraits* format = nullptr;
  int64_t rows = 0, cols = 0;
  std::vector<PartLayout> parts;
  uint64_t nbytes = 0;
};
const MatrixLayout& matrix_layout(const quant::FormatTraits& f, int64_t rows, int64_t cols);

enum class TensorKind { kCopy, kQuantized, kGroupPart, kExpertIds };
std::string_view tensor_kind_name(TensorKind k);

struct PlannedTensor {
  std::string name;
  TensorKind kind = TensorKind::kCopy;
  DType dtype = DType::kU8;
  std::vector<int64_t> shape;
  uint64_t nbytes = 0, bytes_before = 0;
  int64_t layer = -1;
  std::string source;                     // kCopy / kQuantized
  const quant::FormatTraits* format = nullptr;  // kQuantized / kGroupPart
  std::string part;                       // kQuantized / kGroupPart
  int part_index = 0;
  int group = -1, proj = -1;              // kGroupPart / kExpertIds
  int shard = 0;
};

struct GroupPlan {
  int id = 0;
  const quant::FormatTraits* format = nullptr;
  std::vector<int64_t> experts;       // slot -> expert id
  const MatrixLayout* layout[3] = {};  // gate, up, down
  uint64_t read_scratch[3] = {};      // bytes the expert reader holds besides the matrix (model::expert_read_scratch_bytes)
  std::string prefix;                 // "model.layers.L.mlp.groups.G"
  size_t first_tensor = 0;            // its expert_ids tensor; parts follow proj-major
  uint64_t working_set = 0;           // estimated bytes while it is packed
};

struct LayerPlan {
  int64_t layer = 0;
  bool moe = false;
  std::vector<plan::ExpertAssignment> experts;
  std::vector<GroupPlan> groups;
  std::vector<int> expert_group, expert_slot;  // -1 for pruned
  // The layer's groups are packed as a sequence of units, one projection of
  // one group each (written in plan order). True: the next unit's experts may
  // start while a unit's last experts are quantized and it is written (two
  // units' stacked parts held); false: each unit waits for the previous one to
  // be written, because two would not fit under max_memory.
  bool overlap_units = false;
};

struct PlanOptions {
  int64_t first_layer = 0, last_layer = -1;  // inclusive; -1 = the model's last
  std::string attn_format;                   // empty: attention and head copied as stored
  std::string shared_format;                 // empty: shared experts copied as stored
  std::string dense_format;                  // empty: dense MLPs (non-MoE layers) copied as stored
  uint64_t max_memory = 0;                   // bytes above the baseline RSS
  uint64_t shard_size = 4ULL << 30;
  int max_threads = 1;
};

struct PackPlan {
  std::vector<PlannedTensor> tensors;  // in write order
  std::vector<LayerPlan> layers;       // the packed layers, ascending
  bool has_globals = false;
  int64_t mtp_tensors_dropped = 0;  // multi-token-prediction tensors of the source, never read
  int num_shards = 1;
  int threads = 1;
  uint64_t estimated_peak = 0;  // bytes above the baseline
  uint64_t total_bytes_before = 0, total_bytes_after = 0;
};

// Throws eq::Error (kResource) when max_memory cannot hold the smallest unit
// of work, naming the tensor/group and the bytes it needs.
PackPlan make_plan(const io::SourceTensors& src, const model::ModelConfig& c, const plan::Allocation& a,
                   const PlanOptions& o);

// Greedy assignment of consecutive tensors to shards of at most shard_size
// bytes (a larger tensor gets a shard of its own). Returns the shard of each.
std::vector<int> assign_shards(const std::vector<uint64_t>& sizes, uint64_t shard_size, int* num_shards);

// True for tensors that --attn-format quantizes: lm_head and the attention
// projections the executor runs as LinearOps (model::expected_shape; latent
// attention's kv_b_proj, split per head, is not one of them).
bool is_attention_or_head(const model::ModelConfig& c, const std::string& name);

}  // namespace eq::pack
