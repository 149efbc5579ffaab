#include "io/tokens.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace eq::io {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorKind::kIo, "cannot open token file " + path);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail(ErrorKind::kIo, "error reading " + path);
  return s;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

constexpr std::string_view kNpyMagic("\x93NUMPY", 6);

TokenFileFormat detect(const std::string& path, std::string_view bytes) {
  if (ends_with(path, ".json")) return TokenFileFormat::kJson;
  if (ends_with(path, ".npy")) return TokenFileFormat::kNpy;
  if (ends_with(path, ".u32") || ends_with(path, ".bin")) return TokenFileFormat::kU32;
  if (ends_with(path, ".i32")) return TokenFileFormat::kI32;
  if (bytes.substr(0, kNpyMagic.size()) == kNpyMagic) return TokenFileFormat::kNpy;
  for (char ch : bytes) {
    if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t') continue;
    if (ch == '[' || ch == '{') return TokenFileFormat::kJson;
    break;
  }
  invalid(path + ": cannot tell the token file format from its name or content; pass --tokens-format "
                 "json|npy|u32|i32");
}

int32_t checked_id(long double v, const std::string& label, const std::string& where) {
  if (v < 0 || v > std::numeric_limits<int32_t>::max())
    invalid(label + ": token id " + std::to_string(static_cast<long long>(v)) + " at " + where +
            " is outside [0, 2^31)");
  return static_cast<int32_t>(v);
}

std::vector<int32_t> json_row(const nlohmann::json& a, const std::string& label, const std::string& prefix) {
  std::vector<int32_t> out;
  out.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const auto& v = a[i];
    const std::string where = prefix + "[" + std::to_string(i) + "]";
    if (!v.is_number_integer())
      invalid(label + ": element " + where + " is not an integer token id (" + std::string(v.type_name()) + ")");
    if (v.is_number_unsigned())
      out.push_back(checked_id(static_cast<long double>(v.get<uint64_t>()), label, where));
    else
      out.push_back(checked_id(static_cast<long double>(v.get<int64_t>()), label, where));
  }
  return out;
}

TokenSequences parse_json(std::string_view bytes, const std::string& label) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(bytes.begin(), bytes.end());
  } catch (const nlohmann::json::parse_error& e) {
    invalid(label + ": invalid JSON token file (" + e.what() + ")");
  }
  if (j.is_object()) {
    if (j.contains("tokens")) j = j["tokens"];
    else if (j.contains("input_ids")) j = j["input_ids"];
    else invalid(label + ": JSON object without a \"tokens\" or \"input_ids\" array");
  }
  if (!j.is_array()) invalid(label + ": JSON token file must hold an array of ids or of id arrays");
  TokenSequences t;
  if (!j.empty() && j[0].is_array()) {
    for (size_t s = 0; s < j.size(); ++s) {
      if (!j[s].is_array())
        invalid(label + ": element [" + std::to_string(s) + "] is not an array (nested files need one array per sequence)");
      t.sequences.push_back(json_row(j[s], label, "[" + std::to_string(s) + "]"));
    }
  } else {
    t.sequences.push_back(json_row(j, label, ""));
  }
  return t;
}

template <typename T>
T load_le(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));  // x86-64 is little-endian
  return v;
}

TokenSequences parse_npy(std::string_view bytes, const std::string& label) {
  if (bytes.size() < 10 || bytes.substr(0, 6) != kNpyMagic) invalid(label + ": not a .npy file (bad magic)");
  const uint8_t major = static_cast<uint8_t>(bytes[6]);
  size_t header_len, header_at;
  if (major == 1) {
    header_len = load_le<uint16_t>(bytes.data() + 8);
    header_at = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) invalid(label + ": truncated .npy header");
    header_len = load_le<uint32_t>(bytes.data() + 8);
    header_at = 12;
  } else {
    unsupported(label + ": .npy format version " + std::to_string(major) + " is not supported");
  }
  if (header_at + header_len > bytes.size()) invalid(label + ": truncated .npy header");
  const std::string header(bytes.substr(header_at, header_len));
  std::smatch m;
  if (!std::regex_search(header, m, std::regex(R"('descr'\s*:\s*'([^']*)')")))
    invalid(label + ": .npy header has no 'descr'");
  const std::string descr = m[1];
  if (std::regex_search(header, std::regex(R"('fortran_order'\s*:\s*True)")))
    unsupported(label + ": Fortran-ordered .npy arrays are not supported (save with C order)");
  if (!std::regex_search(header, m, std::regex(R"('shape'\s*:\s*\(([^)]*)\))")))
    invalid(label + ": .npy header has no 'shape'");
  std::vector<int64_t> shape;
  {
    std::stringstream ss(m[1].str());
    std::string item;
    while (std::getline(ss, item, ','))
      if (item.find_first_not_of(" \t") != std::string::npos) shape.push_back(std::stoll(item));
  }
  if (shape.empty() || shape.size() > 2)
    invalid(label + ": .npy token arrays must be 1-D or 2-D, got " + std::to_string(shape.size()) + "-D");

  int width = 0;
  bool is_signed = true;
  if (descr == "<i4") width = 4;
  else if (descr == "<i8") width = 8;
  else if (descr == "<u4") width = 4, is_signed = false;
  else if (descr == "<i2") width = 2;
  else if (descr == "<u2") width = 2, is_signed = false;
  else if (descr == "|u1" || descr == "<u1") width = 1, is_signed = false;
  else unsupported(label + ": .npy dtype '" + descr + "' is not a supported token id type (int32, int64, uint8/16/32, int16; little-endian)");

  const int64_t rows = shape.size() == 2 ? shape[0] : 1, cols = shape.size() == 2 ? shape[1] : shape[0];
  const std::string_view data = bytes.substr(header_at + header_len);
  if (static_cast<uint64_t>(rows) * cols * width != data.size())
    invalid(label + ": .npy data holds " + std::to_string(data.size()) + " bytes, shape implies " +
            std::to_string(rows * cols * width));
  TokenSequences t;
  t.sequences.resize(rows);
  for (int64_t r = 0; r < rows; ++r) {
    auto& seq = t.sequences[r];
    seq.resize(cols);
    for (int64_t c = 0; c < cols; ++c) {
      const char* p = data.data() + (r * cols + c) * width;
      long double v = 0;
      switch (width) {
        case 1: v = static_cast<uint8_t>(*p); break;
        case 2: v = is_signed ? load_le<int16_t>(p) : load_le<uint16_t>(p); break;
        case 4: v = is_signed ? load_le<int32_t>(p) : load_le<uint32_t>(p); break;
        case 8: v = static_cast<long double>(load_le<int64_t>(p)); break;
      }
      const std::string where = shape.size() == 2 ? "[" + std::to_string(r) + "][" + std::to_string(c) + "]"
                                                  : "[" + std::to_string(c) + "]";
      seq[c] = checked_id(v, label, where);
    }
  }
  return t;
}

TokenSequences parse_raw(std::string_view bytes, bool is_signed, const std::string& label) {
  if (bytes.size() % 4 != 0)
    invalid(label + ": raw " + std::string(is_signed ? "i32" : "u32") + " token file size " +
            std::to_string(bytes.size()) + " is not a multiple of 4");
  TokenSequences t;
  auto& seq = t.sequences.emplace_back();
  seq.resize(bytes.size() / 4);
  for (size_t i = 0; i < seq.size(); ++i) {
    const char* p = bytes.data() + 4 * i;
    const long double v = is_signed ? load_le<int32_t>(p) : load_le<uint32_t>(p);
    seq[i] = checked_id(v, label, "index " + std::to_string(i) + " (byte offset " + std::to_string(4 * i) + ")");
  }
  return t;
}

}  // namespace

std::optional<TokenFileFormat> parse_token_file_format(std::string_view name) {
  if (name == "auto") return TokenFileFormat::kAuto;
  if (name == "json") return TokenFileFormat::kJson;
  if (name == "npy") return TokenFileFormat::kNpy;
  if (name == "u32") return TokenFileFormat::kU32;
  if (name == "i32") return TokenFileFormat::kI32;
  return std::nullopt;
}

std::string_view token_file_format_name(TokenFileFormat f) {
  switch (f) {
    case TokenFileFormat::kAuto: return "auto";
    case TokenFileFormat::kJson: return "json";
    case TokenFileFormat::kNpy: return "npy";
    case TokenFileFormat::kU32: return "u32";
    case TokenFileFormat::kI32: return "i32";
  }
  return "?";
}

int64_t TokenSequences::total() const {
  int64_t n = 0;
  for (const auto& s : sequences) n += static_cast<int64_t>(s.size());
  return n;
}

TokenSequences parse_token_buffer(std::string_view bytes, TokenFileFormat format, const std::string& label) {
  if (format == TokenFileFormat::kAuto) format = detect(label, bytes);
  switch (format) {
    case TokenFileFormat::kJson: return parse_json(bytes, label);
    case TokenFileFormat::kNpy: return parse_npy(bytes, label);
    case TokenFileFormat::kU32: return parse_raw(bytes, false, label);
    case TokenFileFormat::kI32: return parse_raw(bytes, true, label);
    case TokenFileFormat::kAuto: break;
  }
  EQ_CHECK(false, "unreachable token format");
}

TokenSequences read_token_file(const std::string& path, TokenFileFormat format) {
  const std::string bytes = read_file(path);
  return parse_token_buffer(bytes, format, path);
}

std::vector<int32_t> bytes_to_tokens(std::string_view text) {
  std::vector<int32_t> t(text.size());
  for (size_t i = 0; i < text.size(); ++i) t[i] = static_cast<uint8_t>(text[i]);
  return t;
}

std::vector<int32_t> read_text_tokens(const std::string& path, int64_t vocab_size) {
  if (vocab_size != 256)
    invalid(path + ": plain text needs a byte-level model (vocabulary of 256); this model's vocabulary is " +
            std::to_string(vocab_size) + " tokens: tokenize the text and pass token ids with --tokens");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorKind::kIo, "cannot open text file " + path);
  const std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return bytes_to_tokens(s);
}

void check_token_range(const TokenSequences& tokens, int64_t vocab_size, const std::string& label) {
  for (size_t s = 0; s < tokens.sequences.size(); ++s) {
    const auto& seq = tokens.sequences[s];
    for (size_t i = 0; i < seq.size(); ++i)
      if (seq[i] < 0 || seq[i] >= vocab_size)
        invalid(label + ": token id " + std::to_string(seq[i]) + " at sequence " + std::to_string(s) +
                ", position " + std::to_string(i) + " is outside the model's vocabulary [0, " +
                std::to_string(vocab_size) + ")");
  }
}

}  // namespace eq::io
