// Fills the decode (gemv) kernel table: generic first, then overridden per ISA level.
#include "quant/gemv_kernels.h"

#include "quant/packed_stream.h"

namespace eq::quant {

namespace {

#define EQ_FILL_GEMV(t, isa)                          \
  t.stream_int8 = kernels::gemv_stream_int8_##isa;    \
  t.int8_rows = kernels::gemv_int8_rows_##isa;        \
  t.bf16_rows = kernels::gemv_bf16_rows_##isa;

GemvIsaKernels make_gemv_table(Isa isa) {
  GemvIsaKernels t;
  EQ_FILL_GEMV(t, generic)
  if (isa >= Isa::kAvx2) {
    EQ_FILL_GEMV(t, avx2)
  }
  if (isa >= Isa::kAvx512) {
    EQ_FILL_GEMV(t, avx512)
    t.stream_int8_multi = kernels::gemv_stream_int8_multi_avx512;
    t.int8_rows_multi = kernels::gemv_int8_rows_multi_avx512;
    t.bf16_rows_multi = kernels::gemv_bf16_rows_multi_avx512;
  }
  return t;
}
#undef EQ_FILL_GEMV

}  // namespace

StreamGemvChoice stream_gemv_int8_for(const GemvIsaKernels& table, const FormatTraits& format) {
  const StreamLayout l = stream_layout_of(format);
  if (!kernels::gemv_stream_int8_takes_simd(l.bits, l.codes->int8_bytes, l.codes->int8_offset, l.group))
    return {kernels::gemv_stream_int8_generic, nullptr};
  return {table.stream_int8, table.stream_int8_multi};
}

const GemvIsaKernels& gemv_isa_kernels(Isa isa) {
  static const GemvIsaKernels tables[3] = {make_gemv_table(Isa::kGeneric), make_gemv_table(Isa::kAvx2),
                                           make_gemv_table(Isa::kAvx512)};
  const Isa usable = isa < detected_isa() ? isa : detected_isa();
  return tables[static_cast<int>(usable)];
}

}  // namespace eq::quant
