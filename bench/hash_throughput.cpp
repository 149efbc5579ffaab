// Throughput of the checksum (XXH64 through libxxhash, lib/core/hash.h) on a
// buffer larger than the caches, one-shot and streamed in 1 MiB updates as the
// packer and verify feed it; XXH3-64 beside it for the manifest-version
// question in docs/manifest.md. Median of --reps runs, GB/s (1e9 bytes).
//   build/bench/hash_throughput [--mib 512] [--reps 7]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include <CLI/CLI.hpp>
#include <xxhash.h>

#include "core/hash.h"

namespace {

template <class F>
double median_gbps(size_t bytes, int reps, F&& f) {
  std::vector<double> t;
  volatile uint64_t sink = 0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    sink = sink + f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return double(bytes) / t[t.size() / 2] / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"checksum throughput"};
  size_t mib = 512;
  int reps = 7;
  app.add_option("--mib", mib, "buffer size in MiB")->check(CLI::Range(1, 16384));
  app.add_option("--reps", reps, "runs per figure (median)")->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  const size_t n = mib << 20;
  std::vector<uint8_t> buf(n);
  uint64_t s = 1;
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t v = eq::splitmix64(s);
    std::copy_n(reinterpret_cast<const uint8_t*>(&v), std::min<size_t>(8, n - i), buf.data() + i);
  }
  const double one = median_gbps(n, reps, [&] { return eq::xxhash64(buf.data(), n); });
  const double streamed = median_gbps(n, reps, [&] {
    eq::Xxhash64 h;
    for (size_t i = 0; i < n; i += 1 << 20) h.update(buf.data() + i, std::min<size_t>(1 << 20, n - i));
    return h.digest();
  });
  const double xxh3 = median_gbps(n, reps, [&] { return uint64_t(XXH3_64bits(buf.data(), n)); });
  std::printf("buffer %zu MiB, median of %d\n", mib, reps);
  std::printf("XXH64 one-shot   %6.2f GB/s\n", one);
  std::printf("XXH64 1 MiB feed %6.2f GB/s\n", streamed);
  std::printf("XXH3-64 one-shot %6.2f GB/s\n", xxh3);
}
