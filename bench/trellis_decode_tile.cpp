// Trellis tile decoder throughput (quant/trellis/kernels.h): every decoder
// variant this machine runs, row-major (decode_tile) and panel layout
// (decode_tile_panel) and int8 codes (decode_tile_int8, the batch kernel's
// integer path).
//   build/bench/trellis_decode_tile [BITS=2,3,4] [TILES=512] [SECONDS=0.3]
// TILES random tiles (512 = 128 K weights: the tiles stay in L2) decoded
// over and over; G weights/s per core from thread CPU time, best of 5.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "quant/trellis/codebook.h"
#include "quant/trellis/format.h"
#include "quant/trellis/gemv.h"
#include "quant/trellis/kernels.h"

namespace {

using namespace eq::quant::trellis;

double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// G weights/s of `pass` (decoding `weights` weights), best of 5 runs of >= min_s.
template <class Pass>
double rate(Pass pass, double weights, double min_s) {
  double best = 0;
  for (int run = 0; run < 5; ++run) {
    int64_t n = 0;
    const double t0 = thread_seconds();
    double t = t0;
    while (t - t0 < min_s) {
      pass();
      ++n;
      t = thread_seconds();
    }
    best = std::max(best, weights * static_cast<double>(n) / (t - t0) / 1e9);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> bits_list = {2, 3, 4};
  if (argc > 1) {
    bits_list.clear();
    std::stringstream ss(argv[1]);
    for (std::string b; std::getline(ss, b, ',');) bits_list.push_back(std::atoi(b.c_str()));
  }
  const int64_t tiles = argc > 2 ? std::atoll(argv[2]) : 512;
  const double min_s = argc > 3 ? std::atof(argv[3]) : 0.3;
  using RowFn = void (*)(const uint8_t*, int, const float*, float*, int64_t);
  using PanelFn = void (*)(const uint8_t*, int, const float*, float*);
  using Int8Fn = void (*)(const uint8_t*, int, uint8_t*);
  struct Variant {
    std::string name;
    RowFn row;
    PanelFn panel;
    Int8Fn int8;
  };
  std::vector<Variant> variants = {{"generic", decode_tile_generic, decode_tile_panel_generic, decode_tile_int8_generic}};
  if (eq::detected_isa() >= eq::Isa::kAvx2)
    variants.push_back({"avx2", avx2_kernels().decode_tile, avx2_kernels().decode_tile_panel, avx2_kernels().decode_tile_int8});
  if (eq::detected_isa() >= eq::Isa::kAvx512) {
    variants.push_back({"avx512", decode_tile_avx512, decode_tile_panel_avx512, decode_tile_int8_avx512});
    if (cpu_has_avx512_vbmi())
      variants.push_back({"avx512_vbmi", decode_tile_avx512_vbmi, decode_tile_panel_avx512_vbmi, decode_tile_int8_avx512_vbmi});
  }
  std::mt19937_64 rng(42);
  std::printf("%-12s %5s %8s %14s %14s %14s\n", "decoder", "bits", "tiles", "row G w/s", "panel G w/s", "int8 G w/s");
  for (int bits : bits_list) {
    std::vector<uint8_t> data(static_cast<size_t>(tiles * tile_bytes(bits)));
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    std::vector<float> factor(16), out(static_cast<size_t>(tiles * kTileSize));
    std::vector<uint8_t> codes(static_cast<size_t>(tiles * kTileSize));
    for (int r = 0; r < 16; ++r) factor[r] = 0.01f * static_cast<float>(r + 1);
    const double weights = static_cast<double>(tiles * kTileSize);
    for (const Variant& v : variants) {
      // Rows into a [16, 16 * tiles] strip (as matmul / dequantize use it); panels contiguous.
      const double row = rate(
          [&] {
            for (int64_t t = 0; t < tiles; ++t)
              v.row(data.data() + t * tile_bytes(bits), bits, factor.data(), out.data() + t * 16, tiles * 16);
          },
          weights, min_s);
      const double panel = rate(
          [&] {
            for (int64_t t = 0; t < tiles; ++t)
              v.panel(data.data() + t * tile_bytes(bits), bits, factor.data(), out.data() + t * kTileSize);
          },
          weights, min_s);
      const double int8 = rate(
          [&] {
            for (int64_t t = 0; t < tiles; ++t) v.int8(data.data() + t * tile_bytes(bits), bits, codes.data() + t * kTileSize);
          },
          weights, min_s);
      std::printf("%-12s %5d %8lld %14.2f %14.2f %14.2f\n", v.name.c_str(), bits, static_cast<long long>(tiles), row,
                  panel, int8);
    }
  }
}
