// bench/quant_error: for every registry format, the reconstruction error on
// i.i.d. N(0,1) weights and on real expert weights, bits per weight, and
// single-core quantize / dequantize / M=1 matmul throughput (weights per
// second of thread CPU time). Results are
// recorded in docs/benchmarks.md ("## quant_error").
//
//   build/bench/quant_error [--json] [--formats fp4_g16,mxfp4] [--model DIR]
//                           [--experts 4] [--normal-count 1048576]
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <ctime>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "quant/format.h"
#include "quant/fp4.h"

namespace {


// Throughput is per core: CPU time of this thread, so other load on a shared
// machine does not count against us.
double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
using eq::quant::FormatTraits;
using eq::quant::QuantizedMatrix;
using eq::quant::QuantizeOptions;


struct Matrix {
  std::string name;
  int64_t rows = 0, cols = 0;
  std::vector<float> w;
};

struct Result {
  std::string format;
  double bits_per_weight = 0.0;
  double normal_mse = 0.0;
  double real_rel_frobenius = NAN;
  int64_t real_tensors = 0, real_skipped = 0;
  double quantize_wps = 0.0, dequantize_wps = 0.0, matmul_m1_wps = 0.0;
};

// Runs fn repeatedly for at least min_seconds; returns calls per second.
template <typename Fn>
double rate(Fn&& fn, double min_seconds) {
  int calls = 0;
  const double t0 = thread_seconds();
  do {
    fn();
    ++calls;
  } while (thread_seconds() - t0 < min_seconds);
  return calls / (thread_seconds() - t0);
}

std::vector<Matrix> load_experts(const std::string& model_dir, int experts_per_layer) {
  std::vector<Matrix> out;
  const auto ckpt = eq::io::Checkpoint::open(model_dir);
  const std::regex expert(R"(.*\.experts\.(\d+)\.(gate_proj|up_proj|down_proj|w1|w2|w3)\.weight$)");
  for (const std::string& name : ckpt->tensor_names()) {
    std::smatch m;
    if (!std::regex_match(name, m, expert) || std::stoi(m[1].str()) >= experts_per_layer) continue;
    const auto& info = ckpt->info(name);
    if (info.shape.size() != 2) continue;
    out.push_back({name, info.shape[0], info.shape[1], ckpt->load_f32(name)});
  }
  return out;
}

using QuantizeFn = std::function<QuantizedMatrix(const float*, int64_t, int64_t, const QuantizeOptions&)>;

Result measure(const FormatTraits& f, const std::string& label, const QuantizeFn& quantize,
               const std::vector<float>& normal, int64_t normal_rows, int64_t normal_cols,
               const std::vector<Matrix>& experts, double min_seconds) {
  Result r;
  r.format = label;
  r.bits_per_weight = f.bits_per_weight;
  QuantizeOptions options;
  options.tensor_name = "bench.normal";
  // Quantize once for the error (timed: quantization throughput).
  const double t0 = thread_seconds();
  const QuantizedMatrix q = quantize(normal.data(), normal_rows, normal_cols, options);
  r.quantize_wps = static_cast<double>(normal.size()) / (thread_seconds() - t0);
  std::vector<float> d(normal.size());
  f.dequantize(q.view(), d.data());
  double se = 0.0;
  for (size_t i = 0; i < normal.size(); ++i) se += std::pow(static_cast<double>(normal[i]) - d[i], 2.0);
  r.normal_mse = se / static_cast<double>(normal.size());
  r.dequantize_wps = static_cast<double>(normal.size()) * rate([&] { f.dequantize(q.view(), d.data()); }, min_seconds);
  std::vector<float> x(static_cast<size_t>(normal_cols), 0.5f), y(static_cast<size_t>(normal_rows));
  r.matmul_m1_wps =
      static_cast<double>(normal.size()) * rate([&] { f.matmul(q.view(), x.data(), 1, y.data(), false); }, min_seconds);

  double err = 0.0, norm = 0.0;
  for (const Matrix& m : experts) {
    if (m.rows % f.row_multiple != 0 || m.cols % f.col_multiple != 0) {
      ++r.real_skipped;
      continue;
    }
    options.tensor_name = m.name;
    const QuantizedMatrix qm = quantize(m.w.data(), m.rows, m.cols, options);
    std::vector<float> dm(m.w.size());
    f.dequantize(qm.view(), dm.data());
    for (size_t i = 0; i < m.w.size(); ++i) {
      err += std::pow(static_cast<double>(m.w[i]) - dm[i], 2.0);
      norm += static_cast<double>(m.w[i]) * m.w[i];
    }
    ++r.real_tensors;
  }
  if (r.real_tensors > 0) r.real_rel_frobenius = std::sqrt(err / norm);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Reconstruction error and throughput of every quantization format"};
  bool json_output = false;
  std::string formats_csv, model_dir = "../shared/models/qwen3moe-small";
  int experts_per_layer = 4;
  int64_t normal_count = 1 << 20;
  double min_seconds = 0.3;
  app.add_flag("--json", json_output, "Print JSON instead of a table");
  app.add_option("--formats", formats_csv, "Comma-separated format names (default: all registered)");
  app.add_option("--model", model_dir, "Checkpoint folder for real expert weights (skipped when absent)");
  app.add_option("--experts", experts_per_layer, "Experts per layer taken from the checkpoint")->check(CLI::PositiveNumber);
  app.add_option("--normal-count", normal_count, "Number of N(0,1) weights (rounded to 2048-wide rows)")
      ->check(CLI::PositiveNumber);
  app.add_option("--min-seconds", min_seconds, "Minimum timing window per throughput figure");
  CLI11_PARSE(app, argc, argv);

  try {
    std::vector<const FormatTraits*> formats;
    if (formats_csv.empty()) {
      for (const FormatTraits& f : eq::quant::all_formats()) formats.push_back(&f);
    } else {
      std::stringstream ss(formats_csv);
      for (std::string name; std::getline(ss, name, ',');)
        if (!name.empty()) formats.push_back(&eq::quant::format_by_name(name));
    }
    const int64_t cols = 2048, rows = std::max<int64_t>(1, normal_count / cols);
    std::vector<float> normal(static_cast<size_t>(rows * cols));
    std::mt19937_64 rng(42);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (float& v : normal) v = dist(rng);

    std::vector<Matrix> experts;
    bool have_model = false;
    try {
      experts = load_experts(model_dir, experts_per_layer);
      have_model = !experts.empty();
    } catch (const eq::Error& e) {
      std::cerr << "quant_error: real weights skipped: " << e.what() << "\n";
    }
    int64_t expert_weights = 0;
    for (const Matrix& m : experts) expert_weights += m.rows * m.cols;

    std::vector<Result> results;
    for (const FormatTraits* f : formats) {
      std::cerr << "quant_error: " << f->name << "...\n";
      results.push_back(measure(*f, std::string(f->name),
                                [f](const float* w, int64_t r, int64_t c, const QuantizeOptions& o) { return f->quantize(w, r, c, o); }, normal, rows, cols, experts, min_seconds));
      if (f->name == "mxfp4")  // the OCP floor rule alone, to show what the neighbour search buys
        results.push_back(measure(*f, "mxfp4_floor_rule", eq::quant::quantize_mxfp4_floor_rule, normal, rows, cols,
                                  experts, min_seconds));
    }

    if (json_output) {
      nlohmann::json j;
      j["machine"] = {{"cpu", std::string(eq::cpu_model_name())}, {"isa", std::string(eq::isa_name(eq::active_isa()))}};
      j["normal_weights"] = rows * cols;
      j["model"] = have_model ? model_dir : "";
      j["expert_tensors"] = experts.size();
      j["expert_weights"] = expert_weights;
      for (const Result& r : results)
        j["formats"].push_back({{"format", r.format},
                                {"bits_per_weight", r.bits_per_weight},
                                {"normal_mse", r.normal_mse},
                                {"real_rel_frobenius", std::isnan(r.real_rel_frobenius) ? nlohmann::json() : nlohmann::json(r.real_rel_frobenius)},
                                {"real_tensors", r.real_tensors},
                                {"real_skipped", r.real_skipped},
                                {"quantize_weights_per_s", r.quantize_wps},
                                {"dequantize_weights_per_s", r.dequantize_wps},
                                {"matmul_m1_weights_per_s", r.matmul_m1_wps}});
      std::cout << j.dump(2) << "\n";
    } else {
      std::printf("cpu: %s, isa: %s, 1 thread\n", std::string(eq::cpu_model_name()).c_str(),
                  std::string(eq::isa_name(eq::active_isa())).c_str());
      std::printf("N(0,1): %lld weights; real: %s (%zu expert tensors, %lld weights)\n",
                  static_cast<long long>(rows * cols), have_model ? model_dir.c_str() : "(none)", experts.size(),
                  static_cast<long long>(expert_weights));
      std::printf("%-18s %6s %10s %12s %8s %12s %12s %12s\n", "format", "bits", "mse N(0,1)", "rel.frob", "tensors",
                  "quant w/s", "dequant w/s", "gemv w/s");
      for (const Result& r : results)
        std::printf("%-18s %6.3f %10.6f %12.6f %8lld %12.3g %12.3g %12.3g\n", r.format.c_str(), r.bits_per_weight,
                    r.normal_mse, r.real_rel_frobenius, static_cast<long long>(r.real_tensors), r.quantize_wps,
                    r.dequantize_wps, r.matmul_m1_wps);
    }
  } catch (const eq::Error& e) {
    std::cerr << "quant_error: " << e.what() << "\n";
    return e.exit_code();
  }
  return 0;
}
