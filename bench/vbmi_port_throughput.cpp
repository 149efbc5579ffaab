// Reciprocal throughput of the vector instructions the trellis LUT decode
// loop is built from (docs/formats.md, "trellis LUT code"), on this machine:
//   build/bench/vbmi_port_throughput [ITERATIONS=200000000]
// Eight independent chains of one instruction per iteration; the clock is
// taken from vpxord, which every AVX-512 core issues twice per cycle on
// ports 0 and 5. A pair of instructions that takes the sum of their single
// times shares a port; one that takes the longer time does not. This is the
// measurement behind the LUT code's 64-entry tables: vpermi2b (128 entries)
// costs two port-5 cycles, vpermb (64) one.
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 warns falsely inside its own permute intrinsics (the `__Y = __Y`
// idiom, GCC bug 105593), as the library's kernels note.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#define EQ_VBMI_TARGET __attribute__((target("avx512f,avx512bw,avx512vbmi,avx512vnni")))

namespace {

int64_t iterations = 200000000;

template <class Op>
EQ_VBMI_TARGET double ns_per_iteration(Op op) {
  volatile int seed = 3;
  __m512i x0 = _mm512_set1_epi32(seed), x1 = _mm512_set1_epi32(seed + 1), x2 = _mm512_set1_epi32(seed + 2),
          x3 = _mm512_set1_epi32(seed + 3), x4 = _mm512_set1_epi32(seed + 4), x5 = _mm512_set1_epi32(seed + 5),
          x6 = _mm512_set1_epi32(seed + 6), x7 = _mm512_set1_epi32(seed + 7);
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < iterations; ++i) {
    x0 = op(x0), x1 = op(x1), x2 = op(x2), x3 = op(x3), x4 = op(x4), x5 = op(x5), x6 = op(x6), x7 = op(x7);
    asm volatile("" : "+v"(x0), "+v"(x1), "+v"(x2), "+v"(x3), "+v"(x4), "+v"(x5), "+v"(x6), "+v"(x7));
  }
  const auto t1 = std::chrono::steady_clock::now();
  alignas(64) int32_t out[16];
  _mm512_store_si512(out, _mm512_xor_si512(_mm512_xor_si512(_mm512_xor_si512(x0, x1), _mm512_xor_si512(x2, x3)),
                                           _mm512_xor_si512(_mm512_xor_si512(x4, x5), _mm512_xor_si512(x6, x7))));
  if (out[0] == 0x7fffffff) std::printf(" ");  // keeps the chains alive
  return std::chrono::duration<double>(t1 - t0).count() / static_cast<double>(iterations) * 1e9;
}

EQ_VBMI_TARGET void run() {
  const __m512i b = _mm512_set1_epi8(5), c = _mm512_set1_epi8(9);
  const double xor_ns = ns_per_iteration([&](__m512i x) EQ_VBMI_TARGET { return _mm512_xor_si512(x, b); });
  const double cycle = xor_ns / 4.0;  // 8 vpxord on 2 ports
  std::printf("clock from vpxord: %.2f GHz (%.3f ns per 8)\n", 1.0 / cycle, xor_ns);
  auto report = [&](const char* name, double ns, int per_iteration) {
    std::printf("%-30s %6.3f ns per iteration, %.2f cycles per instruction\n", name, ns, ns / cycle / per_iteration);
  };
  report("vpermb (64-entry lookup)",
         ns_per_iteration([&](__m512i x) EQ_VBMI_TARGET { return _mm512_permutexvar_epi8(x, b); }), 8);
  report("vpermi2b (128-entry lookup)",
         ns_per_iteration([&](__m512i x) EQ_VBMI_TARGET { return _mm512_permutex2var_epi8(b, x, c); }), 8);
  report("vpmultishiftqb",
         ns_per_iteration([&](__m512i x) EQ_VBMI_TARGET { return _mm512_multishift_epi64_epi8(b, x); }), 8);
  report("vpdpbusd", ns_per_iteration([&](__m512i x) EQ_VBMI_TARGET { return _mm512_dpbusd_epi32(x, b, c); }), 8);
  report("vpsrlq", ns_per_iteration([&](__m512i x) EQ_VBMI_TARGET { return _mm512_srli_epi64(x, 9); }), 8);
  report("vpermi2b + vpmultishiftqb", ns_per_iteration([&](__m512i x) EQ_VBMI_TARGET {
           return _mm512_multishift_epi64_epi8(b, _mm512_permutex2var_epi8(b, x, c));
         }), 16);
  report("vpermb + vpmultishiftqb", ns_per_iteration([&](__m512i x) EQ_VBMI_TARGET {
           return _mm512_multishift_epi64_epi8(b, _mm512_permutexvar_epi8(x, b));
         }), 16);
  report("vpermi2b + vpsrlq", ns_per_iteration([&](__m512i x) EQ_VBMI_TARGET {
           return _mm512_srli_epi64(_mm512_permutex2var_epi8(b, x, c), 9);
         }), 16);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) iterations = std::atoll(argv[1]);
  if (!__builtin_cpu_supports("avx512vbmi") || !__builtin_cpu_supports("avx512vnni")) {
    std::printf("this CPU has no AVX-512 VBMI / VNNI: nothing to measure\n");
    return 0;
  }
  run();
  return 0;
}
