// Strict safetensors reader. Every rule of the format is checked here, once,
// at open time; afterwards views are plain pointers into the mapping.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/checked_math.h"
#include "core/error.h"
#include "core/numeric.h"
#include "io/json_guard.h"
#include "io/safetensors.h"
#include "io/text_file.h"

namespace eq::io {

using nlohmann::json;

uint64_t TensorInfo::numel() const { return checked_numel(shape).value_or(0); }

std::vector<float> TensorView::to_f32() const {
  std::vector<float> out(info->numel());
  to_f32(out.data());
  return out;
}

void TensorView::to_f32(float* dst) const {
  if (!dtype_is_float(info->dtype))
    invalid("tensor '" + info->name + "': dtype " + std::string(dtype_name(info->dtype)) +
            " cannot be converted to float32");
  convert_to_f32(info->dtype, data, dst, info->numel());
}

namespace {

[[noreturn]] void bad(const std::string& label, const std::string& what) {
  invalid(label + ": invalid safetensors: " + what);
}

// Parses the header JSON, rejecting duplicate top-level names (nlohmann would
// silently keep the last one).
json parse_header(std::span<const uint8_t> header, const std::string& label) {
  std::string_view text(reinterpret_cast<const char*>(header.data()), header.size());
  if (text.empty() || text[0] != '{') bad(label, "header does not start with '{'");
  if (text.find('\0') != std::string_view::npos) bad(label, "header contains a NUL byte");
  check_json_depth(text, label);
  std::string duplicate;
  std::set<std::string> seen;
  json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1) {
      const auto& k = parsed.get_ref<const std::string&>();
      if (!seen.insert(k).second && duplicate.empty()) duplicate = k;
    }
    return true;
  };
  json j;
  try {
    j = json::parse(text.begin(), text.end(), cb);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e400
    bad(label, std::string("header is not valid UTF-8 JSON: ") + e.what());
  }
  if (!duplicate.empty()) bad(label, "tensor name '" + duplicate + "' appears twice in the header");
  if (!j.is_object()) bad(label, "header is not a JSON object");
  return j;
}

struct ParsedHeader {
  std::vector<TensorInfo> tensors;  // sorted by offset
  std::map<std::string, std::string> metadata;
};

ParsedHeader parse_and_validate(std::span<const uint8_t> file, const std::string& label,
                                uint64_t* header_bytes_out) {
  if (file.size() < 8) bad(label, "file is " + std::to_string(file.size()) + " bytes, shorter than the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | file[static_cast<size_t>(i)];
  if (n > kMaxHeaderBytes)
    bad(label, "header length " + std::to_string(n) + " exceeds the 100,000,000-byte limit");
  if (n > file.size() - 8)
    bad(label, "header length " + std::to_string(n) + " runs past the end of the file (" +
                   std::to_string(file.size()) + " bytes)");
  json j = parse_header(file.subspan(8, n), label);
  const uint64_t buffer_size = file.size() - 8 - n;

  ParsedHeader out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) bad(label, "__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) bad(label, "__metadata__ value of '" + m.key() + "' is not a string");
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + name + "'";
    if (!v.is_object()) bad(label, where + " entry is not an object");
    auto dt = v.find("dtype");
    auto sh = v.find("shape");
    auto off = v.find("data_offsets");
    if (dt == v.end() || !dt->is_string()) bad(label, where + " has no string 'dtype'");
    if (sh == v.end() || !sh->is_array()) bad(label, where + " has no array 'shape'");
    if (off == v.end() || !off->is_array() || off->size() != 2)
      bad(label, where + " has no two-element array 'data_offsets'");
    TensorInfo t;
    t.name = name;
    auto parsed = parse_dtype(dt->get<std::string>());
    if (!parsed) bad(label, where + " has unknown dtype '" + dt->get<std::string>() + "'");
    t.dtype = *parsed;
    for (const auto& d : *sh) {
      if (!d.is_number_unsigned()) bad(label, where + " has a shape entry that is not a non-negative integer");
      const uint64_t dim = d.get<uint64_t>();
      if (dim > static_cast<uint64_t>(INT64_MAX)) bad(label, where + " has a shape entry too large");
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    for (const auto& o : *off)
      if (!o.is_number_unsigned()) bad(label, where + " has a data offset that is not a non-negative integer");
    t.begin = (*off)[0].get<uint64_t>();
    t.end = (*off)[1].get<uint64_t>();
    if (t.end < t.begin) bad(label, where + " has data_offsets end < begin");
    auto numel = checked_numel(t.shape);
    std::optional<uint64_t> nbytes;
    if (numel) nbytes = checked_mul(*numel, dtype_size(t.dtype));
    if (!nbytes) bad(label, where + " shape overflows 64-bit byte count");
    if (*nbytes != t.end - t.begin)
      bad(label, where + " occupies " + std::to_string(t.end - t.begin) + " bytes but shape x " +
                     std::string(dtype_name(t.dtype)) + " needs " + std::to_string(*nbytes));
    out.tensors.push_back(std::move(t));
  }
  std::sort(out.tensors.begin(), out.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  for (const auto& t : out.tensors) {
    if (t.begin < expected)
      bad(label, "tensor '" + t.name + "' overlaps the previous tensor (begins at " + std::to_string(t.begin) +
                     ", previous ends at " + std::to_string(expected) + ")");
    if (t.begin > expected)
      bad(label, "hole in the data buffer before tensor '" + t.name + "' (bytes " + std::to_string(expected) +
                     ".." + std::to_string(t.begin) + " unused)");
    expected = t.end;
  }
  if (expected != buffer_size)
    bad(label, expected > buffer_size
                   ? "tensors need " + std::to_string(expected) + " data bytes but the file has " +
                         std::to_string(buffer_size) + " (truncated?)"
                   : std::to_string(buffer_size - expected) + " trailing bytes after the last tensor");
  *header_bytes_out = n;
  return out;
}

}  // namespace

void SafetensorsFile::validate_buffer(std::span<const uint8_t> buffer, const std::string& label) {
  uint64_t n;
  parse_and_validate(buffer, label, &n);
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  auto f = std::unique_ptr<SafetensorsFile>(new SafetensorsFile());
  f->path_ = path;
  f->map_ = MappedFile(path);
  auto parsed = parse_and_validate({f->map_.data(), f->map_.size()}, path, &f->header_bytes_);
  f->tensors_ = std::move(parsed.tensors);
  f->metadata_ = std::move(parsed.metadata);
  f->data_ = f->map_.data() + 8 + f->header_bytes_;
  for (size_t i = 0; i < f->tensors_.size(); ++i) f->index_.emplace(f->tensors_[i].name, i);
  return f;
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

TensorView SafetensorsFile::view(const TensorInfo& t) const { return TensorView{&t, data_ + t.begin}; }

void SafetensorsFile::release(const TensorInfo& t) const {
  map_.release(8 + header_bytes_ + t.begin, t.nbytes());
}

void SafetensorsFile::set_random_access(const TensorInfo& t, bool random) const {
  map_.set_random_access(8 + header_bytes_ + t.begin, t.nbytes(), random);
}

void SafetensorsFile::release(const TensorInfo& t, uint64_t offset, uint64_t length) const {
  if (offset >= t.nbytes()) return;
  map_.release(8 + header_bytes_ + t.begin + offset, std::min(length, t.nbytes() - offset));
}

// ---------------------------------------------------------------------------
// Checkpoint
// ---------------------------------------------------------------------------

namespace fs = std::filesystem;

std::map<std::string, std::string> parse_shard_index(std::string_view text, const std::string& label) {
  check_json_depth(text, label);
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e400
    invalid(label + ": not valid JSON: " + e.what());
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    invalid(label + ": missing object 'weight_map'");
  std::map<std::string, std::string> weight_map;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    if (!it.value().is_string()) invalid(label + ": weight_map entry '" + it.key() + "' is not a string");
    const std::string shard = it.value().get<std::string>();
    if (shard.find('/') != std::string::npos || shard == ".." || shard == "." || shard.empty() ||
        shard.find('\0') != std::string::npos)
      invalid(label + ": weight_map entry '" + it.key() + "' names shard '" + shard +
              "' outside the checkpoint folder");
    weight_map[it.key()] = shard;
  }
  if (weight_map.empty()) invalid(label + ": weight_map is empty");
  return weight_map;
}

std::string Checkpoint::folder_of(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return path;
  const std::string parent = fs::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

std::unique_ptr<Checkpoint> Checkpoint::open(const std::string& path) {
  auto c = std::unique_ptr<Checkpoint>(new Checkpoint());
  c->path_ = path;
  c->folder_ = folder_of(path);
  std::error_code ec;
  if (!fs::exists(path, ec)) fail(ErrorKind::kIo, path + ": no such file or folder");
  std::vector<std::string> files;
  std::map<std::string, std::string> weight_map;  // tensor -> shard file name
  std::string index_path;
  // error_code overloads throughout: a name the OS rejects (too long, no
  // permission) is an eq::Error naming it, not a std::filesystem_error.
  if (fs::is_directory(path, ec)) {
    index_path = (fs::path(path) / "model.safetensors.index.json").string();
    if (fs::exists(index_path, ec)) {
      weight_map = parse_shard_index(read_file_bytes(index_path, kMaxShardIndexBytes), index_path);
      std::set<std::string> shard_set;
      for (const auto& [tensor, shard] : weight_map) shard_set.insert(shard);
      for (const auto& s : shard_set) {
        const std::string p = (fs::path(path) / s).string();
        if (!fs::exists(p, ec))
          invalid(index_path + ": shard '" + s + "' listed in weight_map is missing" +
                  (ec ? " (" + ec.message() + ")" : std::string()));
        files.push_back(p);
      }
    } else if (fs::exists(fs::path(path) / "model.safetensors", ec)) {
      index_path.clear();
      files.push_back((fs::path(path) / "model.safetensors").string());
    } else {
      index_path.clear();
      for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec))
        if (it->path().extension() == ".safetensors") files.push_back(it->path().string());
      if (ec) fail(ErrorKind::kIo, path + ": cannot list the folder: " + ec.message());
      if (files.size() != 1)
        invalid(path + ": expected model.safetensors.index.json, model.safetensors or exactly one .safetensors file, found " +
                std::to_string(files.size()) + " .safetensors files");
    }
  } else {
    files.push_back(path);
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) c->shards_.push_back(SafetensorsFile::open(f));
  for (size_t s = 0; s < c->shards_.size(); ++s) {
    const auto& shard = *c->shards_[s];
    const std::string shard_name = fs::path(shard.path()).filename().string();
    for (const auto& t : shard.tensors()) {
      if (!index_path.empty()) {
        auto w = weight_map.find(t.name);
        if (w == weight_map.end())
          invalid(shard.path() + ": tensor '" + t.name + "' is not listed in " + index_path);
        if (w->second != shard_name)
          invalid(shard.path() + ": tensor '" + t.name + "' is listed in " + index_path + " under shard '" +
                  w->second + "'");
      }
      auto [it, inserted] = c->where_.emplace(t.name, std::make_pair(s, &t));
      if (!inserted)
        invalid(shard.path() + ": tensor '" + t.name + "' also appears in " + c->shards_[it->second.first]->path());
    }
  }
  for (const auto& [name, shard] : weight_map)
    if (!c->where_.count(name))
      invalid(index_path + ": tensor '" + name + "' is listed in shard '" + shard + "' but not stored there");
  return c;
}

std::vector<std::string> Checkpoint::tensor_names() const {
  std::vector<std::string> names;
  names.reserve(where_.size());
  for (const auto& [n, _] : where_) names.push_back(n);
  return names;
}

void Checkpoint::rename_prefix(std::string_view stored, std::string_view logical) {
  std::vector<std::string> moved;
  for (const auto& [n, _] : where_)
    if (n.rfind(stored, 0) == 0) moved.push_back(n);
  for (const std::string& n : moved) {
    const auto w = where_.at(n);
    where_.erase(n);
    renamed_.emplace(n, w);
    const std::string to = std::string(logical) + n.substr(stored.size());
    if (!where_.emplace(to, w).second)
      invalid(path_ + ": tensor '" + n + "' would be read as '" + to + "', which the checkpoint also holds");
  }
}

bool Checkpoint::has(std::string_view name) const { return where_.find(name) != where_.end(); }

const TensorInfo& Checkpoint::info(std::string_view name) const {
  return *find(name).second;
}

const std::pair<size_t, const TensorInfo*>& Checkpoint::find(std::string_view name) const {
  if (auto it = where_.find(name); it != where_.end()) return it->second;
  if (auto it = renamed_.find(name); it != renamed_.end()) return it->second;
  invalid(path_ + ": tensor '" + std::string(name) + "' not found in the checkpoint");
}

const SafetensorsFile& Checkpoint::shard_of(std::string_view name) const { return *shards_[find(name).first]; }

TensorView Checkpoint::view(std::string_view name) const { return shard_of(name).view(info(name)); }

std::vector<float> Checkpoint::load_f32(std::string_view name) const { return view(name).to_f32(); }

uint64_t Checkpoint::total_tensor_bytes() const {
  uint64_t n = 0;
  for (const auto& [_, w] : where_) n += w.second->nbytes();
  return n;
}

}  // namespace eq::io
