#include "profile/row_sampled_error.h"

#include "model/kernels/float_kernels.h"
#include "quant/format.h"

namespace eq::profile {
namespace {

using ConstMap = Eigen::Map<const RowMatrix>;

// The rows `rows` of a row-major matrix with `cols` columns, stacked.
std::vector<float> gather_rows(const float* m, int64_t cols, const std::vector<int64_t>& rows) {
  std::vector<float> out(rows.size() * size_t(cols));
  for (size_t i = 0; i < rows.size(); ++i)
    std::copy(m + rows[i] * cols, m + (rows[i] + 1) * cols, out.begin() + int64_t(i) * cols);
  return out;
}

std::vector<float> gather(const model::Tensor32Ptr& v, const std::vector<int64_t>& at) {
  if (!v) return {};
  std::vector<float> out;
  out.reserve(at.size());
  for (int64_t i : at) out.push_back(v->data[size_t(i)]);
  return out;
}

// Σ_r g_r² ‖m[r, :]‖².
double weighted_energy(const RowMatrix& m, const std::vector<double>& g2) {
  double total = 0;
  for (int64_t r = 0; r < m.rows(); ++r) {
    double s = 0;
    for (int64_t c = 0; c < m.cols(); ++c) s += double(m(r, c)) * double(m(r, c));
    total += g2[size_t(r)] * s;
  }
  return total;
}

}  // namespace

std::vector<float> quantized_round_trip(const std::string& format, const float* w, int64_t rows, int64_t cols,
                                        const std::vector<float>& importance, const std::string& tensor_name,
                                        quant::Device device) {
  const quant::FormatTraits& f = quant::format_by_name(format);
  quant::QuantizeOptions o;
  o.importance = importance.empty() ? nullptr : importance.data();
  o.tensor_name = tensor_name;
  o.device = device;
  const quant::QuantizedMatrix q = f.quantize(w, rows, cols, o);
  std::vector<float> out(size_t(rows * cols));
  f.dequantize(q.view(), out.data());
  return out;
}

std::vector<int64_t> sampled_rows(int64_t rows, int64_t wanted) {
  const int64_t n = rows / kSampledRowBlock;
  const int64_t k = (wanted + kSampledRowBlock - 1) / kSampledRowBlock;
  std::vector<int64_t> out;
  if (wanted <= 0 || wanted >= rows || k + 2 > n) {
    for (int64_t r = 0; r < rows; ++r) out.push_back(r);
    return out;
  }
  for (int64_t i = 0; i < k; ++i) {
    const int64_t start = (2 * i + 1) * n / (2 * k) * kSampledRowBlock;
    for (int64_t r = start; r < start + kSampledRowBlock; ++r) out.push_back(r);
  }
  return out;
}

RowSampledExpert::RowSampledExpert(const model::MlpWeights& w, int64_t hidden, const float* x, const float* gates,
                                   int64_t rows, int64_t sample_rows)
    : w_(w), hidden_(hidden), rows_(rows), x_(x) {
  const int64_t H = hidden, I = w.intermediate;
  g2_.resize(size_t(rows));
  for (int64_t r = 0; r < rows; ++r) g2_[size_t(r)] = double(gates[r]) * double(gates[r]);
  gate_up_rows_ = sampled_rows(I, sample_rows);
  down_rows_ = sampled_rows(H, sample_rows);
  gate_s_ = gather_rows(w.gate->data.data(), H, gate_up_rows_);
  up_s_ = gather_rows(w.up->data.data(), H, gate_up_rows_);
  down_t_ = gather_rows(w.down->data.data(), I, down_rows_);
  gate_bias_s_ = gather(w.gate_bias, gate_up_rows_);
  up_bias_s_ = gather(w.up_bias, gate_up_rows_);
  const int64_t S = int64_t(gate_up_rows_.size());
  const ConstMap down(w.down->data.data(), H, I);
  down_s_.resize(H, S);
  mid_s_.resize(rows, S);
  ExpertOutput o = expert_output(w, x, rows, H);
  for (int64_t j = 0; j < S; ++j) {
    down_s_.col(j) = down.col(gate_up_rows_[size_t(j)]);
    mid_s_.col(j) = o.mid.col(gate_up_rows_[size_t(j)]);
  }
  output_energy_ = weighted_energy(o.y, g2_);
  mid_ = std::move(o.mid);
}

double RowSampledExpert::rel_mse(const std::string& format, const std::vector<float>& importance_in,
                                 const std::vector<float>& importance_mid, const std::string& prefix,
                                 quant::Device device) const {
  if (!(output_energy_ > 0)) return 0.0;
  const int64_t H = hidden_, I = w_.intermediate, S = int64_t(gate_up_rows_.size()),
                T = int64_t(down_rows_.size());
  const ConstMap x(x_, rows_, H);
  // Gate and up: the sampled channels of mid, through the exact down.
  const auto qg = quantized_round_trip(format, gate_s_.data(), S, H, importance_in, prefix + "gate_proj", device);
  const auto qu = quantized_round_trip(format, up_s_.data(), S, H, importance_in, prefix + "up_proj", device);
  RowMatrix mid_q = x * ConstMap(qg.data(), S, H).transpose();
  const RowMatrix u = x * ConstMap(qu.data(), S, H).transpose();
  model::kernels::glu_rows(w_.act, mid_q.data(), u.data(), rows_, S, S,
                           gate_bias_s_.empty() ? nullptr : gate_bias_s_.data(),
                           up_bias_s_.empty() ? nullptr : up_bias_s_.data(), mid_q.data());
  mid_q -= mid_s_;
  const RowMatrix e_gate_up = mid_q * down_s_.transpose();
  // Down: the sampled output rows, from the exact mid.
  std::vector<float> qd = quantized_round_trip(format, down_t_.data(), T, I, importance_mid, prefix + "down_proj",
                                               device);
  for (size_t i = 0; i < qd.size(); ++i) qd[i] -= down_t_[i];
  const RowMatrix e_down = mid_ * ConstMap(qd.data(), T, I).transpose();
  const double err = weighted_energy(e_gate_up, g2_) * double(I) / double(S) +
                     weighted_energy(e_down, g2_) * double(H) / double(T);
  return err / output_energy_;
}

}  // namespace eq::profile
