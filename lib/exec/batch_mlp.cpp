#include "exec/batch_mlp.h"

#include <algorithm>

#include "core/thread_pool.h"
#include "model/kernels/float_kernels.h"

namespace eq::exec {
namespace {

// Rows of one batch per pool task: large enough to amortize decoding a
// panel of weights, small enough to split a hot expert across cores.
constexpr int64_t kRowChunk = 128;

}  // namespace

bool matmul_uses_pool(const quant::FormatTraits& format) {
  // The trellis matmul parallelizes over 16-row tiles on default_pool() itself.
  return format.family == "trellis";
}

void run_expert(const ExpertWeights& w, const float* x, int64_t rows, float* y, model::FloatBuffer& scratch) {
  if (rows <= 0) return;
  const int64_t I = w.gate.rows;
  scratch.resize(static_cast<size_t>(2 * rows * I));
  float* gate = scratch.data();
  float* up = gate + rows * I;
  w.gate.format->matmul(w.gate, x, rows, gate, false);
  w.up.format->matmul(w.up, x, rows, up, false);
  // The same SiLU kernel as the reference MLP, so bf16 passthrough packs reproduce it.
  model::kernels::silu_mul(gate, up, rows * I, gate);
  w.down.format->matmul(w.down, gate, rows, y, false);
}

void run_batch_mlp(std::span<const ExpertBatch> batches) {
  struct Task {
    const ExpertBatch* batch;
    int64_t begin, end;
  };
  std::vector<Task> pooled, serial;
  for (const ExpertBatch& b : batches) {
    if (b.rows <= 0) continue;
    std::vector<Task>& dst = matmul_uses_pool(*b.format) ? serial : pooled;
    if (&dst == &serial) {
      dst.push_back({&b, 0, b.rows});
      continue;
    }
    for (int64_t r = 0; r < b.rows; r += kRowChunk) dst.push_back({&b, r, std::min(b.rows, r + kRowChunk)});
  }
  const int64_t H = batches.empty() ? 0 : batches.front().weights->down.rows;
  auto run_task = [H](const Task& t) {
    thread_local model::FloatBuffer scratch;
    run_expert(*t.batch->weights, t.batch->x + t.begin * H, t.end - t.begin, t.batch->y + t.begin * H, scratch);
  };
  default_pool().run(pooled.size(), [&](size_t i) { run_task(pooled[i]); });
  for (const Task& t : serial) run_task(t);
}

}  // namespace eq::exec
