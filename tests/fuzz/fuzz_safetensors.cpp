// safetensors: the whole file (length prefix, JSON header, data buffer) as it
// is validated when a checkpoint shard is opened.
#include "fuzz/fuzz_target.h"
#include "io/safetensors.h"

EQ_FUZZ_TARGET(safetensors) { eq::io::SafetensorsFile::validate_buffer(input, "fuzz.safetensors"); }
