// zstd streams (compressed corpora, sidecars), decompressed by zstd_decompress
// under a 1 MiB cap. A bomb costs work up to the cap on every input, so the
// cap is kept small: it exercises the same limit check as read_file_bytes'
// large default, at a quarter of the cost per input of the 4 MiB used before.
#include "fuzz/fuzz_target.h"
#include "io/text_file.h"

EQ_FUZZ_TARGET(zstd) { eq::io::zstd_decompress(input.data(), input.size(), "fuzz.zst", 1u << 20); }
