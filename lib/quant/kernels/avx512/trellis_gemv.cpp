// AVX-512 VNNI inner loop of the trellis decode kernel (quant/trellis/gemv.h;
// the loop itself is trellis_gemv_impl.h): states by vpsrlvd + mask. The
// VBMI variant (trellis_gemv_vbmi.cpp) runs instead where the CPU has VBMI.
// GCC 12 flags the _mm512_undefined_* placeholders inside its own intrinsic
// headers as uninitialized (GCC bug 105593); the warning is about the header.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "trellis_gemv_impl.h"

namespace eq::quant::trellis {

namespace {

template <int Bits>
void run_bits(const TileGemvArgs& a) {
  const ShiftAndMask state_of{_mm512_load_si512(row_tables(Bits).shift), _mm512_set1_epi32(0xFFFF)};
  tile_gemv_bits<Bits>(a, state_of);
}

template <int Bits>
void run_rows_bits(const TileGemvArgs* a, int n) {
  const ShiftAndMask state_of{_mm512_load_si512(row_tables(Bits).shift), _mm512_set1_epi32(0xFFFF)};
  switch (n) {
    case 2: return tile_gemv_multi_bits<Bits, 2>(a, state_of);
    case 3: return tile_gemv_multi_bits<Bits, 3>(a, state_of);
    default: return tile_gemv_multi_bits<Bits, 4>(a, state_of);
  }
}

}  // namespace

void tile_gemv_avx512_rows(const TileGemvArgs* a, int n) {
  if (n == 1) return tile_gemv_avx512(a[0]);
  switch (a[0].bits) {
    case 2: return run_rows_bits<2>(a, n);
    case 3: return run_rows_bits<3>(a, n);
    default: return run_rows_bits<4>(a, n);
  }
}

void tile_gemv_avx512(const TileGemvArgs& a) {
  switch (a.bits) {
    case 2: return run_bits<2>(a);
    case 3: return run_bits<3>(a);
    default: return run_bits<4>(a);
  }
}

}  // namespace eq::quant::trellis
