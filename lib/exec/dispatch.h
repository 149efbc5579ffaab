// How a MoE layer's token–slot pairs reach their experts. Every strategy
// computes the same function: slot_out[s] = expert(expert_ids[s])(x[s / top_k])
// for every pair s = token * top_k + j, unweighted; the caller combines the
// slots with the gate weights in slot order, so the strategies differ only in
// how the work is laid out (and what it costs), never in the arithmetic of a
// row.
//
// Index shapes: the router gives [batch, top_k] at decode and [batch, seq,
// top_k] at prefill. Both are the same flat [tokens * top_k] array here
// (tokens = batch * seq), so no strategy and no call site special-cases
// either phase.
//
//   mask-combine  the baseline strategy: for every bit group, every pair runs
//                 through that group's grouped matmul (ids outside the group
//                 remapped to its first member), the result is multiplied by
//                 the 0/1 membership mask and added. Cost ∝ groups × pairs.
//   sorted        counting sort of the pairs by expert, gather the rows, one
//                 contiguous batch per expert through its format's kernel,
//                 scatter back with the inverse permutation. Cost ∝ pairs.
//   auto          decided per call from M alone: M = tokens ≤ sort_cutoff runs
//                 each pair straight from x to its expert (no sort, no gather
//                 buffer): with a few tokens an expert rarely gets two rows,
//                 so sorting saves no weight reads and only costs the sort
//                 and the gather buffer; larger M runs sorted. sort_cutoff
//                 is measured per machine and model by `expertquant tune`.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "exec/bit_group.h"
#include "exec/mlp_kernel.h"
#include "model/float_buffer.h"

namespace eq::exec {

struct MoeWork {
  const PackedLayer* layer = nullptr;
  const float* x = nullptr;            // [tokens, hidden]
  int64_t tokens = 0, hidden = 0, top_k = 0;
  const int32_t* expert_ids = nullptr;  // [tokens * top_k], never a pruned expert
  float* slot_out = nullptr;            // [tokens * top_k, hidden], overwritten
  MlpKernel kernel = MlpKernel::kBatch; // chosen from `tokens` by the caller (mlp_kernel.h)
};

// Buffers reused across calls of one block (a gather buffer, per-group
// outputs), so steady-state calls do not allocate.
struct DispatchScratch {
  model::FloatBuffer rows_in, rows_out, group_out;
  std::vector<int64_t> order, offsets;
  std::vector<int32_t> remapped;
};

enum class DispatchKind { kMaskCombine, kSorted, kAuto };

class Dispatch {
 public:
  virtual ~Dispatch() = default;
  virtual DispatchKind kind() const = 0;
  virtual std::string name() const = 0;
  virtual void run(const MoeWork& work, DispatchScratch& scratch) const = 0;
  // Auto's cutoff: calls of more tokens run sorted (-1 for the other kinds).
  virtual int64_t sort_cutoff() const { return -1; }
  // For auto: true when a call with `tokens` rows takes the sorted branch.
  bool sorts(int64_t tokens) const { return tokens > sort_cutoff(); }
};

class MaskCombineDispatch : public Dispatch {
 public:
  DispatchKind kind() const override { return DispatchKind::kMaskCombine; }
  std::string name() const override { return "mask-combine"; }
  void run(const MoeWork& work, DispatchScratch& scratch) const override;
};

class SortedDispatch : public Dispatch {
 public:
  DispatchKind kind() const override { return DispatchKind::kSorted; }
  std::string name() const override { return "sorted"; }
  void run(const MoeWork& work, DispatchScratch& scratch) const override;
};

class AutoDispatch : public Dispatch {
 public:
  explicit AutoDispatch(int64_t sort_cutoff) : sort_cutoff_(sort_cutoff) {}
  DispatchKind kind() const override { return DispatchKind::kAuto; }
  std::string name() const override { return "auto"; }
  int64_t sort_cutoff() const override { return sort_cutoff_; }
  void run(const MoeWork& work, DispatchScratch& scratch) const override;

 private:
  int64_t sort_cutoff_;
};

// The unsorted branch of auto: each pair runs straight from its token's row
// of x into its slot of slot_out (m_rows = 1 per pair).
void run_per_token(const MoeWork& work);
// The sorted branch (also SortedDispatch::run).
void run_sorted(const MoeWork& work, DispatchScratch& scratch);

// "mask-combine", "sorted", "auto"; nullopt otherwise.
std::optional<DispatchKind> parse_dispatch_kind(std::string_view name);
// The value of a --dispatch option: one strategy name, or with `list` several
// separated by commas; a name that is none throws eq::Error naming the option
// and the three choices.
std::vector<DispatchKind> parse_dispatch_option(const std::string& value, bool list);
std::string_view dispatch_kind_name(DispatchKind kind);
// sort_cutoff is used by auto only.
std::unique_ptr<Dispatch> make_dispatch(DispatchKind kind, int64_t sort_cutoff);

}  // namespace eq::exec
