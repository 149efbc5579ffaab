#include "pack/output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"

namespace eq::pack {

namespace fs = std::filesystem;

std::string begin_output(const std::string& out, bool force) {
  if (out.empty()) invalid("output folder: empty path");
  std::error_code ec;
  if (fs::exists(out, ec) && !force)
    invalid("output " + out + " already exists (use --force to replace it)");
  const std::string partial = out + ".partial";
  // A leftover from an interrupted run holds nothing worth keeping.
  fs::remove_all(partial, ec);
  if (ec) fail(ErrorKind::kIo, "cannot remove stale " + partial + ": " + ec.message());
  fs::create_directories(partial, ec);
  if (ec) fail(ErrorKind::kIo, "cannot create " + partial + ": " + ec.message());
  return partial;
}

void commit_output(const std::string& partial, const std::string& out) {
  io::fsync_dir(partial);
  std::error_code ec;
  std::string old;
  if (fs::exists(out, ec)) {
    old = out + ".old-" + std::to_string(::getpid());
    fs::rename(out, old, ec);
    if (ec) fail(ErrorKind::kIo, "cannot move existing " + out + " aside: " + ec.message());
  }
  fs::rename(partial, out, ec);
  if (ec) {
    // Put the previous output back: a failed run must leave it as it was.
    std::error_code restore_ec;
    if (!old.empty()) fs::rename(old, out, restore_ec);
    fail(ErrorKind::kIo, "cannot rename " + partial + " to " + out + ": " + ec.message());
  }
  fs::path parent = fs::absolute(out).parent_path();
  io::fsync_dir(parent.string());
  if (!old.empty()) fs::remove_all(old, ec);
}

PartialOutputGuard::~PartialOutputGuard() {
  std::error_code ec;
  fs::remove_all(partial_, ec);  // best effort: the error being reported is the original one
}

ShardedOutput::ShardedOutput(std::string folder, std::vector<OutputTensor> tensors, int num_shards)
    : folder_(std::move(folder)), tensors_(std::move(tensors)), num_shards_(num_shards) {}

ShardedOutput::~ShardedOutput() = default;

uint64_t ShardedOutput::append(size_t index, std::span<const uint8_t> bytes) {
  EQ_CHECK(index == next_ && index < tensors_.size(), "tensors must be appended in planned order");
  const OutputTensor& t = tensors_[index];
  EQ_CHECK(bytes.size() == t.nbytes, "tensor " + t.name + ": " + std::to_string(bytes.size()) +
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
  writer_->append(t.name, bytes);
  data_hash_->update(bytes);
  ++next_;
  if (next_ == tensors_.size() || tensors_[next_].shard != t.shard) close_shard();
  return xxhash64(bytes);
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
  static const char* kNames[] = {"generation_config.json", "tokenizer.json",   "tokenizer_config.json",
                                 "tokenizer.model",        "special_tokens_map.json", "vocab.json",
                                 "merges.txt",             "added_tokens.json", "chat_template.jinja"};
  for (const char* name : kNames) {
    const fs::path src = fs::path(source_folder) / name;
    std::error_code ec;
    if (!fs::is_regular_file(src, ec)) continue;
    std::ifstream in(src, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    if (!in.good() && !in.eof()) fail(ErrorKind::kIo, src.string() + ": cannot read");
    io::write_file_atomic(out_folder + "/" + name, ss.str());
  }
}

void write_manifest(const std::string& folder, const Manifest& m) {
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
  const std::string path = folder + "/" + std::string(kManifestFile);
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
        Manifest one = head;
        const size_t n = it.key() == "tensors" ? m.tensors.size() : m.layers.size();
        for (size_t i = 0; i < n; ++i) {
          one.tensors.clear();
          one.layers.clear();
          if (it.key() == "tensors") one.tensors.push_back(m.tensors[i]);
          else one.layers.push_back(m.layers[i]);
          text += (i ? ",\n    " : "\n    ") + manifest_to_json(one)[it.key()][0].dump();
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
