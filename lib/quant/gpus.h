// Choices of a run that every GPU quantizer call shares: which GPUs work side
// by side, and how the GPU searches trellis tiles. Process-wide, like the
// thread count: pack and profile set them once from their request, before any
// work (the GPU list through parse_device's "cuda:0,1").
#pragma once

#include <cstddef>
#include <string_view>

#include "quant/device.h"

namespace eq::quant {

// How the GPU searches trellis tiles: kExact is the CPU's Viterbi bit for bit
// (FP32 costs); kHalf keeps the costs in FP16, two tiles per state update,
// deterministic with a squared error within 0.5% of kExact's (docs/design.md,
// "GPU quantizers"). The CPU always runs the exact search.
enum class TrellisSearch : unsigned char { kExact, kHalf };

// "exact" | "half"; throws eq::Error (invalid input, exit 2) otherwise.
TrellisSearch parse_trellis_search(std::string_view name);
std::string_view trellis_search_name(TrellisSearch s);

// The GPU trellis search of this process (kExact until set).
void set_trellis_search(TrellisSearch s);
TrellisSearch trellis_search();

// How many devices of kind `d` work side by side: the GPUs chosen (every
// visible one unless parse_device got a list), 1 for the CPU (whose
// quantizers spread over the thread pool themselves).
size_t device_count(Device d);

// Makes the calling thread's quantizers run on device `worker` modulo
// device_count(d): callers hand each worker thread its own GPU, so experts
// spread over the GPUs. A no-op for the CPU. Output never depends on the GPU:
// every GPU computes the same bits.
void bind_device(Device d, size_t worker);

}  // namespace eq::quant
