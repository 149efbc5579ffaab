// One Viterbi step of the trellis search (2^16 states, the 1MAD code) per
// kernel table: each ISA's single step, and two steps at once
// (Kernels::viterbi_two_steps; fused in blocks on AVX-512), for K = 2, 3, 4.
//   build/bench/viterbi_step [REPS=15]
// prints microseconds per step, best of REPS runs of 128 pairs of steps.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/cpu_features.h"
#include "quant/trellis/codebook.h"
#include "quant/trellis/kernels.h"

using namespace eq;
using namespace eq::quant::trellis;

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 15;
  constexpr int L = 16, kPairs = 128;
  std::vector<float> a(size_t{1} << L), b(a.size());
  std::vector<uint8_t> planes(2 * (size_t{1} << L) / 8 * 4);
  std::mt19937 rng(1);
  const float* codes = code_table_1mad();
  std::printf("isa       K  single us/step  two-step us/step\n");
  for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512}) {
    if (isa > detected_isa()) continue;
    const Kernels& k = isa == Isa::kAvx512 ? avx512_kernels() : isa == Isa::kAvx2 ? avx2_kernels() : generic_kernels();
    for (int K : {2, 3, 4}) {
      const size_t plane_bytes = (size_t{1} << (L - K)) / 8 * size_t(K);
      double best[2] = {1e30, 1e30};
      for (int mode = 0; mode < 2; ++mode)
        for (int rep = 0; rep < reps; ++rep) {
          for (float& x : a) x = float(rng() % 1000);
          const auto t0 = std::chrono::steady_clock::now();
          for (int s = 0; s < kPairs; ++s) {
            if (mode == 0) {
              k.viterbi_step(a.data(), b.data(), planes.data(), codes, L, K, 1.0f, 0.5f);
              k.viterbi_step(b.data(), a.data(), planes.data() + plane_bytes, codes, L, K, -1.0f, 0.5f);
            } else {
              k.viterbi_two_steps(a.data(), b.data(), planes.data(), planes.data() + plane_bytes, codes, L, K, 1.0f,
                                  0.5f, -1.0f, 0.5f);
              std::swap(a, b);
            }
          }
          const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
          best[mode] = std::min(best[mode], us / (2 * kPairs));
        }
      std::printf("%-8s  %d  %14.2f  %16.2f\n", std::string(isa_name(isa)).c_str(), K, best[0], best[1]);
    }
  }
  return 0;
}
