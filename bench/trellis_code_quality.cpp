// Quantization error of candidate trellis codes on i.i.d. N(0,1), through the
// formats' own tail-biting Viterbi (L = 16) on 256-weight tiles:
//   build/bench/trellis_code_quality [TILES=64]
// Codes: 1MAD and LUT (the registered ones, quant/trellis/codebook.h), and
// the two LUT variants that were measured and not used (docs/formats.md,
// "trellis LUT code"): the same construction with 128-entry tables, and a
// plain sum of two lookups of bit fields. Per code and K: the best MSE over
// three initial scales, each followed by a least-squares refit of one global
// scale (the quantizer refits per row; on i.i.d. data the two agree).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "quant/trellis/codebook.h"
#include "quant/trellis/viterbi.h"

namespace {

using namespace eq::quant::trellis;

// n Gaussian quantiles Phi^-1((i + 0.5) / n) * sigma, rounded, in an order
// shuffled by `seed` (the LUT tables were made this way with n = 64).
std::vector<int> gaussian_table(int n, double sigma, uint64_t seed) {
  std::vector<int> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const double p = (i + 0.5) / n;
    double lo = -8, hi = 8;
    for (int it = 0; it < 60; ++it) {
      const double mid = (lo + hi) / 2;
      (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
    }
    t[static_cast<size_t>(i)] = static_cast<int>(std::lround(lo * sigma));
  }
  std::mt19937_64 rng(seed);
  std::shuffle(t.begin(), t.end(), rng);
  return t;
}

double best_mse(const std::vector<float>& codes, int K, const std::vector<float>& w) {
  double mean = 0, var = 0;
  for (float c : codes) mean += c;
  mean /= static_cast<double>(codes.size());
  for (float c : codes) var += (c - mean) * (c - mean);
  const double sd = std::sqrt(var / static_cast<double>(codes.size()));
  const int tiles = static_cast<int>(w.size() / kTileSize);
  double best = 1e30;
  Viterbi viterbi;
  std::vector<float> target(kTileSize), weight(kTileSize, 1.0f), y(w.size());
  std::vector<uint32_t> states(kTileSize);
  for (double alpha : {0.98, 1.04, 1.10}) {
    const double f = alpha / sd;
    for (int t = 0; t < tiles; ++t) {
      for (int i = 0; i < kTileSize; ++i) target[i] = static_cast<float>(w[t * kTileSize + i] / f);
      TrellisProblem p{kStateBits, K, codes.data(), kTileSize, target.data(), weight.data()};
      viterbi.run_tail_biting(p, states.data());
      for (int i = 0; i < kTileSize; ++i) y[t * kTileSize + i] = codes[states[i]];
    }
    double num = 0, den = 0;
    for (size_t i = 0; i < w.size(); ++i) num += w[i] * y[i], den += static_cast<double>(y[i]) * y[i];
    const double s = num / den;
    double err = 0;
    for (size_t i = 0; i < w.size(); ++i) err += (w[i] - s * y[i]) * (w[i] - s * y[i]);
    best = std::min(best, err / static_cast<double>(w.size()));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int tiles = argc > 1 ? std::atoi(argv[1]) : 64;
  std::mt19937_64 rng(2024);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(tiles) * kTileSize);
  for (float& v : w) v = normal(rng);
  const std::vector<int> a128 = gaussian_table(128, 22, 1), b128 = gaussian_table(128, 22, 101);
  const std::vector<std::pair<std::string, std::function<int(uint32_t)>>> codes = {
      {"1MAD (trellisK)", [](uint32_t s) { return code_1mad(s); }},
      {"LUT (trellisK_lut)", [](uint32_t s) { return code_lut(s); }},
      {"LUT, 128-entry tables", [&](uint32_t s) {
         const uint32_t a = (s ^ (s >> 9)) & 127;
         return a128[a] + b128[(static_cast<uint32_t>(static_cast<uint8_t>(a128[a])) ^ (s >> 7)) & 127];
       }},
      {"sum of two field lookups", [&](uint32_t s) { return a128[(s ^ (s >> 9)) & 127] + b128[(s >> 7) & 127]; }},
  };
  std::printf("MSE on %d i.i.d. N(0,1) weights (seed 2024), tail-biting Viterbi, L = 16\n", tiles * kTileSize);
  std::printf("%-28s %10s %10s %10s\n", "code", "K = 2", "K = 3", "K = 4");
  for (const auto& [name, code] : codes) {
    std::vector<float> table(size_t{1} << kStateBits);
    for (uint32_t s = 0; s < table.size(); ++s) table[s] = static_cast<float>(code(s));
    std::printf("%-28s", name.c_str());
    for (int K : {2, 3, 4}) {
      std::printf(" %10.5f", best_mse(table, K, w));
      std::fflush(stdout);
    }
    std::printf("\n");
  }
  return 0;
}
