#include "io/tokens.h"

#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/checked_math.h"
#include "core/error.h"
#include "io/input_file.h"
#include "io/json_guard.h"

namespace eq::io {
namespace {

std::string read_file(const std::string& path) {
  InputFile in(path);
  const uint64_t size = in.size();
  if (size > kMaxTokenFileBytes)
    fail(ErrorKind::kResource, path + ": token file of " + std::to_string(size) + " bytes exceeds the limit of " +
                                   std::to_string(kMaxTokenFileBytes) + " (split it into several files)");
  std::string s(size_t(size), '\0');
  s.resize(in.read_full(s.data(), s.size()));
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

// `where` describes the position; it is only called to build an error
// message (formatting it for every id would dominate the parse).
// `v` holds an int64 or uint64 exactly (64-bit mantissa).
template <typename Where>
int32_t checked_id(long double v, const std::string& label, Where&& where) {
  if (v < 0 || v > std::numeric_limits<int32_t>::max()) {
    // Above 2^63 a cast to long long is undefined: format by sign.
    const std::string id = v < 0 ? std::to_string(static_cast<long long>(v))
                                 : std::to_string(static_cast<unsigned long long>(v));
    invalid(label + ": token id " + id + " at " + where() + " is outside [0, 2^31)");
  }
  return static_cast<int32_t>(v);
}

std::vector<int32_t> json_row(const nlohmann::json& a, const std::string& label, const std::string& prefix) {
  std::vector<int32_t> out;
  out.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const auto& v = a[i];
    auto where = [&] { return prefix + "[" + std::to_string(i) + "]"; };
    if (!v.is_number_integer())
      invalid(label + ": element " + where() + " is not an integer token id (" + std::string(v.type_name()) + ")");
    if (v.is_number_unsigned())
      out.push_back(checked_id(static_cast<long double>(v.get<uint64_t>()), label, where));
    else
      out.push_back(checked_id(static_cast<long double>(v.get<int64_t>()), label, where));
  }
  return out;
}

TokenSequences parse_json(std::string_view bytes, const std::string& label) {
  check_json_depth(bytes, label);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(bytes.begin(), bytes.end());
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a number like 1e400
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

// The .npy header is a Python dict literal, e.g.
//   {'descr': '<i4', 'fortran_order': False, 'shape': (2, 512), }
// Returns the text after "'<key>':" (spaces skipped), or nullopt. A small
// scanner rather than std::regex: libstdc++'s regex recurses per character
// and overflows the stack on long headers.
std::optional<std::string_view> npy_field(std::string_view header, std::string_view key) {
  const std::string quoted = "'" + std::string(key) + "'";
  size_t at = header.find(quoted);
  if (at == std::string_view::npos) return std::nullopt;
  at += quoted.size();
  while (at < header.size() && (header[at] == ' ' || header[at] == '\t')) ++at;
  if (at >= header.size() || header[at] != ':') return std::nullopt;
  ++at;
  while (at < header.size() && (header[at] == ' ' || header[at] == '\t')) ++at;
  return header.substr(at);
}

// "2, 512" or "512," or "" -> dimensions; rejects anything but digits,
// spaces and commas, and dimensions of more than 18 digits.
std::vector<uint64_t> parse_npy_shape(std::string_view text, const std::string& label) {
  std::vector<uint64_t> dims;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    if (i == text.size()) break;
    if (text[i] < '0' || text[i] > '9') invalid(label + ": .npy shape '" + std::string(text) + "' is not a tuple of integers");
    uint64_t v = 0;
    int digits = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      if (++digits > 18) invalid(label + ": .npy shape dimension too large");
      v = v * 10 + static_cast<uint64_t>(text[i] - '0');
      ++i;
    }
    dims.push_back(v);
    if (dims.size() > 8) invalid(label + ": .npy shape has too many dimensions");
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    if (i < text.size()) {
      if (text[i] != ',') invalid(label + ": .npy shape '" + std::string(text) + "' is not a tuple of integers");
      ++i;
    }
  }
  return dims;
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
  const std::string_view header = bytes.substr(header_at, header_len);
  const auto descr = npy_field(header, "descr");
  if (!descr || descr->size() < 2 || descr->front() != '\'' || descr->find('\'', 1) == std::string_view::npos)
    invalid(label + ": .npy header has no 'descr'");
  const std::string dtype(descr->substr(1, descr->find('\'', 1) - 1));
  const auto fortran = npy_field(header, "fortran_order");
  if (fortran && fortran->substr(0, 4) == "True")
    unsupported(label + ": Fortran-ordered .npy arrays are not supported (save with C order)");
  const auto shape_text = npy_field(header, "shape");
  if (!shape_text || shape_text->empty() || shape_text->front() != '(' ||
      shape_text->find(')') == std::string_view::npos)
    invalid(label + ": .npy header has no 'shape'");
  const std::vector<uint64_t> shape = parse_npy_shape(shape_text->substr(1, shape_text->find(')') - 1), label);
  if (shape.empty() || shape.size() > 2)
    invalid(label + ": .npy token arrays must be 1-D or 2-D, got " + std::to_string(shape.size()) + "-D");

  int width = 0;
  bool is_signed = true;
  if (dtype == "<i4") width = 4;
  else if (dtype == "<i8") width = 8;
  else if (dtype == "<u4") width = 4, is_signed = false;
  else if (dtype == "<i2") width = 2;
  else if (dtype == "<u2") width = 2, is_signed = false;
  else if (dtype == "|u1" || dtype == "<u1") width = 1, is_signed = false;
  else unsupported(label + ": .npy dtype '" + dtype + "' is not a supported token id type (int32, int64, uint8/16/32, int16; little-endian)");

  const uint64_t rows = shape.size() == 2 ? shape[0] : 1, cols = shape.size() == 2 ? shape[1] : shape[0];
  const std::string_view data = bytes.substr(header_at + header_len);
  // The shape is checked against the bytes actually present before anything
  // is sized from it: a header may claim billions of tokens.
  const auto count = checked_mul(rows, cols);
  const auto nbytes = count ? checked_mul(*count, static_cast<uint64_t>(width)) : std::nullopt;
  if (!nbytes || *nbytes != data.size())
    invalid(label + ": .npy data holds " + std::to_string(data.size()) + " bytes, shape (" + std::to_string(rows) +
            (shape.size() == 2 ? ", " + std::to_string(cols) : std::string(",")) + ") of " + dtype + " implies " +
            (nbytes ? std::to_string(*nbytes) : std::string("more than 2^64")));
  if (cols == 0 && rows > 1)  // zero bytes of data, but as many vectors as the header says
    invalid(label + ": .npy shape declares " + std::to_string(rows) + " empty sequences");
  TokenSequences t;
  t.sequences.resize(rows);
  for (uint64_t r = 0; r < rows; ++r) {
    auto& seq = t.sequences[r];
    seq.resize(cols);
    for (uint64_t c = 0; c < cols; ++c) {
      const char* p = data.data() + (r * cols + c) * width;
      long double v = 0;
      switch (width) {
        case 1: v = static_cast<uint8_t>(*p); break;
        case 2: v = is_signed ? load_le<int16_t>(p) : load_le<uint16_t>(p); break;
        case 4: v = is_signed ? load_le<int32_t>(p) : load_le<uint32_t>(p); break;
        case 8: v = static_cast<long double>(load_le<int64_t>(p)); break;
      }
      auto where = [&] {
        return shape.size() == 2 ? "[" + std::to_string(r) + "][" + std::to_string(c) + "]"
                                 : "[" + std::to_string(c) + "]";
      };
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
    seq[i] = checked_id(v, label, [&] {
      return "index " + std::to_string(i) + " (byte offset " + std::to_string(4 * i) + ")";
    });
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


bool names_token_file(std::string_view path) {
  for (std::string_view ext : {".json", ".npy", ".u32", ".bin", ".i32"})
    if (path.ends_with(ext)) return true;
  return false;
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
