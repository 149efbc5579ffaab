// Forward-pass throughput of the float32 reference model: prefill tokens/s
// (one sequence of --prefill tokens) and decode tokens/s (--decode steps of one
// token from the KV cache after a 16-token prompt). One warm-up run (weight
// conversion) is excluded; the median of --runs runs is reported.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "core/cpu_features.h"
#include "core/memory.h"
#include "core/thread_pool.h"
#include "model/forward.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

double seconds(const std::chrono::steady_clock::time_point& t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench/forward: reference forward prefill and decode throughput"};
  std::string model_path = "../shared/models/qwen3moe-small";
  int64_t prefill = 512, decode = 64;
  int runs = 5, threads = 0;
  app.add_option("--model", model_path, "Checkpoint folder");
  app.add_option("--prefill", prefill, "Prefill length (tokens)");
  app.add_option("--decode", decode, "Decode steps");
  app.add_option("--runs", runs, "Timed runs (median reported)");
  app.add_option("--threads", threads, "Worker threads (default: all cores)");
  CLI11_PARSE(app, argc, argv);
  if (threads > 0) eq::set_num_threads(threads);

  try {
    auto model = eq::model::Model::open(model_path);
    const int64_t vocab = model->config().vocab_size;
    std::vector<int32_t> tokens(prefill + decode);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 7919 + 13) % vocab);

    std::vector<double> prefill_tps, decode_tps;
    for (int r = 0; r <= runs; ++r) {
      auto cache = model->new_cache(1, prefill);
      auto t = std::chrono::steady_clock::now();
      model->forward(std::span(tokens).first(prefill), 1, prefill, cache);
      const double p = seconds(t);

      const int64_t prompt = 16;
      auto dcache = model->new_cache(1, prompt + decode);
      model->forward(std::span(tokens).first(prompt), 1, prompt, dcache);
      t = std::chrono::steady_clock::now();
      for (int64_t i = 0; i < decode; ++i) model->forward(std::span(tokens).subspan(prompt + i, 1), 1, 1, dcache);
      const double d = seconds(t);
      if (r == 0) continue;  // warm-up: converts the weights
      prefill_tps.push_back(static_cast<double>(prefill) / p);
      decode_tps.push_back(static_cast<double>(decode) / d);
    }
    std::printf("model %s, %d threads, isa %s, cpu %s\n", model_path.c_str(), eq::default_pool().size(),
                std::string(eq::isa_name(eq::active_isa())).c_str(), std::string(eq::cpu_model_name()).c_str());
    std::printf("prefill %lld tokens: median %.0f tokens/s (min %.0f, max %.0f, %d runs)\n",
                static_cast<long long>(prefill), median(prefill_tps),
                *std::min_element(prefill_tps.begin(), prefill_tps.end()),
                *std::max_element(prefill_tps.begin(), prefill_tps.end()), runs);
    std::printf("decode %lld steps after 16: median %.1f tokens/s (min %.1f, max %.1f)\n",
                static_cast<long long>(decode), median(decode_tps),
                *std::min_element(decode_tps.begin(), decode_tps.end()),
                *std::max_element(decode_tps.begin(), decode_tps.end()));
    std::printf("peak RSS %.1f MiB\n", static_cast<double>(eq::peak_rss_bytes()) / (1 << 20));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench/forward: %s\n", e.what());
    return 1;
  }
  return 0;
}
