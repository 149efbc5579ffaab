// Lookup tables that put the 16 states of one trellis tile row into 16
// dword lanes (quant/trellis/gemv.h: row_load_offset, row_byte, row_shift),
// shared by the AVX2 and AVX-512 decode kernels. Built here, in a file
// compiled without ISA flags: a table builder defined in a header included
// from -mavx512 translation units could be linked into the AVX2 path.
#pragma once

#include <cstdint>

#include "quant/trellis/codebook.h"

namespace eq::quant::trellis {

struct RowTables {
  alignas(64) uint8_t ctrl[kTileDim][64];    // vpshufb controls: row g, lane l, its 4 big-endian bytes
  alignas(64) int32_t shift[kTileDim];       // vpsrlvd counts
  alignas(64) int32_t multishift[kTileDim];  // vpmultishiftqb: bytes 0, 1 of each dword = bit offsets in the qword
  int offset[kTileDim];                      // byte offset of row g's 16 bytes in the tile
};

// The tables for K = bits (2, 3 or 4), built once.
const RowTables& row_tables(int bits);

}  // namespace eq::quant::trellis
