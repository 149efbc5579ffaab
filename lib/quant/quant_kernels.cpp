// Fills the kernel table: generic first, then overridden per ISA level.
#include "quant/quant_kernels.h"

#include "core/error.h"

namespace eq::quant {

namespace kernels {
#define EQ_DECLARE_DECODE(name) \
  void name(const uint32_t*, int64_t, int64_t, const float*, const float*, const float*, int, float*);
#define EQ_DECLARE_ISA(isa)                                                                    \
  EQ_DECLARE_DECODE(decode_table4_##isa)                                                       \
  EQ_DECLARE_DECODE(decode_uint2_##isa)                                                        \
  EQ_DECLARE_DECODE(decode_uint3_##isa)                                                        \
  EQ_DECLARE_DECODE(decode_uint4_##isa)                                                        \
  EQ_DECLARE_DECODE(decode_uint8_##isa)                                                        \
  void panel_fma_##isa(const float*, int64_t, const float*, int64_t, int64_t, float*);         \
  float dot_##isa(const float*, const float*, int64_t);                                        \
  void panel_to_rows_##isa(const float*, int64_t, int64_t, float*, int64_t);                    \
  void int8_to_f32_##isa(const int8_t*, float, float*, int64_t);
void search_affine_groups_generic(const float*, int64_t, int64_t, const float*, int, int, float*, float*, uint8_t*);
void search_affine_groups_avx512(const float*, int64_t, int64_t, const float*, int, int, float*, float*, uint8_t*);
EQ_DECLARE_ISA(generic)
EQ_DECLARE_ISA(avx2)
EQ_DECLARE_ISA(avx512)
#undef EQ_DECLARE_ISA
#undef EQ_DECLARE_DECODE
}  // namespace kernels

namespace {

#define EQ_FILL(t, isa)                          \
  t.decode_table4 = kernels::decode_table4_##isa; \
  t.decode_uint2 = kernels::decode_uint2_##isa;  \
  t.decode_uint3 = kernels::decode_uint3_##isa;  \
  t.decode_uint4 = kernels::decode_uint4_##isa;  \
  t.decode_uint8 = kernels::decode_uint8_##isa;  \
  t.panel_fma = kernels::panel_fma_##isa;        \
  t.dot = kernels::dot_##isa;                    \
  t.panel_to_rows = kernels::panel_to_rows_##isa; \
  t.int8_to_f32 = kernels::int8_to_f32_##isa;

QuantKernels make_quant_table(Isa isa) {
  QuantKernels t;
  EQ_FILL(t, generic)
  t.search_affine_groups = kernels::search_affine_groups_generic;  // AVX2: the scalar search
  if (isa >= Isa::kAvx2) {
    EQ_FILL(t, avx2)
  }
  if (isa >= Isa::kAvx512) {
    EQ_FILL(t, avx512)
    t.search_affine_groups = kernels::search_affine_groups_avx512;
  }
  return t;
}
#undef EQ_FILL

}  // namespace

DecodePanelFn QuantKernels::decode_uint(int bits) const {
  switch (bits) {
    case 2: return decode_uint2;
    case 3: return decode_uint3;
    case 4: return decode_uint4;
    case 8: return decode_uint8;
  }
  EQ_CHECK(false, "no unsigned decoder for " + std::to_string(bits) + " bits");
}

const QuantKernels& quant_kernels(Isa isa) {
  static const QuantKernels tables[3] = {make_quant_table(Isa::kGeneric), make_quant_table(Isa::kAvx2),
                                         make_quant_table(Isa::kAvx512)};
  // Never run a kernel the CPU (or OS) cannot execute, whatever the caller asks.
  const Isa usable = isa < detected_isa() ? isa : detected_isa();
  return tables[static_cast<int>(usable)];
}

}  // namespace eq::quant
