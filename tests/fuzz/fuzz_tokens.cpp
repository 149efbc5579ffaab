// Token files. The first input byte picks the format as --tokens-format does
// (0 auto-detect from content, 1 json, 2 npy, 3 u32, 4 i32); the rest is the file.
#include <string_view>

#include "fuzz/fuzz_target.h"
#include "io/tokens.h"

EQ_FUZZ_TARGET(tokens) {
  if (input.empty()) return;
  using eq::io::TokenFileFormat;
  static constexpr TokenFileFormat kFormats[] = {TokenFileFormat::kAuto, TokenFileFormat::kJson,
                                                 TokenFileFormat::kNpy, TokenFileFormat::kU32,
                                                 TokenFileFormat::kI32};
  const TokenFileFormat format = kFormats[input[0] % 5];
  const std::string_view bytes(reinterpret_cast<const char*>(input.data() + 1), input.size() - 1);
  const auto tokens = eq::io::parse_token_buffer(bytes, format, "fuzz-tokens");
  eq::io::check_token_range(tokens, 256, "fuzz-tokens");
}
