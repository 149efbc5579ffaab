// AVX-512 VBMI variant of the trellis decode inner loop (trellis_gemv_impl.h):
// one zero-masked vpmultishiftqb pulls each state's two bytes out of its
// dword, replacing vpsrlvd + vpandd (one vector uop fewer per 16 weights:
// measured 11% faster, trellis2 [768, 2048] from L2 103.4 -> 92.7 us). Only
// this file is compiled for VBMI; tile_gemv() calls it only when the CPU
// reports VBMI (Ice Lake / Sapphire Rapids / Zen 4 do; Cooper Lake does not).
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512vbmi"))), apply_to = function)
#else
#pragma GCC target("avx512vbmi")
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC bug 105593, as in trellis_gemv.cpp
#endif
#define EQ_TRELLIS_VBMI  // trellis_row_states.h: MultiShift
#include "trellis_gemv_impl.h"

namespace eq::quant::trellis {

namespace {

template <int Bits>
void run_bits(const TileGemvArgs& a) {
  const MultiShift state_of{_mm512_load_si512(row_tables(Bits).multishift)};
  tile_gemv_bits<Bits>(a, state_of);
}

template <int Bits>
void run_rows_bits(const TileGemvArgs* a, int n) {
  const MultiShift state_of{_mm512_load_si512(row_tables(Bits).multishift)};
  switch (n) {
    case 2: return tile_gemv_multi_bits<Bits, 2>(a, state_of);
    case 3: return tile_gemv_multi_bits<Bits, 3>(a, state_of);
    default: return tile_gemv_multi_bits<Bits, 4>(a, state_of);
  }
}

}  // namespace

void tile_gemv_avx512_vbmi_rows(const TileGemvArgs* a, int n) {
  if (n == 1) return tile_gemv_avx512_vbmi(a[0]);
  switch (a[0].bits) {
    case 2: return run_rows_bits<2>(a, n);
    case 3: return run_rows_bits<3>(a, n);
    default: return run_rows_bits<4>(a, n);
  }
}

void tile_gemv_avx512_vbmi(const TileGemvArgs& a) {
  switch (a.bits) {
    case 2: return run_bits<2>(a);
    case 3: return run_bits<3>(a);
    default: return run_bits<4>(a);
  }
}

}  // namespace eq::quant::trellis

#if defined(__clang__)
#pragma clang attribute pop
#endif
