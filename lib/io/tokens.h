// Token-id files, the token inputs of forward passes besides text (text is
// encoded by the model's tokenizer: tokenizer/text_documents.h).
//   json: a flat array of ids (one sequence) or an array of arrays (one per
//         sequence); an object {"tokens": ...} or {"input_ids": ...} also works.
//   npy:  int32/int64 (also uint8/int16/uint16/uint32), little-endian, C order,
//         1-D (one sequence) or 2-D (one row per sequence).
//   u32 / i32: raw little-endian 4-byte ids, one sequence.
// Errors name the file and the position of the offending value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace eq::io {

enum class TokenFileFormat { kAuto, kJson, kNpy, kU32, kI32 };

// "auto", "json", "npy", "u32", "i32"; nullopt otherwise.
std::optional<TokenFileFormat> parse_token_file_format(std::string_view name);

struct TokenSequences {
  std::vector<std::vector<int32_t>> sequences;
  int64_t total() const;
};

// A token file larger than this is refused before it is read (2^30 int32 ids;
// split bigger inputs into several files).
inline constexpr uint64_t kMaxTokenFileBytes = 4ull << 30;

// kAuto picks by extension (.json, .npy, .u32/.bin, .i32), else by content
// (NumPy magic, or '[' / '{' for JSON) and otherwise asks for --tokens-format.
TokenSequences read_token_file(const std::string& path, TokenFileFormat format = TokenFileFormat::kAuto);
// Parses an in-memory buffer; `label` names it in errors.
TokenSequences parse_token_buffer(std::string_view bytes, TokenFileFormat format, const std::string& label);

// Bytes of `text` as token ids 0..255.
std::vector<int32_t> bytes_to_tokens(std::string_view text);
// True when the file name says token ids (.json, .npy, .u32, .bin, .i32):
// inputs that take text or ids (profile --calib) read any other name as text.
bool names_token_file(std::string_view path);

// Throws eq::Error naming `label`, the sequence and position of the first id
// outside [0, vocab_size).
void check_token_range(const TokenSequences& tokens, int64_t vocab_size, const std::string& label);

}  // namespace eq::io
