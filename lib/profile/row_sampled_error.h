// The sensitivity measurement's fast estimate: an expert's rel_mse in a
// format from a few of each matrix's rows quantized, not all of them.
//
// The quantizers of every registry format work row by row (groups along a
// row, a scale per row, 16-row trellis tiles), so quantizing a subset of rows
// gives those rows the error a whole-matrix quantization would. With the
// expert's unquantized forward on its sample computed once (mid = act(gate x,
// up x), y = down mid), the output error splits into what the quantized
// gate/up rows do through the exact down and what the quantized down rows do
// to the exact mid:
//   ŷ − y ≈ down[:, S]·(mid'[S] − mid[S]) · |I|/|S|   (S: sampled rows of gate and up)
//         + (down'[T] − down[T])·mid      · |H|/|T|   (T: sampled rows of down)
// in squared norm, each term scaled by the share of rows it saw. The terms
// neglected (the product of both errors, and the cross terms between
// independent rows' errors) have zero mean or are of second order, so the
// estimate tracks the exact measurement (profile/sensitivity.h,
// expert_rel_mse) at a cost set by the sampled rows alone: a 30B expert
// (768 × 2048 gate and up, 2048 × 768 down) quantizes 1/15 of its weights
// with 64 rows sampled. tests/profile/row_sampled_error_test.cpp checks the
// agreement.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/weights.h"
#include "profile/expert_output.h"
#include "quant/device.h"

namespace eq::profile {

// A matrix [rows, cols] quantized to `format` and dequantized back, as pack
// would store it (importance as quant::QuantizeOptions; empty = unweighted).
std::vector<float> quantized_round_trip(const std::string& format, const float* w, int64_t rows, int64_t cols,
                                        const std::vector<float>& importance, const std::string& tensor_name,
                                        quant::Device device);

// Rows are sampled in blocks of this many (the trellis tile height; a
// multiple of every registry format's row_multiple).
inline constexpr int64_t kSampledRowBlock = 16;

// The rows of a `rows`-row matrix a measurement of `wanted` rows quantizes:
// ⌈wanted / 16⌉ blocks of 16 rows spread evenly over the matrix's full
// blocks (block i starts at 16·⌊(2i+1)·n / 2k⌋ of n blocks), ascending; every
// row when that would be most of them (wanted ≥ rows, or fewer than two
// blocks left out) or wanted ≤ 0.
std::vector<int64_t> sampled_rows(int64_t rows, int64_t wanted);

class RowSampledExpert {
 public:
  // x [rows, hidden] with gate weights (the expert's sample); sample_rows as
  // for sampled_rows, for each matrix. `w` and x must outlive the object.
  RowSampledExpert(const model::MlpWeights& w, int64_t hidden, const float* x, const float* gates, int64_t rows,
                   int64_t sample_rows);
  // The estimated Σ g²‖ŷ − y‖² / Σ g²‖y‖² with the sampled rows quantized
  // to `format` (importance vectors as quant::QuantizeOptions; empty =
  // unweighted). Thread-safe.
  double rel_mse(const std::string& format, const std::vector<float>& importance_in,
                 const std::vector<float>& importance_mid, const std::string& tensor_prefix,
                 quant::Device device) const;
  const std::vector<int64_t>& gate_up_rows() const { return gate_up_rows_; }
  const std::vector<int64_t>& down_rows() const { return down_rows_; }

 private:
  const model::MlpWeights& w_;
  int64_t hidden_, rows_;
  const float* x_;
  std::vector<double> g2_;                            // [rows] squared gate weights
  std::vector<int64_t> gate_up_rows_, down_rows_;     // S, T
  std::vector<float> gate_s_, up_s_, down_t_;         // the sampled rows: [|S|, H], [|S|, H], [|T|, I]
  std::vector<float> gate_bias_s_, up_bias_s_;        // [|S|], empty without biases
  RowMatrix down_s_;                                  // down[:, S]: [H, |S|]
  RowMatrix mid_, mid_s_;                             // [rows, I], [rows, |S|]
  double output_energy_ = 0;                          // Σ g²‖y‖²
};

}  // namespace eq::profile
