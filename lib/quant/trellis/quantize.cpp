// Trellis quantization: incoherence processing, per-tile Viterbi search (with
// importance feedback), per-row least-squares scale refit, bit packing.
#include <algorithm>
#include <cmath>
#include <utility>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "quant/hadamard.h"
#include "quant/trellis/codebook.h"
#include "quant/trellis/format.h"
#include "quant/trellis/importance.h"
#include "quant/trellis/viterbi.h"

namespace eq::quant::trellis {

namespace {

std::string quoted_tensor_name(const QuantizeOptions& o) {
  return o.tensor_name.empty() ? std::string("<unnamed tensor>") : "'" + o.tensor_name + "'";
}

void check_input(const float* w, int64_t rows, int64_t cols, const QuantizeOptions& o, int bits) {
  if (rows <= 0 || cols <= 0 || rows % kTileDim != 0 || cols % kTileDim != 0)
    invalid("trellis" + std::to_string(bits) + ": tensor " + quoted_tensor_name(o) + " has shape [" + std::to_string(rows) +
            ", " + std::to_string(cols) + "]; both dimensions must be positive multiples of 16 (16x16 tiles)");
  for (int64_t i = 0; i < rows * cols; ++i)
    if (!std::isfinite(w[i]))
      invalid("trellis" + std::to_string(bits) + ": tensor " + quoted_tensor_name(o) + " has a non-finite weight (" +
              std::to_string(w[i]) + ") at [" + std::to_string(i / cols) + ", " + std::to_string(i % cols) + "]");
  if (o.importance)
    for (int64_t k = 0; k < cols; ++k)
      if (!std::isfinite(o.importance[k]) || o.importance[k] < 0)
        invalid("trellis" + std::to_string(bits) + ": tensor " + quoted_tensor_name(o) + " has importance " +
                std::to_string(o.importance[k]) + " at input channel " + std::to_string(k) +
                " (must be finite and >= 0)");
}

// One tile's search: target/weight in tile sequence order, states out.
struct TileSearch {
  Viterbi viterbi;
  float target[kTileSize], weight[kTileSize];
  uint32_t states[kTileSize];
};

TileSearch& tile_search() {
  thread_local TileSearch search;
  return search;
}

// The search problem of tile (kt, nt) against `target` (rotated basis,
// [rows, cols]): targets and weights in tile sequence order.
void tile_problem(int64_t cols, int64_t kt, int64_t nt, const float* target, const float* factor,
                  const ImportanceFeedback& fb, float* tile_target, float* tile_weight) {
  for (int r = 0; r < kTileDim; ++r) {
    const int64_t n = nt * kTileDim + r;
    const float f = factor[n];
    for (int c = 0; c < kTileDim; ++c) {
      const int64_t k = kt * kTileDim + c;
      // Error in code units: (y - w/f)^2 * f^2, weighted by the column's importance.
      tile_target[r * kTileDim + c] = f > 0 ? target[n * cols + k] / f : 0.0f;
      tile_weight[r * kTileDim + c] = f > 0 ? f * f * fb.column_weight(k) : 0.0f;
    }
  }
}

// Tiles handed to a TileBatchSearch per call: bounds the host buffers (2 KB a
// tile) while keeping a GPU busy.
constexpr int64_t kBatchTiles = 8192;

// Searches tiles [0, count) of a list through `batch`: tile(i) gives (kt, nt).
template <typename TileOf, typename StatesOf>
void search_batched(TileBatchSearch batch, int bits, const float* code_values, int64_t cols, int64_t count,
                    const TileOf& tile, const StatesOf& states_of, const float* target, const float* factor,
                    const ImportanceFeedback& fb) {
  std::vector<float> tt, tw;
  std::vector<uint16_t> st;
  for (int64_t i0 = 0; i0 < count; i0 += kBatchTiles) {
    const int64_t m = std::min(kBatchTiles, count - i0);
    tt.resize(static_cast<size_t>(m * kTileSize));
    tw.resize(tt.size());
    st.resize(tt.size());
    default_pool().run(static_cast<size_t>(m), [&](size_t j) {
      const auto [kt, nt] = tile(i0 + static_cast<int64_t>(j));
      tile_problem(cols, kt, nt, target, factor, fb, tt.data() + j * kTileSize, tw.data() + j * kTileSize);
    });
    batch(bits, code_values, m, tt.data(), tw.data(), st.data());
    for (int64_t j = 0; j < m; ++j) {
      const auto [kt, nt] = tile(i0 + j);
      std::memcpy(states_of(kt, nt), st.data() + j * kTileSize, kTileSize * sizeof(uint16_t));
    }
  }
}

// Runs the Viterbi search of tile (kt, nt) against `target` (rotated basis,
// [rows, cols]) and stores the chosen states.
void search_tile(int bits, const float* code_values, int64_t cols, int64_t kt, int64_t nt, const float* target, const float* factor,
                 const ImportanceFeedback& fb, uint16_t* states_out) {
  TileSearch& ts = tile_search();
  tile_problem(cols, kt, nt, target, factor, fb, ts.target, ts.weight);
  TrellisProblem p{kStateBits, bits, code_values, kTileSize, ts.target, ts.weight};
  ts.viterbi.run_tail_biting(p, ts.states);
  for (int i = 0; i < kTileSize; ++i) states_out[i] = static_cast<uint16_t>(ts.states[i]);
}

void pack_tile(const uint16_t* states, int bits, uint8_t* out) {
  std::memset(out, 0, tile_bytes(bits));
  for (int t = 0; t < kTileSize; ++t)
    for (int b = 0; b < bits; ++b) {
      const int pos = t * bits + b;  // most significant bit of the symbol first
      const uint32_t bit = (states[t] >> (bits - 1 - b)) & 1u;
      out[pos >> 3] |= static_cast<uint8_t>(bit << (7 - (pos & 7)));
    }
  for (int t = 0; t < kTileSize; ++t)
    EQ_CHECK(tile_state(out, bits, t) == states[t], "trellis stream is not tail-biting consistent");
}

}  // namespace

double initial_scale_ratio(int bits) {
  switch (bits) {
    case 2: return 1.02;
    case 3: return 1.06;
    default: return 1.10;
  }
}

QuantizedMatrix quantize_matrix(const float* w, int64_t rows, int64_t cols, const QuantizeOptions& options,
                                int bits, double scale_ratio, Code code, TileBatchSearch batch) {
  check_input(w, rows, cols, options, bits);
  const float* codes = code_table(code);
  const int64_t tiles_n = rows / kTileDim, tiles_k = cols / kTileDim;
  const std::vector<int8_t> su = random_signs(options.seed, kSuStream, cols);
  const std::vector<int8_t> sv = random_signs(options.seed, kSvStream, rows);

  // W' = H_N diag(sv) W diag(su) H_K.
  std::vector<float> rotated(static_cast<size_t>(rows * cols));
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t k = 0; k < cols; ++k) rotated[n * cols + k] = w[n * cols + k] * static_cast<float>(su[k] * sv[n]);
  hadamard_rows(rotated.data(), rows, cols);
  hadamard_columns(rotated.data(), rows, cols);

  // Per-row factor (scale in code units): value = y(state) * factor[n].
  std::vector<float> factor(rows);
  for (int64_t n = 0; n < rows; ++n) {
    double ss = 0;
    for (int64_t k = 0; k < cols; ++k) ss += static_cast<double>(rotated[n * cols + k]) * rotated[n * cols + k];
    factor[n] = static_cast<float>(scale_ratio * std::sqrt(ss / static_cast<double>(cols)) / code_std(code));
  }

  const ImportanceFeedback fb(options.importance, cols);
  std::vector<uint16_t> states(static_cast<size_t>(rows * cols));  // per tile, 256 each, tile (kt, nt) order
  auto tile_states = [&](int64_t kt, int64_t nt) { return states.data() + (kt * tiles_n + nt) * kTileSize; };
  ThreadPool& pool = default_pool();
  if (!fb.active() && batch != nullptr) {
    search_batched(
        batch, bits, codes, cols, tiles_k * tiles_n,
        [&](int64_t i) { return std::pair<int64_t, int64_t>{i / tiles_n, i % tiles_n}; }, tile_states,
        rotated.data(), factor.data(), fb);
  } else if (!fb.active()) {
    pool.run(static_cast<size_t>(tiles_k * tiles_n), [&](size_t i) {
      const int64_t kt = static_cast<int64_t>(i) / tiles_n, nt = static_cast<int64_t>(i) % tiles_n;
      search_tile(bits, codes, cols, kt, nt, rotated.data(), factor.data(), fb, tile_states(kt, nt));
    });
  } else {
    // Column tiles left to right within each Hadamard block; each target gets
    // the feedback of the errors already made in its block (see importance.h).
    // Blocks do not feed each other, so round j takes tile column j of every
    // block at once: block / 16 rounds of (cols / block) x tiles_n tiles, not
    // one round per tile column (a batch, the GPU, gets 16x the tiles per call
    // of a 2048-column matrix). Every tile sees the same target as in column
    // order, so the result is the same.
    std::vector<float> target(rotated);
    std::vector<float> error(static_cast<size_t>(rows * cols), 0.0f);  // W' - W'^
    const int64_t block = fb.block(), block_tiles = block / kTileDim, blocks = cols / block;
    const int64_t round_tiles = blocks * tiles_n;
    for (int64_t j = 0; j < block_tiles; ++j) {
      // Tile i of round j: tile column j of block i / tiles_n, tile row i % tiles_n.
      auto tile = [&](int64_t i) { return std::pair<int64_t, int64_t>{(i / tiles_n) * block_tiles + j, i % tiles_n}; };
      // Its targets: the rotated weights plus the feedback of the errors
      // already made to their left in the Hadamard block.
      auto feedback_targets = [&](int64_t kt, int64_t nt) {
        const int64_t c0 = kt * kTileDim, hb = c0 / block, b0 = hb * block;
        const float* m = fb.feedback_block(hb);
        for (int64_t n = nt * kTileDim; n < (nt + 1) * kTileDim; ++n)
          for (int64_t c = c0; c < c0 + kTileDim; ++c) {
            double acc = rotated[n * cols + c];
            for (int64_t a = b0; a < c0; ++a) acc += static_cast<double>(error[n * cols + a]) * m[(a - b0) * block + (c - b0)];
            target[n * cols + c] = static_cast<float>(acc);
          }
      };
      auto record_errors = [&](int64_t kt, int64_t nt) {
        const int64_t c0 = kt * kTileDim;
        const uint16_t* st = tile_states(kt, nt);
        for (int r = 0; r < kTileDim; ++r)
          for (int c = 0; c < kTileDim; ++c) {
            const int64_t n = nt * kTileDim + r, k = c0 + c;
            error[n * cols + k] = rotated[n * cols + k] - codes[st[r * kTileDim + c]] * factor[n];
          }
      };
      if (batch != nullptr) {
        pool.run(static_cast<size_t>(round_tiles), [&](size_t i) {
          const auto [kt, nt] = tile(static_cast<int64_t>(i));
          feedback_targets(kt, nt);
        });
        search_batched(batch, bits, codes, cols, round_tiles, tile, tile_states, target.data(), factor.data(), fb);
        pool.run(static_cast<size_t>(round_tiles), [&](size_t i) {
          const auto [kt, nt] = tile(static_cast<int64_t>(i));
          record_errors(kt, nt);
        });
        continue;
      }
      pool.run(static_cast<size_t>(round_tiles), [&](size_t i) {
        const auto [kt, nt] = tile(static_cast<int64_t>(i));
        feedback_targets(kt, nt);
        search_tile(bits, codes, cols, kt, nt, target.data(), factor.data(), fb, tile_states(kt, nt));
        record_errors(kt, nt);
      });
    }
  }

  // Least-squares refit of each row's factor for the chosen codes, under the
  // true (importance) metric: f = <w', G y> / <y, G y>.
  pool.run(static_cast<size_t>(tiles_n), [&](size_t nt_index) {
    const int64_t nt = static_cast<int64_t>(nt_index);
    std::vector<float> y(cols);
    std::vector<double> gy(cols);
    for (int64_t r = 0; r < kTileDim; ++r) {
      const int64_t n = nt * kTileDim + r;
      for (int64_t kt = 0; kt < tiles_k; ++kt)
        for (int c = 0; c < kTileDim; ++c) y[kt * kTileDim + c] = codes[tile_states(kt, nt)[r * kTileDim + c]];
      fb.apply_g(y.data(), gy.data());
      double num = 0, den = 0;
      for (int64_t k = 0; k < cols; ++k) {
        num += static_cast<double>(rotated[n * cols + k]) * gy[k];
        den += static_cast<double>(y[k]) * gy[k];
      }
      if (factor[n] > 0 && den > 0 && num > 0) factor[n] = static_cast<float>(num / den);
    }
  });

  QuantizedMatrix q;
  q.format = &trellis_format(bits, code);
  q.rows = rows;
  q.cols = cols;
  const int tb = tile_bytes(bits);
  q.parts.push_back({"trellis", DType::kU8, {tiles_k, tiles_n, tb}, std::vector<uint8_t>(static_cast<size_t>(tiles_k * tiles_n * tb))});
  for (int64_t i = 0; i < tiles_k * tiles_n; ++i) pack_tile(states.data() + i * kTileSize, bits, q.parts[0].bytes.data() + i * tb);
  q.parts.push_back({"su", DType::kI8, {cols}, std::vector<uint8_t>(su.begin(), su.end())});
  q.parts.push_back({"sv", DType::kI8, {rows}, std::vector<uint8_t>(sv.begin(), sv.end())});
  std::vector<uint8_t> scale_bytes(static_cast<size_t>(rows) * 4);
  std::memcpy(scale_bytes.data(), factor.data(), scale_bytes.size());
  q.parts.push_back({"scales", DType::kF32, {rows}, std::move(scale_bytes)});
  return q;
}

}  // namespace eq::quant::trellis
