#include "quant/trellis/row_tables.h"

#include "core/error.h"
#include "quant/trellis/gemv.h"

namespace eq::quant::trellis {

namespace {

RowTables build(int bits) {
  RowTables r{};
  for (int g = 0; g < kTileDim; ++g) {
    r.offset[g] = row_load_offset(bits, g);
    for (int l = 0; l < kTileDim; ++l)
      for (int i = 0; i < 4; ++i) r.ctrl[g][4 * l + i] = row_byte(bits, g, l, i);
  }
  for (int l = 0; l < kTileDim; ++l) {
    r.shift[l] = row_shift(bits, l);
    // The state is bits [shift, shift + 16) of its dword, i.e. of the qword
    // from bit 32 * (l odd) + shift: low byte, then high byte.
    const int low = 32 * (l & 1) + row_shift(bits, l);
    r.multishift[l] = low | (low + 8) << 8;
  }
  return r;
}

}  // namespace

const RowTables& row_tables(int bits) {
  static const RowTables tables[3] = {build(2), build(3), build(4)};
  EQ_CHECK(bits >= 2 && bits <= 4, "trellis row tables: K_bits must be 2, 3 or 4");
  return tables[bits - 2];
}

}  // namespace eq::quant::trellis
