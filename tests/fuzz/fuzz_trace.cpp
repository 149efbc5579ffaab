// Routing traces (profile --save-trace): zstd-compressed or raw, read block by
// block by read_trace_bytes (what read_trace runs on the mapped file).
#include <cstdint>

#include "fuzz/fuzz_target.h"
#include "profile/trace.h"

EQ_FUZZ_TARGET(trace) {
  uint64_t checksum = 0;
  eq::profile::read_trace_bytes(input, "trace fuzz.zst", nullptr,
                                [&](int64_t layer, int64_t tokens, const int32_t* ids, const float* gates) {
                                  for (int64_t i = 0; i < tokens; ++i)
                                    checksum += uint64_t(ids[i]) + uint64_t(gates[i] != 0) + uint64_t(layer);
                                });
}
