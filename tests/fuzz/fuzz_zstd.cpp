// zstd streams (compressed corpora, routing traces, sidecars), decompressed
// under a 4 MiB cap as read_file_bytes does with its limit.
#include "fuzz/fuzz_target.h"
#include "io/text_file.h"

EQ_FUZZ_TARGET(zstd) { eq::io::zstd_decompress(input.data(), input.size(), "fuzz.zst", 4u << 20); }
