// The decode expert-MLP kernel: every row of every batch runs
//   prepare x once (int8 blocks, quant/gemv.h)
//   -> gate and up of one block of I rows in one chunk, their biases and the
//      activation on the block
//   -> prepare h once -> down, one block of H rows per chunk, plus its bias
// through the formats' gemv kernels. A kernel with a prepare hook (trellis:
// the rotated input H_K(su o x)) gets its own input per (row, matrix), built
// once in the prepare step and read by every chunk of that matrix. Chunks are (row, block) pairs handed out
// by the pool's atomic counter, so a dominant expert (top-2 of 8 experts: two
// 14336 x 4096 experts) still keeps every core busy. Chunks write disjoint
// outputs and each row's result depends only on (expert, x row), so any
// thread count and any grouping of rows into batches give the same bits.
//
// The small-batch variant (MlpKernel::kSmallBatch, rows_per_pass > 1) runs up
// to quant::kMaxGemvRows rows of one expert per chunk through the kernels'
// run_rows, so each weight is read and unpacked once for all of them; every
// row still gets the bits of the one-row decode (quant/gemv.h).
#include "exec/decode_mlp.h"

#include <algorithm>
#include <vector>

#include "core/thread_pool.h"
#include "exec/batch_mlp.h"
#include "model/kernels/float_kernels.h"
#include "quant/gemv.h"

namespace eq::exec {

namespace {

// Chunks never get shorter than this many output rows, and are split down
// toward it only until every core has a few chunks (load balance).
constexpr int64_t kMinBlock = 64;
constexpr size_t kChunksPerThread = 3;

bool has_gemv(const ExpertWeights& w) { return w.gate.format->gemv && w.up.format->gemv && w.down.format->gemv; }

int64_t aligned_block(int64_t block, int64_t align) { return (block + align - 1) / align * align; }

struct DecodeRow {
  const ExpertWeights* w;
  const float* x;
  float* y;
};

}  // namespace

void run_decode_mlp(std::span<const ExpertBatch> batches, int rows_per_pass) {
  rows_per_pass = std::clamp(rows_per_pass, 1, quant::kMaxGemvRows);
  std::vector<ExpertBatch> fallback;
  std::vector<DecodeRow> rows;
  // Passes: up to rows_per_pass consecutive rows of one expert, [first, first + count).
  struct Pass {
    uint32_t first, count;
  };
  std::vector<Pass> passes;
  for (const ExpertBatch& b : batches) {
    if (b.rows <= 0) continue;
    if (!has_gemv(*b.weights)) {
      fallback.push_back(b);
      continue;
    }
    const int64_t H = b.weights->gate.cols;
    for (int64_t r = 0; r < b.rows; ++r) {
      if (r % rows_per_pass == 0)
        passes.push_back({static_cast<uint32_t>(rows.size()),
                          static_cast<uint32_t>(std::min<int64_t>(rows_per_pass, b.rows - r))});
      rows.push_back({b.weights, b.x + r * H, b.y + r * H});
    }
  }
  // Formats without a decode kernel run the batch kernel, per expert: a row's
  // result still depends only on its expert and its x.
  if (!fallback.empty()) run_batch_mlp(fallback);
  if (rows.empty()) return;

  const size_t R = rows.size();
  // Buffers of the calling thread, reused across calls; the pool's chunks
  // reach them through these references (a thread_local named inside a
  // chunk would be the worker's own, empty copy).
  struct Buffers {
    std::vector<quant::GemvActivation> x_act, h_act, gate_act, up_act, down_act;
    std::vector<std::vector<float>> hidden;
  };
  thread_local Buffers buffers;
  std::vector<quant::GemvActivation>& x_act = buffers.x_act;
  std::vector<quant::GemvActivation>& h_act = buffers.h_act;
  std::vector<quant::GemvActivation>& gate_act = buffers.gate_act;
  std::vector<quant::GemvActivation>& up_act = buffers.up_act;
  std::vector<quant::GemvActivation>& down_act = buffers.down_act;
  std::vector<std::vector<float>>& hidden = buffers.hidden;
  if (x_act.size() < R) x_act.resize(R), h_act.resize(R), hidden.resize(R);
  if (gate_act.size() < R) gate_act.resize(R), up_act.resize(R), down_act.resize(R);
  // The input each matrix of each row reads (the shared activation or its own).
  std::vector<const quant::GemvInput*> gate_in(R), up_in(R), down_in(R);
  ThreadPool& pool = default_pool();

  // Chunk lists: (pass, output rows [begin, end)). Blocks start at the
  // formats' preferred_rows and halve while there are too few chunks.
  struct Chunk {
    uint32_t pass;
    int64_t begin, end;
  };
  const size_t want = kChunksPerThread * static_cast<size_t>(pool.size());
  auto make_chunks = [&](auto matrices_of) {
    std::vector<Chunk> chunks;
    for (int64_t shrink = 1;; shrink *= 2) {
      chunks.clear();
      bool can_shrink = false;
      for (size_t i = 0; i < passes.size(); ++i) {
        const auto [first, second] = matrices_of(*rows[passes[i].first].w);
        const quant::GemvKernel& k1 = *first->format->gemv;
        const quant::GemvKernel& k2 = *second->format->gemv;
        const int64_t n = first->rows;
        const int64_t align = std::max(k1.row_align, k2.row_align);
        const int64_t preferred = std::max(k1.preferred_rows, k2.preferred_rows) / shrink;
        const int64_t block = aligned_block(std::max(kMinBlock, preferred), align);
        can_shrink |= preferred > kMinBlock;
        for (int64_t b = 0; b < n; b += block) chunks.push_back({static_cast<uint32_t>(i), b, std::min(n, b + block)});
      }
      if (chunks.size() >= want || !can_shrink) {
        // Largest first (bytes read): with experts of 8, 4 and 2 bits the
        // chunks differ up to 4x, and a big one handed out last left the
        // other core idle at the end of the pass (the mixed target at M = 1).
        auto bytes = [&](const Chunk& c) {
          const auto [first, second] = matrices_of(*rows[passes[c.pass].first].w);
          return static_cast<double>(c.end - c.begin) * first->cols *
                 (first->format->bits_per_weight + (second != first ? second->format->bits_per_weight : 0.0));
        };
        std::stable_sort(chunks.begin(), chunks.end(), [&](const Chunk& a, const Chunk& b) { return bytes(a) > bytes(b); });
        return chunks;
      }
    }
  };
  const std::vector<Chunk> gate_up = make_chunks([](const ExpertWeights& w) { return std::pair{&w.gate, &w.up}; });
  const std::vector<Chunk> down = make_chunks([](const ExpertWeights& w) { return std::pair{&w.down, &w.down}; });
  for (size_t i = 0; i < R; ++i) hidden[i].resize(static_cast<size_t>(2 * rows[i].w->gate.rows));

  pool.run(R, [&](size_t i) {
    const ExpertWeights& w = *rows[i].w;
    const quant::GemvKernel& kg = *w.gate.format->gemv;
    const quant::GemvKernel& ku = *w.up.format->gemv;
    if (!kg.prepare || !ku.prepare) x_act[i].set(rows[i].x, w.gate.cols);
    gate_in[i] = &quant::gemv_input_for(kg, w.gate, rows[i].x, x_act[i], gate_act[i]);
    up_in[i] = &quant::gemv_input_for(ku, w.up, rows[i].x, x_act[i], up_act[i]);
  });
  pool.run(gate_up.size(), [&](size_t c) {
    const Chunk& ch = gate_up[c];
    const Pass& p = passes[ch.pass];
    const ExpertWeights& w = *rows[p.first].w;
    const int n = static_cast<int>(p.count);
    const quant::GemvInput* g_in[quant::kMaxGemvRows] = {};
    const quant::GemvInput* u_in[quant::kMaxGemvRows] = {};
    float* gate[quant::kMaxGemvRows] = {};
    float* up[quant::kMaxGemvRows] = {};
    for (int j = 0; j < n; ++j) {
      g_in[j] = gate_in[p.first + j];
      u_in[j] = up_in[p.first + j];
      gate[j] = hidden[p.first + j].data() + ch.begin;
      up[j] = hidden[p.first + j].data() + w.gate.rows + ch.begin;
    }
    quant::gemv_run_rows(*w.gate.format->gemv, w.gate, g_in, n, ch.begin, ch.end, gate);
    quant::gemv_run_rows(*w.up.format->gemv, w.up, u_in, n, ch.begin, ch.end, up);
    // The same activation kernel as the reference and batch MLPs.
    const float* gb = w.gate_bias ? w.gate_bias + ch.begin : nullptr;
    const float* ub = w.up_bias ? w.up_bias + ch.begin : nullptr;
    const int64_t len = ch.end - ch.begin;
    for (int j = 0; j < n; ++j) model::kernels::glu_rows(w.act, gate[j], up[j], 1, len, len, gb, ub, gate[j]);
  });
  pool.run(R, [&](size_t i) {
    const ExpertWeights& w = *rows[i].w;
    const quant::GemvKernel& kd = *w.down.format->gemv;
    if (!kd.prepare) h_act[i].set(hidden[i].data(), w.gate.rows);
    down_in[i] = &quant::gemv_input_for(kd, w.down, hidden[i].data(), h_act[i], down_act[i]);
  });
  pool.run(down.size(), [&](size_t c) {
    const Chunk& ch = down[c];
    const Pass& p = passes[ch.pass];
    const ExpertWeights& w = *rows[p.first].w;
    const int n = static_cast<int>(p.count);
    const quant::GemvInput* d_in[quant::kMaxGemvRows] = {};
    float* y[quant::kMaxGemvRows] = {};
    for (int j = 0; j < n; ++j) d_in[j] = down_in[p.first + j], y[j] = rows[p.first + j].y + ch.begin;
    quant::gemv_run_rows(*w.down.format->gemv, w.down, d_in, n, ch.begin, ch.end, y);
    if (w.down_bias)
      for (int j = 0; j < n; ++j) add_bias_rows(w.down_bias + ch.begin, ch.end - ch.begin, y[j], 1, ch.end - ch.begin);
  });
}

}  // namespace eq::exec
