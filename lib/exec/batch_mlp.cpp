#include "exec/batch_mlp.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "exec/int8_panel_gemm.h"
#include "exec/panel_gemm.h"
#include "model/kernels/float_kernels.h"
#include "quant/int8_panels.h"
#include "quant/rotated_basis.h"

namespace eq::exec {
namespace {

// Rows of one batch per pool task: the weights are dequantized once per task,
// so more rows amortize that better; fewer split a hot expert across cores.
constexpr int64_t kBatchRowsPerTask = 128;
// Block sizes (targets; rounded to what the format accepts, format.h):
constexpr int64_t kIBlock = 128;  // intermediate features per block: the SwiGLU tile is rows x 128
constexpr int64_t kKBlock = 256;  // hidden (input) features per gate/up panel: 2 x 128 x 256 floats = 256 KB
constexpr int64_t kHBlock = 256;  // hidden (output) features per down panel: 256 x 128 floats = 128 KB
constexpr int64_t kInt8KBlock = 256;  // the integer path's gate/up panels: 2 x 128 x 256 bytes = 64 KB

int64_t lcm(int64_t a, int64_t b) { return a / std::gcd(a, b) * b; }

// The alignment of block boundaries along a dimension that `format` accepts
// as rows (multiple of 16: whole panels) or as columns (FormatTraits::dequantize_block).
int64_t block_align(const quant::FormatTraits& f, int64_t dim, bool rows) {
  if (f.rotated) return f.rotated->block(dim);
  if (rows) return 16;
  return f.group_size > 0 ? f.group_size : 1;
}

// target rounded down to a multiple of `align` (at least one `align`).
int64_t block_of(int64_t target, int64_t align) { return std::max<int64_t>(align, target / align * align); }

// The arrays behind an Int8RowsBuffer, grown on demand.
struct Int8RowsStorage {
  std::vector<int8_t> q;
  std::vector<int32_t> qsum;
  model::FloatBuffer scale, xsum;
  // Room for `rows` rows of k (a multiple of 32) quantized values.
  Int8RowsBuffer sized(int64_t rows, int64_t k) {
    const int64_t units = k / quant::kInt8Unit;
    q.resize(static_cast<size_t>(rows * k));
    qsum.resize(static_cast<size_t>(rows * units));
    scale.resize(qsum.size());
    xsum.resize(qsum.size());
    return {q.data(), k, scale.data(), qsum.data(), xsum.data(), units};
  }
};

// Weight panels of the integer path: codes, per-unit scales and biases.
struct Int8PanelStorage {
  std::vector<uint8_t> codes;
  model::FloatBuffer scales, biases;
};

struct Scratch {
  model::FloatBuffer gate_panels, up_panels, down_panels, gate, up, xg, xu;
  // The rotated-basis int8 path: each projection's panels, the two rotated
  // copies of x and the SwiGLU tile, quantized.
  Int8PanelStorage gate8, up8, down8;
  Int8RowsStorage xg8, xu8, a8;
};

// The integer path's buffers: weight panels (codes, per-unit scales and
// biases) and quantized activations (the x rows, the SwiGLU tile).
struct Int8Scratch {
  Int8PanelStorage gate, up, down;
  model::FloatBuffer gate_out, up_out;
  Int8RowsStorage x, a;
};

// The activation on a tile of intermediate columns [i0, i0 + ni) of `rows`
// rows (row stride ld), gate and up biases of those columns added first; in
// place into gate. Columns past ni (a short last block's padding) are left
// as they are: down reads ni columns only.
void glu_tile(const ExpertWeights& w, float* gate, const float* up, int64_t rows, int64_t i0, int64_t ni, int64_t ld) {
  model::kernels::glu_rows(w.act, gate, up, rows, ni, ld, w.gate_bias ? w.gate_bias + i0 : nullptr,
                           w.up_bias ? w.up_bias + i0 : nullptr, gate);
}

// A format stored in a rotated basis, W = diag(sv) H W' H diag(su) per
// projection (quant/rotated_basis.h; the trellis formats): the activations are
// rotated instead of the weights (as the formats' own matmul does), so only W'
// is decoded (RotatedBasis::decode_panels); the Hadamard transforms act on
// rows x H and rows x 128 tiles, not on every weight. Same blocking and
// per-row independence as run_blocked. With AVX-512 VNNI, W' comes as int8
// panels (RotatedBasis::decode_int8_panels) and the rotated activations int8
// per 32 k, through the integer micro-kernel of the other formats
// (int8_panel_gemm.h): vpdpbusd does 64 multiply-adds per instruction where an
// fp32 FMA does 16 (and vpdpwssd, for exact int16 codes, 32: no faster than
// two FMA ports). For trellis the code rounding moves a weight by at most 2.01
// of |y| <= 510 (uniform, s.d. 1.16 against the codes' s.d. of about 148),
// below the int8 activations' error and far below the format's own.
void run_rotated(const ExpertWeights& w, const float* x, int64_t rows, float* y, Scratch& s, bool use_int8) {
  const quant::RotatedBasis& rb = *w.gate.format->rotated;
  const int64_t I = w.gate.rows, H = w.gate.cols;
  const int64_t bI = rb.block(I), bH = rb.block(H);
  const int64_t ib = block_of(kIBlock, bI), kb = block_of(kKBlock, 16), hb = block_of(kHBlock, 16);
  const PanelGemmFn gemm = active_panel_gemm();
  const int8_t *su_g = rb.input_signs(w.gate), *sv_g = rb.output_signs(w.gate);
  const int8_t *su_u = rb.input_signs(w.up), *sv_u = rb.output_signs(w.up);
  const int8_t *su_d = rb.input_signs(w.down), *sv_d = rb.output_signs(w.down);
  s.xg.resize(static_cast<size_t>(rows * H));
  s.xu.resize(s.xg.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < H; ++k) {
      s.xg[r * H + k] = x[r * H + k] * static_cast<float>(su_g[k]);
      s.xu[r * H + k] = x[r * H + k] * static_cast<float>(su_u[k]);
    }
  rb.hadamard_rows(s.xg.data(), rows, H, bH);
  rb.hadamard_rows(s.xu.data(), rows, H, bH);
  const Int8BatchKernels k8 = active_int8_batch_kernels();
  const bool int8 = use_int8 && k8.gemm && H % quant::kInt8Unit == 0 && I % quant::kInt8Unit == 0 && ib % quant::kInt8Unit == 0;
  Int8RowsBuffer xgr, xur, ar;
  if (int8) {
    xgr = s.xg8.sized(rows, H);
    xur = s.xu8.sized(rows, H);
    ar = s.a8.sized(rows, ib);
    k8.quantize(s.xg.data(), H, rows, H, quant::Int8KOrder::kNatural, xgr);
    k8.quantize(s.xu.data(), H, rows, H, quant::Int8KOrder::kNatural, xur);
  } else {
    s.gate_panels.resize(static_cast<size_t>(ib * kb));
    s.up_panels.resize(s.gate_panels.size());
    s.down_panels.resize(static_cast<size_t>(hb * ib));
  }
  // The int8 panels of W'[r0:r1, c0:c1] into `out`: codes and per-unit scales.
  auto int8_panels = [&](const quant::PackedMatrix& m, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                         Int8PanelStorage& out) {
    const int64_t kc = c1 - c0, np = (r1 - r0) / 16, units = kc / quant::kInt8Unit;
    out.codes.resize(static_cast<size_t>(np * 16 * kc));
    out.scales.resize(static_cast<size_t>(np * units * 16));
    rb.decode_int8_panels(m, r0, r1, c0, c1, out.codes.data(), out.scales.data());
  };
  s.gate.resize(static_cast<size_t>(rows * ib));
  s.up.resize(s.gate.size());
  for (int64_t i0 = 0; i0 < I; i0 += ib) {
    const int64_t i1 = std::min(I, i0 + ib), ni = i1 - i0;
    for (int64_t c0 = 0; c0 < H; c0 += kb) {
      const int64_t c1 = std::min(H, c0 + kb);
      if (int8) {
        const int64_t u0 = c0 / quant::kInt8Unit;
        int8_panels(w.gate, i0, i1, c0, c1, s.gate8);
        int8_panels(w.up, i0, i1, c0, c1, s.up8);
        const Int8Rows xg{xgr.q + c0, xgr.ldq, xgr.scale + u0, xgr.qsum + u0, xgr.xsum + u0, xgr.ldu};
        const Int8Rows xu{xur.q + c0, xur.ldq, xur.scale + u0, xur.qsum + u0, xur.xsum + u0, xur.ldu};
        k8.gemm(xg, rows, s.gate8.codes.data(), s.gate8.scales.data(), nullptr, 128, ni / 16, c1 - c0, s.gate.data(),
                ib, c0 > 0);
        k8.gemm(xu, rows, s.up8.codes.data(), s.up8.scales.data(), nullptr, 128, ni / 16, c1 - c0, s.up.data(), ib,
                c0 > 0);
        continue;
      }
      rb.decode_panels(w.gate, i0, i1, c0, c1, s.gate_panels.data());
      rb.decode_panels(w.up, i0, i1, c0, c1, s.up_panels.data());
      gemm(s.xg.data() + c0, H, rows, s.gate_panels.data(), ni / 16, (c1 - c0) * 16, c1 - c0, s.gate.data(), ib, c0 > 0);
      gemm(s.xu.data() + c0, H, rows, s.up_panels.data(), ni / 16, (c1 - c0) * 16, c1 - c0, s.up.data(), ib, c0 > 0);
    }
    // Back to the original basis along I (block-diagonal, blocks inside [i0, i1)).
    for (int64_t r = 0; r < rows; ++r) {
      float* g = s.gate.data() + r * ib;
      float* u = s.up.data() + r * ib;
      rb.hadamard_rows(g, 1, ni, bI);
      rb.hadamard_rows(u, 1, ni, bI);
      for (int64_t i = 0; i < ni; ++i) {
        g[i] *= static_cast<float>(sv_g[i0 + i]);
        u[i] *= static_cast<float>(sv_u[i0 + i]);
      }
    }
    glu_tile(w, s.gate.data(), s.up.data(), rows, i0, ni, ib);
    // Into down's rotated input basis: H (su ⊙ act), again block-diagonal within [i0, i1).
    for (int64_t r = 0; r < rows; ++r) {
      float* a = s.gate.data() + r * ib;
      for (int64_t i = 0; i < ni; ++i) a[i] *= static_cast<float>(su_d[i0 + i]);
      rb.hadamard_rows(a, 1, ni, bI);
    }
    if (int8) k8.quantize(s.gate.data(), ib, rows, ni, quant::Int8KOrder::kNatural, ar);
    for (int64_t h0 = 0; h0 < H; h0 += hb) {
      const int64_t h1 = std::min(H, h0 + hb);
      if (int8) {
        int8_panels(w.down, h0, h1, i0, i1, s.down8);
        k8.gemm(ar.view(), rows, s.down8.codes.data(), s.down8.scales.data(), nullptr, 128, (h1 - h0) / 16, ni, y + h0,
                H, i0 > 0);
        continue;
      }
      rb.decode_panels(w.down, h0, h1, i0, i1, s.down_panels.data());
      gemm(s.gate.data(), ib, rows, s.down_panels.data(), (h1 - h0) / 16, ni * 16, ni, y + h0, H, i0 > 0);
    }
  }
  rb.hadamard_rows(y, rows, H, bH);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < H; ++h) y[r * H + h] *= static_cast<float>(sv_d[h]);
  add_bias_rows(w.down_bias, H, y, rows, H);
}

// One expert on `rows` contiguous rows: y = down(act(gate x, up x)) (biases
// as glu_tile and add_bias_rows add them), the intermediate dimension in
// blocks so the activation tile stays in cache; down's contribution of each
// block is accumulated into y. Every output element is
// one FMA chain in a fixed order (panel_gemm.h), so a row's result does not
// depend on the other rows of the call.
void run_blocked(const ExpertWeights& w, const float* x, int64_t rows, float* y, Scratch& s) {
  const quant::FormatTraits& f = *w.gate.format;
  const int64_t I = w.gate.rows, H = w.gate.cols;
  const int64_t ib = block_of(kIBlock, lcm(block_align(f, I, true), block_align(f, I, false)));
  const int64_t kb = block_of(kKBlock, block_align(f, H, false));
  const int64_t hb = block_of(kHBlock, lcm(16, block_align(f, H, true)));
  const int64_t ib_pad = (ib + 15) / 16 * 16;
  const PanelGemmFn gemm = active_panel_gemm();
  s.gate_panels.resize(static_cast<size_t>(ib_pad * kb));
  s.up_panels.resize(s.gate_panels.size());
  s.down_panels.resize(static_cast<size_t>((hb + 15) / 16 * 16 * ib));
  s.gate.resize(static_cast<size_t>(rows * ib_pad));
  s.up.resize(s.gate.size());
  for (int64_t i0 = 0; i0 < I; i0 += ib) {
    const int64_t i1 = std::min(I, i0 + ib), ni = i1 - i0, np = (ni + 15) / 16;
    for (int64_t c0 = 0; c0 < H; c0 += kb) {
      const int64_t c1 = std::min(H, c0 + kb);
      f.dequantize_block(w.gate, i0, i1, c0, c1, s.gate_panels.data());
      f.dequantize_block(w.up, i0, i1, c0, c1, s.up_panels.data());
      gemm(x + c0, H, rows, s.gate_panels.data(), np, (c1 - c0) * 16, c1 - c0, s.gate.data(), ib_pad, c0 > 0);
      gemm(x + c0, H, rows, s.up_panels.data(), np, (c1 - c0) * 16, c1 - c0, s.up.data(), ib_pad, c0 > 0);
    }
    // The reference MLP's activation kernel, so bf16 packs reproduce the reference.
    glu_tile(w, s.gate.data(), s.up.data(), rows, i0, ni, ib_pad);
    for (int64_t h0 = 0; h0 < H; h0 += hb) {
      const int64_t h1 = std::min(H, h0 + hb), nh = h1 - h0;
      f.dequantize_block(w.down, h0, h1, i0, i1, s.down_panels.data());
      if (nh % 16 == 0) {
        gemm(s.gate.data(), ib_pad, rows, s.down_panels.data(), nh / 16, ni * 16, ni, y + h0, H, i0 > 0);
        continue;
      }
      // A last panel narrower than 16 outputs: full panels straight into y,
      // the partial one through a 16-wide buffer (same FMA chains).
      const int64_t full = nh / 16, rest = nh - full * 16;
      if (full) gemm(s.gate.data(), ib_pad, rows, s.down_panels.data(), full, ni * 16, ni, y + h0, H, i0 > 0);
      thread_local model::FloatBuffer edge;
      edge.resize(static_cast<size_t>(rows * 16));
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < rest; ++j) edge[r * 16 + j] = i0 > 0 ? y[r * H + h0 + full * 16 + j] : 0.0f;
      gemm(s.gate.data(), ib_pad, rows, s.down_panels.data() + full * ni * 16, 1, ni * 16, ni, edge.data(), 16, true);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < rest; ++j) y[r * H + h0 + full * 16 + j] = edge[r * 16 + j];
    }
  }
  add_bias_rows(w.down_bias, H, y, rows, H);
}

// Whether an expert runs the integer path: a format with int8 panels, an
// ISA with the integer kernel, and both dimensions in whole 32-k units.
bool uses_int8(const ExpertWeights& w) {
  const quant::FormatTraits& f = *w.gate.format;
  return f.int8_panels && active_int8_batch_kernels().gemm && w.gate.cols % quant::kInt8Unit == 0 &&
         w.gate.rows % quant::kInt8Unit == 0;
}

// run_blocked with integer dot products: x is quantized once (int8 per 32 k,
// int8_panel_gemm.h), each SwiGLU tile once before down. Same blocking; every
// output element is one fixed chain of per-unit steps, so a row's result
// depends only on its own x.
void run_int8(const ExpertWeights& w, const float* x, int64_t rows, float* y, Int8Scratch& s) {
  const quant::Int8Panels& f = *w.gate.format->int8_panels;
  const Int8BatchKernels k = active_int8_batch_kernels();
  const int64_t I = w.gate.rows, H = w.gate.cols, G = std::max(quant::kInt8Unit, w.gate.format->group_size);
  const int64_t ib = block_of(kIBlock, lcm(G, 16)), kb = block_of(kInt8KBlock, G), hb = block_of(kHBlock, 16);
  const Int8RowsBuffer xr = s.x.sized(rows, H), ar = s.a.sized(rows, ib);
  k.quantize(x, H, rows, H, f.order, xr);
  auto panels = [](Int8PanelStorage& p, int64_t n, int64_t kc) {
    p.codes.resize(static_cast<size_t>(n * kc));
    p.scales.resize(static_cast<size_t>(n * kc / quant::kInt8Unit));
    p.biases.resize(p.scales.size());
  };
  panels(s.gate, ib, kb);
  panels(s.up, ib, kb);
  panels(s.down, hb, ib);
  s.gate_out.resize(static_cast<size_t>(rows * ib));
  s.up_out.resize(static_cast<size_t>(rows * ib));
  float* gb = f.has_biases ? s.gate.biases.data() : nullptr;
  float* ub = f.has_biases ? s.up.biases.data() : nullptr;
  float* db = f.has_biases ? s.down.biases.data() : nullptr;
  // The blocks in execution order: gate+up (i0, c0) for every c0, then down
  // (h0, i0) for every h0, per i0. While one block's GEMMs run, the source
  // bytes of the next block are requested in kPrefetchSlices parts between
  // GEMM slices: a burst of requests at build time stalled the build on the
  // fill buffers and left the GEMM without memory traffic (e512, 10 rows per
  // expert: build ≈ GEMM time, barely overlapped).
  struct Block {
    bool down = false;
    int64_t i0 = 0, i1 = 0, a0 = 0, a1 = 0;  // gate/up: columns [a0, a1); down: rows [a0, a1)
  };
  auto next_of = [&](const Block& b) -> std::optional<Block> {
    if (!b.down) {
      if (b.a1 < H) return Block{false, b.i0, b.i1, b.a1, std::min(H, b.a1 + kb)};
      return Block{true, b.i0, b.i1, 0, std::min(H, hb)};
    }
    if (b.a1 < H) return Block{true, b.i0, b.i1, b.a1, std::min(H, b.a1 + hb)};
    if (b.i1 < I) return Block{false, b.i1, std::min(I, b.i1 + ib), 0, std::min(H, kb)};
    return std::nullopt;
  };
  auto prefetch = [&](const std::optional<Block>& b, int slice, int slices) {
    if (!b || !f.prefetch) return;
    if (b->down) {
      f.prefetch(w.down, b->a0, b->a1, b->i0, b->i1, slice, slices);
    } else {
      f.prefetch(w.gate, b->i0, b->i1, b->a0, b->a1, slice, slices);
      f.prefetch(w.up, b->i0, b->i1, b->a0, b->a1, slice, slices);
    }
  };
  constexpr int kPrefetchSlices = 8;
  // gemm over np panels in `parts` parts, with prefetch slices first_slice,
  // first_slice + 1, ... of the next block before them.
  auto sliced_gemm = [&](const Int8Rows& a, const uint8_t* codes, const float* scales, const float* biases,
                         int64_t np, int64_t kc, float* c, int64_t ldc, bool accumulate,
                         const std::optional<Block>& next, int first_slice, int parts) {
    const int64_t pstride = kc * 16, sstride = kc / quant::kInt8Unit * 16;
    for (int s = 0; s < parts; ++s) {
      prefetch(next, first_slice + s, kPrefetchSlices);
      const int64_t p0 = np * s / parts, p1 = np * (s + 1) / parts;
      if (p1 > p0)
        k.gemm(a, rows, codes + p0 * pstride, scales + p0 * sstride, biases ? biases + p0 * sstride : nullptr,
               f.offset, p1 - p0, kc, c + p0 * 16, ldc, accumulate);
    }
  };
  for (int64_t i0 = 0; i0 < I; i0 += ib) {
    const int64_t i1 = std::min(I, i0 + ib), ni = i1 - i0, np = ni / 16;
    for (int64_t c0 = 0; c0 < H; c0 += kb) {
      const int64_t c1 = std::min(H, c0 + kb), u0 = c0 / quant::kInt8Unit;
      const std::optional<Block> next = next_of(Block{false, i0, i1, c0, c1});
      // Formats without a sliced prefetch let build() prefetch the same matrix's next block.
      const int64_t pr = f.prefetch || c1 >= H ? -1 : i0, pc = f.prefetch || c1 >= H ? -1 : c1;
      f.build(w.gate, i0, i1, c0, c1, s.gate.codes.data(), s.gate.scales.data(), gb, pr, pc);
      f.build(w.up, i0, i1, c0, c1, s.up.codes.data(), s.up.scales.data(), ub, pr, pc);
      const Int8Rows xc{xr.q + c0, xr.ldq, xr.scale + u0, xr.qsum + u0, xr.xsum + u0, xr.ldu};
      sliced_gemm(xc, s.gate.codes.data(), s.gate.scales.data(), gb, np, c1 - c0, s.gate_out.data(), ib, c0 > 0, next, 0,
                  kPrefetchSlices / 2);
      sliced_gemm(xc, s.up.codes.data(), s.up.scales.data(), ub, np, c1 - c0, s.up_out.data(), ib, c0 > 0, next,
                  kPrefetchSlices / 2, kPrefetchSlices / 2);
    }
    // The reference MLP's activation kernel on the ni valid columns of each row.
    glu_tile(w, s.gate_out.data(), s.up_out.data(), rows, i0, ni, ib);
    k.quantize(s.gate_out.data(), ib, rows, ni, f.order, ar);
    for (int64_t h0 = 0; h0 < H; h0 += hb) {
      const int64_t h1 = std::min(H, h0 + hb);
      const std::optional<Block> next = next_of(Block{true, i0, i1, h0, h1});
      const int64_t pr = f.prefetch || h1 >= H ? -1 : h1, pc = f.prefetch || h1 >= H ? -1 : i0;
      f.build(w.down, h0, h1, i0, i1, s.down.codes.data(), s.down.scales.data(), db, pr, pc);
      sliced_gemm(ar.view(), s.down.codes.data(), s.down.scales.data(), db, (h1 - h0) / 16, ni, y + h0, H, i0 > 0,
                  next, 0, kPrefetchSlices);
    }
  }
  add_bias_rows(w.down_bias, H, y, rows, H);
}

}  // namespace

void run_expert(const ExpertWeights& w, const float* x, int64_t rows, float* y, model::FloatBuffer& scratch) {
  if (rows <= 0) return;
  const int64_t I = w.gate.rows;
  scratch.resize(static_cast<size_t>(2 * rows * I));
  float* gate = scratch.data();
  float* up = gate + rows * I;
  w.gate.format->matmul(w.gate, x, rows, gate, false);
  w.up.format->matmul(w.up, x, rows, up, false);
  // The same activation kernel as the reference MLP, so bf16 passthrough packs reproduce it.
  model::kernels::glu_rows(w.act, gate, up, rows, I, I, w.gate_bias, w.up_bias, gate);
  w.down.format->matmul(w.down, gate, rows, y, false);
  add_bias_rows(w.down_bias, w.down.rows, y, rows, w.down.rows);
}

BatchPath batch_path_of(const ExpertWeights& w) {
  const quant::FormatTraits& f = *w.gate.format;
  if (f.rotated) return BatchPath::kRotated;
  if (uses_int8(w)) return BatchPath::kInt8Panels;
  if (f.dequantize_block) return BatchPath::kFloatPanels;
  return BatchPath::kFormatMatmul;
}

void run_batch_mlp(std::span<const ExpertBatch> batches, const BatchOptions& options) {
  struct Task {
    const ExpertBatch* batch;
    int64_t begin, end;
  };
  // Formats with dequantize_block run the blocked kernel in (expert,
  // row-block) tasks on the pool; others their own matmul (run_expert), on
  // the calling thread when that matmul uses the pool itself.
  std::vector<Task> pooled, serial;
  for (const ExpertBatch& b : batches) {
    if (b.rows <= 0) continue;
    const bool blocked = b.format->dequantize_block != nullptr;
    if (!blocked && b.format->matmul_uses_pool) {
      serial.push_back({&b, 0, b.rows});
      continue;
    }
    for (int64_t r = 0; r < b.rows; r += kBatchRowsPerTask) pooled.push_back({&b, r, std::min(b.rows, r + kBatchRowsPerTask)});
  }
  const int64_t H = batches.empty() ? 0 : batches.front().weights->down.rows;
  auto run_task = [H, &options](const Task& t) {
    const ExpertWeights& w = *t.batch->weights;
    const float* x = t.batch->x + t.begin * H;
    float* y = t.batch->y + t.begin * H;
    switch (batch_path_of(w)) {
      case BatchPath::kRotated: {
        thread_local Scratch scratch;
        return run_rotated(w, x, t.end - t.begin, y, scratch, options.rotated_int8);
      }
      case BatchPath::kInt8Panels: {
        thread_local Int8Scratch scratch;
        return run_int8(w, x, t.end - t.begin, y, scratch);
      }
      case BatchPath::kFloatPanels: {
        thread_local Scratch scratch;
        return run_blocked(w, x, t.end - t.begin, y, scratch);
      }
      case BatchPath::kFormatMatmul: {
        thread_local model::FloatBuffer scratch;
        return run_expert(w, x, t.end - t.begin, y, scratch);
      }
    }
  };
  default_pool().run(pooled.size(), [&](size_t i) { run_task(pooled[i]); });
  for (const Task& t : serial) run_task(t);
}

}  // namespace eq::exec
