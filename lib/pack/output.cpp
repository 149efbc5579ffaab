#include "pack/output.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <string_view>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/commit_rename.h"
#include "io/input_file.h"
#include "io/safetensors.h"
#include "pack/manifest.h"

namespace eq::pack {

namespace fs = std::filesystem;

namespace {

bool path_exists(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0;
}

std::string run_suffix() {
  std::random_device rd;
  char hex[16];
  std::snprintf(hex, sizeof hex, "%08x", static_cast<unsigned>(rd()));
  return std::to_string(::getpid()) + "-" + hex;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "<pid>" (earlier versions) or "<pid>-<8 hex digits>" (run_suffix).
bool is_run_suffix(std::string_view s) {
  const size_t dash = s.find('-');
  if (dash == std::string_view::npos) return all_digits(s);
  const std::string_view hex = s.substr(dash + 1);
  return all_digits(s.substr(0, dash)) && hex.size() == 8 &&
         std::all_of(hex.begin(), hex.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

enum class Leftover { kNone, kStaging, kAside };

// Only the exact names runs give their folders count, so that a user's own
// "OUT.old-backup" is never touched.
Leftover leftover_kind(std::string_view entry, const std::string& name) {
  if (entry.size() <= name.size() + 1 || entry.substr(0, name.size()) != name || entry[name.size()] != '.')
    return Leftover::kNone;
  const std::string_view rest = entry.substr(name.size() + 1);
  if (rest == "partial") return Leftover::kStaging;
  if (rest.starts_with("partial-") && is_run_suffix(rest.substr(8))) return Leftover::kStaging;
  if (rest.starts_with("old-") && is_run_suffix(rest.substr(4))) return Leftover::kAside;
  return Leftover::kNone;
}

// Runs while holding the lock, so no live run owns any of these folders.
void recover_leftovers(const fs::path& dir, const std::string& name, const std::string& target,
                       const std::string& marker, const std::string& staged_marker) {
  std::vector<std::string> staging, aside;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const Leftover kind = leftover_kind(e.path().filename().string(), name);
    if (kind == Leftover::kStaging) staging.push_back(e.path().string());
    if (kind == Leftover::kAside) aside.push_back(e.path().string());
  }
  if (ec) fail(ErrorKind::kIo, "cannot list " + dir.string() + ": " + ec.message());
  std::sort(aside.begin(), aside.end());
  if (!path_exists(target) && !aside.empty()) {
    // A --force commit without RENAME_EXCHANGE was killed between moving the
    // previous output aside and moving the new one in: put the previous back.
    if (std::rename(aside.back().c_str(), target.c_str()) != 0)
      fail(ErrorKind::kIo, "cannot move " + aside.back() + " back to " + target + ": " + std::strerror(errno));
    aside.pop_back();
  }
  // A commit killed before the manifest's final rename: the folder is complete
  // (the staged manifest is written last), so the rename is finished here.
  const std::string final_manifest = target + "/" + marker;
  const std::string staged_manifest = target + "/" + staged_marker;
  if (!path_exists(final_manifest) && path_exists(staged_manifest) &&
      std::rename(staged_manifest.c_str(), final_manifest.c_str()) != 0)
    fail(ErrorKind::kIo, "cannot rename " + staged_manifest + " to " + final_manifest + ": " + std::strerror(errno));
  for (const auto* list : {&staging, &aside})
    for (const auto& p : *list) {
      fs::remove_all(p, ec);
      if (ec) fail(ErrorKind::kIo, "cannot remove " + p + " (left by an interrupted run): " + ec.message());
    }
}

}  // namespace

OutputFolder::OutputFolder(const std::string& out, bool force, std::string_view marker)
    : out_(out), marker_(marker), staged_marker_(std::string(marker) + ".staged") {
  if (out.empty()) invalid("output folder: empty path");
  fs::path p = fs::absolute(out).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();  // "packed/"
  if (!p.has_filename() || p.filename() == "..") invalid("output folder " + out + ": not a folder name");
  const std::string name = p.filename().string();
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  if (ec) fail(ErrorKind::kIo, "cannot create " + p.parent_path().string() + ": " + ec.message());
  const fs::path dir = fs::canonical(p.parent_path(), ec);
  if (ec) fail(ErrorKind::kIo, "cannot resolve " + p.parent_path().string() + ": " + ec.message());
  target_ = (dir / name).string();
  lock_path_ = (dir / ("." + name + ".lock")).string();
  lock_fd_ = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) fail(ErrorKind::kIo, "cannot create the lock file " + lock_path_ + ": " + std::strerror(errno));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    ::close(lock_fd_);
    lock_fd_ = -1;
    if (e == EWOULDBLOCK)
      fail(ErrorKind::kIo, "output " + out + " is being written by another run (it holds the lock " + lock_path_ +
                               "); wait for it to finish or choose another output");
    fail(ErrorKind::kIo, "cannot lock " + lock_path_ + ": " + std::strerror(e));
  }
  try {
    recover_leftovers(dir, name, target_, marker_, staged_marker_);
    if (path_exists(target_) && !force) invalid("output " + out + " already exists (use --force to replace it)");
    for (int attempt = 0;; ++attempt) {
      const std::string staging = target_ + ".partial-" + run_suffix();
      if (::mkdir(staging.c_str(), 0755) == 0) {
        staging_ = staging;
        break;
      }
      if (errno != EEXIST || attempt == 8)
        fail(ErrorKind::kIo, "cannot create " + staging + ": " + std::strerror(errno));
    }
  } catch (...) {
    ::close(lock_fd_);
    throw;
  }
}

OutputFolder::~OutputFolder() {
  if (!committed_ && !staging_.empty()) {
    std::error_code ec;
    fs::remove_all(staging_, ec);  // best effort: the error being reported is the original one
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the lock
}

void OutputFolder::write_manifest(const Manifest& m) const {
  EQ_CHECK(marker_ == kManifestFile, "OutputFolder::write_manifest on a folder whose marker is " + marker_);
  pack::write_manifest(staging_, m, kStagedManifestFile);
}

std::string OutputFolder::staged_marker_path() const { return staging_ + "/" + staged_marker_; }

void OutputFolder::commit() {
  const std::string final_manifest = target_ + "/" + marker_;
  const std::string staged_manifest = target_ + "/" + staged_marker_;
  EQ_CHECK(path_exists(staging_ + "/" + staged_marker_), "OutputFolder::commit before the staged " + marker_);
  io::fsync_dir(staging_);
  auto failed = [&](const std::string& what, int e) {
    fail(ErrorKind::kIo, "cannot " + what + ": " + std::strerror(e) + " (" + out_ + " left as it was)");
  };
  std::string aside;  // where a replaced output went
  if (!path_exists(target_)) {
    if (!io::commit_rename(staging_, target_)) failed("rename " + staging_ + " to " + target_, errno);
    if (!io::commit_rename(staged_manifest, final_manifest)) {
      const int e = errno;
      io::undo_rename(target_, staging_);
      failed("rename " + staged_manifest + " to " + final_manifest, e);
    }
  } else {
    // The previous output stops looking like a pack first: wherever a kill
    // leaves the two folders, only OUT can hold a manifest.json (the next run
    // gives the staged manifest back its name).
    const bool hide = path_exists(final_manifest);
    if (hide && !io::commit_rename(final_manifest, staged_manifest))
      failed("rename " + final_manifest + " to " + staged_manifest, errno);
    auto unhide = [&] {
      if (hide) io::undo_rename(staged_manifest, final_manifest);
    };
    if (io::commit_exchange(staging_, target_)) {
      aside = staging_;
      if (!io::commit_rename(staged_manifest, final_manifest)) {
        const int e = errno;
        io::undo_exchange(staging_, target_);
        unhide();
        failed("rename " + staged_manifest + " to " + final_manifest, e);
      }
    } else if (io::exchange_unsupported(errno)) {
      // Two renames: OUT is missing between them; a kill there is undone by
      // the next run (recover_leftovers moves the previous output back).
      aside = target_ + ".old-" + run_suffix();
      if (!io::commit_rename(target_, aside)) {
        const int e = errno;
        unhide();
        failed("move " + target_ + " aside to " + aside, e);
      }
      if (!io::commit_rename(staging_, target_)) {
        const int e = errno;
        io::undo_rename(aside, target_);
        unhide();
        failed("rename " + staging_ + " to " + target_, e);
      }
      if (!io::commit_rename(staged_manifest, final_manifest)) {
        const int e = errno;
        io::undo_rename(target_, staging_);
        io::undo_rename(aside, target_);
        unhide();
        failed("rename " + staged_manifest + " to " + final_manifest, e);
      }
    } else {
      const int e = errno;
      unhide();
      failed("exchange " + staging_ + " and " + target_, e);
    }
  }
  committed_ = true;
  io::fsync_dir(target_);
  io::fsync_dir(fs::path(target_).parent_path().string());
  if (!aside.empty()) {
    std::error_code ec;
    fs::remove_all(aside, ec);  // the previous output; a leftover is removed by the next run
  }
}

ShardedOutput::ShardedOutput(std::string folder, std::vector<OutputTensor> tensors, int num_shards)
    : folder_(std::move(folder)), tensors_(std::move(tensors)), num_shards_(num_shards) {}

ShardedOutput::~ShardedOutput() = default;

uint64_t ShardedOutput::append(size_t index, std::span<const uint8_t> bytes) {
  const std::span<const uint8_t> one[1] = {bytes};
  return append(index, std::span<const std::span<const uint8_t>>(one));
}

uint64_t ShardedOutput::append(size_t index, std::span<const std::span<const uint8_t>> pieces) {
  EQ_CHECK(index == next_ && index < tensors_.size(), "tensors must be appended in planned order");
  const OutputTensor& t = tensors_[index];
  uint64_t size = 0;
  for (const auto& piece : pieces) size += piece.size();
  EQ_CHECK(size == t.nbytes, "tensor " + t.name + ": " + std::to_string(size) +
                                 " bytes, planned " + std::to_string(t.nbytes));
  if (open_shard_ != t.shard) {
    if (writer_) close_shard();
    open_shard_ = t.shard;
    std::vector<io::SafetensorsWriter::Decl> decls;
    for (const auto& d : tensors_)
      if (d.shard == t.shard) decls.push_back({d.name, d.dtype, d.shape});
    writer_ = std::make_unique<io::SafetensorsWriter>(folder_ + "/" + shard_file_name(t.shard, num_shards_),
                                                      std::move(decls));
    data_hash_ = std::make_unique<Xxhash64>();
  }
  writer_->append(t.name, pieces);
  Xxhash64 tensor_hash;
  for (const auto& piece : pieces) {
    data_hash_->update(piece);
    tensor_hash.update(piece);
  }
  ++next_;
  if (next_ == tensors_.size() || tensors_[next_].shard != t.shard) close_shard();
  return tensor_hash.digest();
}

void ShardedOutput::close_shard() {
  writer_->finish();
  writer_.reset();
  ManifestShard s;
  s.file = shard_file_name(open_shard_, num_shards_);
  const std::string path = folder_ + "/" + s.file;
  // The header is hashed from the file itself: the data hash covers the rest.
  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  unsigned char len[8];
  if (!in.read(reinterpret_cast<char*>(len), 8)) fail(ErrorKind::kIo, path + ": cannot read back the header");
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  std::string header(8 + n, '\0');
  std::memcpy(header.data(), len, 8);
  if (!in.read(header.data() + 8, std::streamsize(n))) fail(ErrorKind::kIo, path + ": cannot read back the header");
  s.header_bytes = 8 + n;
  s.header_xxh64 = xxhash64(header);
  s.data_xxh64 = data_hash_->digest();
  s.file_bytes = fs::file_size(path);
  shards_.push_back(std::move(s));
  open_shard_ = -1;
}

std::vector<ManifestShard> ShardedOutput::finish() {
  EQ_CHECK(next_ == tensors_.size(), "ShardedOutput::finish before every tensor was appended");
  if (tensors_.empty()) {  // a part with no tensors still gets a valid (empty) shard
    io::SafetensorsWriter w(folder_ + "/" + shard_file_name(0, 1), {});
    w.finish();
    ManifestShard s;
    s.file = shard_file_name(0, 1);
    const std::string path = folder_ + "/" + s.file;
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    s.header_bytes = ss.str().size();
    s.header_xxh64 = xxhash64(ss.str());
    s.data_xxh64 = Xxhash64().digest();
    s.file_bytes = s.header_bytes;
    shards_.push_back(s);
  }
  nlohmann::ordered_json index;
  uint64_t total = 0;
  for (const auto& t : tensors_) total += t.nbytes;
  index["metadata"] = {{"total_size", total}};
  nlohmann::ordered_json map = nlohmann::ordered_json::object();
  for (const auto& t : tensors_) map[t.name] = shard_file_name(t.shard, num_shards_);
  index["weight_map"] = map;
  io::write_file_atomic(folder_ + "/model.safetensors.index.json", index.dump(2) + "\n");
  return shards_;
}

void write_packed_config(const std::string& source_folder, const std::string& out_folder) {
  const std::string path = source_folder + "/config.json";
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorKind::kIo, path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(ss.str());
  } catch (const std::exception& e) {
    invalid(path + ": not valid JSON: " + e.what());
  }
  j["quantization"] = {{"quant_method", "expertquant"},
                       {"manifest", std::string(kManifestFile)},
                       {"manifest_version", kManifestVersion}};
  io::write_file_atomic(out_folder + "/config.json", j.dump(2) + "\n");
}

void copy_side_files(const std::string& source_folder, const std::string& out_folder) {
  for (const char* name : side_file_names()) {
    const fs::path src = fs::path(source_folder) / name;
    if (!io::optional_input_present(src.string())) continue;  // a FIFO or folder there is refused
    std::ifstream in(src, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    if (!in.good() && !in.eof()) fail(ErrorKind::kIo, src.string() + ": cannot read");
    io::write_file_atomic(out_folder + "/" + name, ss.str());
  }
}

void write_manifest(const std::string& folder, const Manifest& m, std::string_view file_name) {
  // The top level is built without the big arrays, which are then emitted one
  // element at a time: peak memory is one layer's JSON, not the whole manifest.
  Manifest head = m;
  head.tensors.clear();
  head.layers.clear();
  nlohmann::ordered_json top = manifest_to_json(head);
  std::string text = "{\n";
  bool first_key = true;
  auto key = [&](const std::string& k) {
    text += first_key ? "  \"" : ",\n  \"";
    text += k + "\": ";
    first_key = false;
  };
  const std::string path = folder + "/" + std::string(file_name);
  const std::string tmp = path + ".tmp";
  const int fd = io::create_file(tmp);
  auto flush = [&] {
    io::write_all(fd, text.data(), text.size(), tmp);
    text.clear();
  };
  try {
    for (auto it = top.begin(); it != top.end(); ++it) {
      if (it.key() == "tensors" || it.key() == "layers") {
        key(it.key());
        text += "[";
        const bool tensors = it.key() == "tensors";
        const size_t n = tensors ? m.tensors.size() : m.layers.size();
        for (size_t i = 0; i < n; ++i) {
          const nlohmann::ordered_json e =
              tensors ? nlohmann::ordered_json(m.tensors[i]) : nlohmann::ordered_json(m.layers[i]);
          text += (i ? ",\n    " : "\n    ") + e.dump();
          flush();
        }
        text += n ? "\n  ]" : "]";
      } else {
        key(it.key());
        text += it.value().dump();
      }
    }
    text += "\n}\n";
    flush();
  } catch (...) {
    // No half-written manifest.json.tmp left behind, no leaked descriptor.
    ::close(fd);
    std::remove(tmp.c_str());
    throw;
  }
  io::commit_file(fd, tmp, path);
}

}  // namespace eq::pack
