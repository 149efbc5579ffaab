// The trellis decode kernel (kTrellisGemv) alone, one thread, on copies of one
// random [ROWS, COLS] matrix (any bytes are valid tile streams):
//   build/bench/trellis_gemv BITS ROWS COLS [COPIES=96] [ROWS_PER_CALL=256] [INPUTS=1]
// BITS 2, 3, 4 (trellisK, 1MAD code) or 2lut, 3lut, 4lut (trellisK_lut).
// COPIES = 96 keeps the weights out of cache (96 x 0.4-0.8 MB at 768 x 2048),
// COPIES = 1 runs from L2. Prints thread CPU time per matrix (best of 5 passes
// over all copies), weights/s and packed GB/s, and the prepare step's time.
// INPUTS > 1 runs GemvKernel::run_rows (the small-batch path): time per
// matrix for all inputs together, weights/s counted once per input.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "quant/gemv.h"
#include "quant/hadamard.h"
#include "quant/trellis/codebook.h"
#include "quant/trellis/format.h"

namespace {
double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}
}  // namespace

int main(int argc, char** argv) {
  using namespace eq::quant;
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s BITS ROWS COLS [COPIES] [ROWS_PER_CALL]\n", argv[0]);
    return 2;
  }
  const int bits = std::atoi(argv[1]);
  const trellis::Code code = std::string(argv[1]).ends_with("lut") ? trellis::Code::kLut : trellis::Code::k1mad;
  const int64_t N = std::atoll(argv[2]), K = std::atoll(argv[3]);
  const int copies = argc > 4 ? std::atoi(argv[4]) : 96;
  const int64_t per_call = argc > 5 ? std::atoll(argv[5]) : 256;
  const int inputs = argc > 6 ? std::atoi(argv[6]) : 1;
  if (inputs < 1 || inputs > kMaxGemvRows) {
    std::fprintf(stderr, "INPUTS must be 1..%d\n", kMaxGemvRows);
    return 2;
  }
  std::mt19937_64 rng(42);
  const size_t tile_part = static_cast<size_t>(N / 16 * (K / 16) * trellis::tile_bytes(bits));
  std::vector<std::vector<uint8_t>> tiles(static_cast<size_t>(copies), std::vector<uint8_t>(tile_part));
  for (auto& t : tiles)
    for (auto& b : t) b = static_cast<uint8_t>(rng());
  const std::vector<int8_t> su = random_signs(42, 1, K), sv = random_signs(42, 2, N);
  const std::vector<float> scales(static_cast<size_t>(N), 0.01f);
  std::vector<PackedMatrix> ms(static_cast<size_t>(copies));
  for (int i = 0; i < copies; ++i) {
    ms[i].format = &trellis_format(bits, code);
    ms[i].rows = N;
    ms[i].cols = K;
    ms[i].parts = {{tiles[i].data(), eq::DType::kU8, {K / 16, N / 16, trellis::tile_bytes(bits)}, tile_part},
                   {su.data(), eq::DType::kI8, {K}, su.size()},
                   {sv.data(), eq::DType::kI8, {N}, sv.size()},
                   {scales.data(), eq::DType::kF32, {N}, scales.size() * 4}};
  }
  std::vector<std::vector<float>> x(static_cast<size_t>(inputs), std::vector<float>(static_cast<size_t>(K)));
  std::vector<std::vector<float>> y(static_cast<size_t>(inputs), std::vector<float>(static_cast<size_t>(N)));
  std::normal_distribution<float> normal;
  for (auto& xi : x)
    for (float& v : xi) v = normal(rng);
  const GemvKernel& kernel = *ms[0].format->gemv;
  std::vector<GemvActivation> act(static_cast<size_t>(inputs));
  std::vector<const GemvInput*> ins;
  for (auto& a : act) ins.push_back(&a.input());
  double best = 1e30, best_prepare = 1e30;
  for (int pass = 0; pass < 5; ++pass) {
    const double t0 = thread_seconds();
    for (int i = 0; i < copies; ++i) kernel.prepare(ms[i], x[0].data(), act[0]);
    for (int j = 1; j < inputs; ++j) kernel.prepare(ms[0], x[j].data(), act[j]);  // same su for every copy
    const double t1 = thread_seconds();
    for (int i = 0; i < copies; ++i)
      for (int64_t r = 0; r < N; r += per_call) {
        float* ys[kMaxGemvRows];
        for (int j = 0; j < inputs; ++j) ys[j] = y[j].data() + r;
        if (inputs == 1) kernel.run(ms[i], *ins[0], r, std::min(N, r + per_call), ys[0]);
        else kernel.run_rows(ms[i], ins.data(), inputs, r, std::min(N, r + per_call), ys);
      }
    const double t2 = thread_seconds();
    best_prepare = std::min(best_prepare, (t1 - t0) / copies);
    best = std::min(best, (t2 - t1) / copies);
  }
  std::printf("%s [%lld, %lld] %s, %d copies, %lld rows per call, %d inputs: %.1f us per matrix, %.2f G weights/s, "
              "%.2f GB/s; prepare %.1f us\n",
              std::string(ms[0].format->name).c_str(), static_cast<long long>(N), static_cast<long long>(K),
              std::string(eq::isa_name(eq::active_isa())).c_str(), copies,
              static_cast<long long>(per_call), inputs, best * 1e6, static_cast<double>(N * K) * inputs / best * 1e-9,
              static_cast<double>(tile_part) / best * 1e-9, best_prepare * 1e6);
  return 0;
}
