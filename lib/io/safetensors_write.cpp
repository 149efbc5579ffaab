// safetensors writer: header first (padded with spaces so the data buffer
// starts 8-aligned), tensors in declaration order, temporary name, fsync,
// rename. A failed or abandoned write removes its temporary file.
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "core/checked_math.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"

namespace eq::io {

namespace {

// Builds the header bytes (length prefix included) for `decls` laid out back to back.
std::string build_header(const std::vector<SafetensorsWriter::Decl>& decls,
                         const std::map<std::string, std::string>& metadata, const std::string& path) {
  nlohmann::ordered_json h;
  nlohmann::ordered_json meta = nlohmann::ordered_json::object();
  meta["format"] = "pt";
  for (const auto& [k, v] : metadata) meta[k] = v;
  h["__metadata__"] = meta;
  uint64_t offset = 0;
  std::set<std::string> names;
  for (const auto& d : decls) {
    if (d.name == "__metadata__" || d.name.empty()) invalid(path + ": invalid tensor name '" + d.name + "'");
    if (!names.insert(d.name).second) invalid(path + ": tensor '" + d.name + "' declared twice");
    auto numel = checked_numel(d.shape);
    std::optional<uint64_t> nbytes;
    if (numel) nbytes = checked_mul(*numel, dtype_size(d.dtype));
    if (!nbytes) invalid(path + ": tensor '" + d.name + "' shape overflows");
    nlohmann::ordered_json e;
    e["dtype"] = std::string(dtype_name(d.dtype));
    e["shape"] = d.shape;
    e["data_offsets"] = {offset, offset + *nbytes};
    h[d.name] = e;
    offset += *nbytes;
  }
  std::string text = h.dump();
  const size_t padded = (8 + text.size() + 7) / 8 * 8 - 8;
  text.append(padded - text.size(), ' ');
  std::string out(8, '\0');
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + text;
}

uint64_t decl_bytes(const SafetensorsWriter::Decl& d) {
  return checked_numel(d.shape).value_or(0) * dtype_size(d.dtype);
}

}  // namespace

SafetensorsWriter::SafetensorsWriter(std::string path, std::vector<Decl> decls,
                                     std::map<std::string, std::string> metadata)
    : path_(std::move(path)), tmp_path_(path_ + ".tmp"), decls_(std::move(decls)) {
  const std::string header = build_header(decls_, metadata, path_);
  fd_ = create_file(tmp_path_);
  try {
    write_all(fd_, header.data(), header.size(), tmp_path_);
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    std::remove(tmp_path_.c_str());
    throw;
  }
}

SafetensorsWriter::~SafetensorsWriter() {
  if (!finished_) {
    if (fd_ >= 0) ::close(fd_);
    std::remove(tmp_path_.c_str());
  }
}

void SafetensorsWriter::append(std::string_view name, std::span<const uint8_t> bytes) {
  const std::span<const uint8_t> one[1] = {bytes};
  append(name, std::span<const std::span<const uint8_t>>(one));
}

void SafetensorsWriter::append(std::string_view name, std::span<const std::span<const uint8_t>> pieces) {
  uint64_t size = 0;
  for (const auto& piece : pieces) size += piece.size();
  if (finished_ || fd_ < 0) fail(ErrorKind::kInternal, path_ + ": append after finish");
  if (next_ >= decls_.size())
    fail(ErrorKind::kInternal, path_ + ": tensor '" + std::string(name) + "' was not declared");
  const Decl& d = decls_[next_];
  if (d.name != name)
    fail(ErrorKind::kInternal, path_ + ": expected tensor '" + d.name + "' next, got '" + std::string(name) + "'");
  if (size != decl_bytes(d))
    fail(ErrorKind::kInternal, path_ + ": tensor '" + d.name + "' has " + std::to_string(size) +
                                   " bytes, declared " + std::to_string(decl_bytes(d)));
  for (const auto& piece : pieces) write_all(fd_, piece.data(), piece.size(), tmp_path_);
  ++next_;
}

void SafetensorsWriter::finish() {
  if (next_ != decls_.size())
    fail(ErrorKind::kInternal, path_ + ": tensor '" + decls_[next_].name + "' declared but never written");
  int fd = fd_;
  fd_ = -1;
  commit_file(fd, tmp_path_, path_);
  finished_ = true;
}

void write_safetensors(const std::string& path, std::span<const TensorToWrite> tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsWriter::Decl> decls;
  for (const auto& t : tensors) decls.push_back({t.name, t.dtype, t.shape});
  SafetensorsWriter w(path, std::move(decls), metadata);
  for (const auto& t : tensors) w.append(t.name, t.data);
  w.finish();
}

}  // namespace eq::io
