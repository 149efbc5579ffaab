// Quality of pruned exports as a user sees it: bits per byte of the source
// and of each export, and per scored byte the KL divergence KL(source ||
// export) in nats and whether both predict the same next byte. Texts are cut
// into non-overlapping windows of --ctx bytes whose first byte is not scored,
// as `expertquant perplexity` cuts them (its bits per byte is this tool's for
// the source). Byte-level models only (vocabulary 256: token id = byte), as
// the reference models are. One JSON line per model on stdout.
//
//   bench/export_quality --source M --export OUT1 --export OUT2 --text eval_prose.txt --ctx 512
// (bench/export_quality.sh runs it over the shared models; docs/benchmarks.md, "Export").
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "model/forward.h"

namespace {

constexpr int64_t kVocab = 256;

// Windows of at most ctx bytes of each text's first max_bytes (0 = all); a
// window needs two bytes to score one.
std::vector<std::vector<int32_t>> byte_windows(const std::vector<std::string>& texts, int64_t ctx, int64_t max_bytes) {
  std::vector<std::vector<int32_t>> windows;
  for (const std::string& path : texts) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(path + ": cannot be read");
    std::string t((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (max_bytes > 0 && int64_t(t.size()) > max_bytes) t.resize(size_t(max_bytes));
    for (size_t i = 0; i < t.size(); i += size_t(ctx)) {
      std::vector<int32_t> w;
      for (size_t j = i; j < std::min(t.size(), i + size_t(ctx)); ++j) w.push_back(static_cast<unsigned char>(t[j]));
      if (w.size() >= 2) windows.push_back(std::move(w));
    }
  }
  return windows;
}

// Log-probabilities (float64 softmax) of every scored position: per window [T-1][256].
std::vector<std::vector<float>> log_probs(const std::string& path, const std::vector<std::vector<int32_t>>& windows) {
  auto model = eq::model::Model::open(path);
  if (model->config().vocab_size != kVocab)
    throw std::runtime_error(path + ": vocabulary " + std::to_string(model->config().vocab_size) +
                             "; this tool scores bytes (256)");
  std::vector<std::vector<float>> out;
  for (const auto& w : windows) {
    const int64_t T = int64_t(w.size());
    auto cache = model->new_cache(1, T);
    const auto logits = model->forward(w, 1, T, cache);
    std::vector<float> lp(size_t((T - 1) * kVocab));
    for (int64_t t = 0; t + 1 < T; ++t) {
      const float* l = logits.data() + t * kVocab;
      double mx = l[0];
      for (int64_t v = 1; v < kVocab; ++v) mx = std::max(mx, double(l[v]));
      double sum = 0;
      for (int64_t v = 0; v < kVocab; ++v) sum += std::exp(double(l[v]) - mx);
      for (int64_t v = 0; v < kVocab; ++v) lp[size_t(t * kVocab + v)] = float(double(l[v]) - mx - std::log(sum));
    }
    out.push_back(std::move(lp));
  }
  return out;
}

int64_t argmax(const float* p) { return std::max_element(p, p + kVocab) - p; }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench/export_quality: bits per byte, KL and top-1 agreement of exports against their source"};
  std::string source;
  std::vector<std::string> exports, texts;
  int64_t ctx = 512, max_bytes = 16384;
  app.add_option("--source", source, "The unpruned checkpoint")->required();
  app.add_option("--export", exports, "An export of it (repeatable)");
  app.add_option("--text", texts, "Plain text, bytes are the tokens (repeatable)")->required();
  app.add_option("--ctx", ctx, "Window length in bytes")->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  app.add_option("--max-bytes", max_bytes, "Bytes of each text scored (0 = all)")->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);
  try {
    const auto windows = byte_windows(texts, ctx, max_bytes);
    const auto reference = log_probs(source, windows);
    std::vector<std::string> models{source};
    models.insert(models.end(), exports.begin(), exports.end());
    for (size_t m = 0; m < models.size(); ++m) {
      const auto lp = m == 0 ? reference : log_probs(models[m], windows);
      double nats = 0, kl = 0;
      int64_t scored = 0, agree = 0;
      for (size_t w = 0; w < windows.size(); ++w)
        for (size_t t = 0; t + 1 < windows[w].size(); ++t) {
          const float* p = reference[w].data() + t * kVocab;
          const float* q = lp[w].data() + t * kVocab;
          nats -= q[windows[w][t + 1]];
          double d = 0;
          for (int64_t v = 0; v < kVocab; ++v) d += std::exp(double(p[v])) * (double(p[v]) - double(q[v]));
          kl += d;
          agree += argmax(p) == argmax(q);
          ++scored;
        }
      std::printf("{\"model\": \"%s\", \"bits_per_byte\": %.6f, \"kl_nats\": %.6f, \"top1_agree\": %.4f, \"scored\": %lld}\n",
                  models[m].c_str(), nats / double(scored) / std::log(2.0), kl / double(scored),
                  double(agree) / double(scored), static_cast<long long>(scored));
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "export_quality: %s\n", e.what());
    return 1;
  }
  return 0;
}
