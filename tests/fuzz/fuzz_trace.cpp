// Routing traces (profile --save-trace): zstd-compressed or raw, read block by block.
#include <cstdint>

#include "fuzz/fuzz_file_input.h"
#include "fuzz/fuzz_target.h"
#include "profile/trace.h"

EQ_FUZZ_TARGET(trace) {
  static eq::fuzz::TempInputFile file("trace.zst");
  const std::string& path = file.write(input);
  if (!eq::profile::is_trace_file(path)) return;
  uint64_t checksum = 0;
  eq::profile::read_trace(path, [&](int64_t layer, int64_t tokens, const int32_t* ids, const float* gates) {
    for (int64_t i = 0; i < tokens; ++i) checksum += uint64_t(ids[i]) + uint64_t(gates[i] != 0) + uint64_t(layer);
  });
}
