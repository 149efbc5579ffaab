// The decode (gemv) kernel of the trellis formats, kTrellisGemv (quant/gemv.h).
// W = diag(sv) H_N W' H_K diag(su), so y = sv o H_N (W' x~) with x~ = H_K (su o x):
//  * prepare: x~ once per (x row, matrix), int8 per Hadamard block of K (<= 128
//    elements, incoherent after the rotation) with q[k] replicated 4x;
//  * run: z = W' x~ from the tiles' integer dot products (the per-ISA loop,
//    trellis/gemv.h), times the row scales, then the output Hadamard on each of
//    the call's blocks of hadamard_block_size(N) rows, then the signs sv.
// Every step after the integer sums is the same code for every ISA, so the
// output bits never depend on the ISA, the row range or the thread.
#include "quant/trellis/gemv.h"

#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/error.h"
#include "quant/hadamard.h"
#include "quant/trellis/format.h"
#include "quant/trellis/kernels.h"

namespace eq::quant::trellis {

bool cpu_has_avx512_vbmi() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = __builtin_cpu_supports("avx512vbmi");
  return has;
#else
  return false;
#endif
}

void tile_gemv(const TileGemvArgs& a) {
  if (a.code == Code::kLut)
    return active_isa() == Isa::kAvx512 && cpu_has_avx512_vbmi() ? tile_gemv_lut_avx512_vbmi(a) : tile_gemv_generic(a);
  switch (active_isa()) {
    case Isa::kAvx512: return cpu_has_avx512_vbmi() ? tile_gemv_avx512_vbmi(a) : tile_gemv_avx512(a);
    case Isa::kAvx2: return tile_gemv_avx2(a);
    default: return tile_gemv_generic(a);
  }
}

void tile_gemv_rows(const TileGemvArgs* args, int n) {
  if (args[0].code == Code::kLut && active_isa() == Isa::kAvx512 && cpu_has_avx512_vbmi())
    return tile_gemv_lut_avx512_vbmi_rows(args, n);
  if (active_isa() == Isa::kAvx512 && args[0].code == Code::k1mad)
    return cpu_has_avx512_vbmi() ? tile_gemv_avx512_vbmi_rows(args, n) : tile_gemv_avx512_rows(args, n);
  for (int i = 0; i < n; ++i) tile_gemv(args[i]);
}

namespace {

void check_parts(const PackedMatrix& m) {
  const int bits = m.format->weight_bits;
  if (m.parts.size() != 4 || m.rows % kTileDim || m.cols % kTileDim ||
      m.parts[0].nbytes != static_cast<size_t>(m.rows / kTileDim * (m.cols / kTileDim) * tile_bytes(bits)) ||
      m.parts[1].nbytes != static_cast<size_t>(m.cols) || m.parts[2].nbytes != static_cast<size_t>(m.rows) ||
      m.parts[3].nbytes != static_cast<size_t>(m.rows) * 4)
    invalid(std::string(m.format->name) + " gemv: parts do not match a [" + std::to_string(m.rows) + ", " +
            std::to_string(m.cols) + "] matrix");
}

void trellis_prepare(const PackedMatrix& m, const float* x, GemvActivation& out) {
  check_parts(m);
  const int64_t K = m.cols;
  const int8_t* su = static_cast<const int8_t*>(m.parts[1].data);
  thread_local std::vector<float> rotated;
  rotated.resize(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) rotated[k] = x[k] * static_cast<float>(su[k]);
  hadamard_rows(rotated.data(), 1, K);
  // The LUT loops read q once per k; only 1MAD's read the 4x replicated bytes.
  out.set_replicated(rotated.data(), K, hadamard_block_size(K), code_of(m) == Code::k1mad);
}

void check_call(const PackedMatrix& m, const GemvInput& in, int64_t row_begin, int64_t row_end) {
  const int64_t N = m.rows, K = m.cols, block_n = hadamard_block_size(N);
  const bool lut = code_of(m) == Code::kLut;
  if ((lut ? !in.q : !in.q_rep4) || in.cols != K || in.rep_block != hadamard_block_size(K))
    invalid(std::string(m.format->name) + " gemv: the input was not prepared by its prepare hook");
  if (row_begin < 0 || row_end > N || row_begin % block_n || (row_end % block_n && row_end != N))
    invalid(std::string(m.format->name) + " gemv: rows [" + std::to_string(row_begin) + ", " +
            std::to_string(row_end) + ") not aligned to the Hadamard block " + std::to_string(block_n));
}

// z (the call's rows of W' x~) -> y: row scales, output Hadamard per block, signs.
void finish_rows(const PackedMatrix& m, int64_t row_begin, int64_t count, float* z, float* y) {
  const int64_t block_n = hadamard_block_size(m.rows);
  const float* scales = static_cast<const float*>(m.parts[3].data) + row_begin;
  const int8_t* sv = static_cast<const int8_t*>(m.parts[2].data) + row_begin;
  for (int64_t n = 0; n < count; ++n) z[n] *= scales[n];
  kernels().hadamard_rows(z, count / block_n, block_n, block_n);
  for (int64_t n = 0; n < count; ++n) y[n] = z[n] * static_cast<float>(sv[n]);
}

TileGemvArgs tile_args(const PackedMatrix& m, const GemvInput& in, int64_t row_begin, int64_t row_end, float* z) {
  TileGemvArgs a;
  a.tiles = static_cast<const uint8_t*>(m.parts[0].data);
  a.tiles_n = m.rows / kTileDim;
  a.tiles_k = m.cols / kTileDim;
  a.bits = m.format->weight_bits;
  a.code = code_of(m);
  a.nt_begin = row_begin / kTileDim;
  a.nt_end = row_end / kTileDim;
  a.in = &in;
  a.z = z;
  return a;
}

void trellis_gemv(const PackedMatrix& m, const GemvInput& in, int64_t row_begin, int64_t row_end, float* y) {
  if (row_end <= row_begin) return;
  check_parts(m);
  check_call(m, in, row_begin, row_end);
  const int64_t count = row_end - row_begin;
  thread_local std::vector<float> z;
  z.resize(static_cast<size_t>(count));
  tile_gemv(tile_args(m, in, row_begin, row_end, z.data()));
  finish_rows(m, row_begin, count, z.data(), y);
}

// GemvKernel::run_rows: the tiles decoded once for up to kMaxGemvRows inputs.
void trellis_gemv_rows(const PackedMatrix& m, const GemvInput* const* xs, int n, int64_t row_begin,
                       int64_t row_end, float* const* ys) {
  if (row_end <= row_begin || n <= 0) return;
  if (n > kMaxGemvRows) invalid(std::string(m.format->name) + " gemv: more than 4 inputs per run_rows call");
  check_parts(m);
  const int64_t count = row_end - row_begin;
  thread_local std::vector<float> z;
  z.resize(static_cast<size_t>(n * count));
  TileGemvArgs args[kMaxGemvRows];
  for (int i = 0; i < n; ++i) {
    check_call(m, *xs[i], row_begin, row_end);
    args[i] = tile_args(m, *xs[i], row_begin, row_end, z.data() + i * count);
  }
  tile_gemv_rows(args, n);
  for (int i = 0; i < n; ++i) finish_rows(m, row_begin, count, z.data() + i * count, ys[i]);
}

}  // namespace

}  // namespace eq::quant::trellis

namespace eq::quant {

// row_align 128: a multiple of every hadamard_block_size(N), so each call
// holds whole output Hadamard blocks.
const GemvKernel kTrellisGemv{.run = trellis::trellis_gemv,
                              .row_align = kMaxHadamardBlock,
                              .preferred_rows = 256,
                              .int8_activation = true,
                              .prepare = trellis::trellis_prepare,
                              .run_rows = trellis::trellis_gemv_rows};

}  // namespace eq::quant
