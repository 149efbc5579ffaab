#include "plan/importance.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/hash.h"
#include "io/mapped_file.h"
#include "io/safetensors.h"

namespace eq::plan {

std::string ImportanceFile::tensor_name(int64_t layer, int64_t expert, ImportanceSide side) {
  return "importance." + std::to_string(layer) + "." + std::to_string(expert) +
         (side == ImportanceSide::kIn ? ".in" : ".mid");
}

ImportanceFile::~ImportanceFile() = default;

std::unique_ptr<ImportanceFile> ImportanceFile::open(const std::string& path, int64_t hidden, int64_t intermediate) {
  std::unique_ptr<ImportanceFile> f(new ImportanceFile());
  f->path_ = path;
  f->file_ = io::SafetensorsFile::open(path);
  for (const auto& t : f->file_->tensors()) {
    if (t.name.rfind("importance.", 0) != 0) continue;
    const bool in = t.name.size() > 3 && t.name.compare(t.name.size() - 3, 3, ".in") == 0;
    const bool mid = t.name.size() > 4 && t.name.compare(t.name.size() - 4, 4, ".mid") == 0;
    if (!in && !mid) invalid("importance file " + path + ": tensor " + t.name + ": name must end in .in or .mid");
    const int64_t want = in ? hidden : intermediate;
    if (t.shape.size() != 1 || t.shape[0] != want)
      invalid("importance file " + path + ": tensor " + t.name + ": shape must be [" + std::to_string(want) + "]");
    if (!dtype_is_float(t.dtype))
      invalid("importance file " + path + ": tensor " + t.name + ": dtype must be floating point");
  }
  return f;
}

std::vector<float> ImportanceFile::load(int64_t layer, int64_t expert, ImportanceSide side) const {
  const std::string name = tensor_name(layer, expert, side);
  const io::TensorInfo* t = file_->find(name);
  if (!t) return {};
  std::vector<float> v = file_->view(*t).to_f32();
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]) || v[i] < 0)
      invalid("importance file " + path_ + ": tensor " + name + "[" + std::to_string(i) +
              "]: must be finite and >= 0, got " + std::to_string(v[i]));
  return v;
}

std::vector<double> ImportanceFile::load_sums(int64_t layer, int64_t expert, ImportanceSide side) const {
  const io::TensorInfo* t = file_->find(tensor_name(layer, expert, side));
  if (!t) return {};
  // The shape was checked by open(); the dtype must be the one profile writes.
  if (t->dtype != DType::kF64)
    invalid("importance file " + path_ + ": tensor " + t->name + ": expected F64 [" + std::to_string(t->shape[0]) + "]");
  std::vector<double> v(size_t(t->shape[0]));
  std::memcpy(v.data(), file_->view(*t).data, t->nbytes());
  return v;
}

uint64_t write_importance_file(const std::string& path, const std::vector<ExpertImportance>& experts) {
  std::vector<io::TensorToWrite> tensors;
  auto add = [&](int64_t layer, int64_t expert, ImportanceSide side, const std::vector<double>& v) {
    tensors.push_back({ImportanceFile::tensor_name(layer, expert, side), DType::kF64, {int64_t(v.size())},
                       {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(double)}});
  };
  for (const auto& e : experts) {
    add(e.layer, e.expert, ImportanceSide::kIn, *e.in);
    add(e.layer, e.expert, ImportanceSide::kMid, *e.mid);
  }
  io::write_safetensors(path, tensors, {{"producer", "expertquant profile"}});
  try {
    return importance_file_xxh64(path);
  } catch (...) {
    std::remove(path.c_str());
    throw;
  }
}

uint64_t importance_file_xxh64(const std::string& sidecar_path) {
  const io::MappedFile f(sidecar_path);
  return xxhash64(f.data(), size_t(f.size()));
}

void check_importance_pairing(const std::string& profile_path, const std::string& sidecar_path,
                              const std::string& recorded) {
  uint64_t want = 0;
  if (!parse_hash_hex(recorded, &want))
    invalid("profile " + profile_path + ": field 'importance_xxh64': expected 16 hex digits");
  const uint64_t got = importance_file_xxh64(sidecar_path);
  if (got != want)
    invalid("profile " + profile_path + " and importance file " + sidecar_path +
            " do not belong together: the sidecar's XXH64 is " + hash_hex(got) + ", the profile records " +
            hash_hex(want) + " (written by different runs, e.g. one interrupted while renaming; re-run "
            "`expertquant profile`)");
}

std::optional<ImportanceRecord> read_importance_record(const nlohmann::json& j, const std::string& profile_path) {
  if (!j.contains("importance_file") || j["importance_file"].is_null()) return std::nullopt;
  const std::string label = "profile " + profile_path;
  if (!j["importance_file"].is_string()) invalid(label + ": field 'importance_file': not a string");
  ImportanceRecord r;
  r.file = j["importance_file"].get<std::string>();
  // An absolute path stays as it is.
  r.path = (std::filesystem::path(profile_path).parent_path() / r.file).string();
  // Written by `expertquant profile`: the sidecar must be the one this
  // profile.json was written with (absent in hand-made or older profiles,
  // whose pairing is unchecked).
  if (j.contains("importance_xxh64") && !j["importance_xxh64"].is_null()) {
    if (!j["importance_xxh64"].is_string()) invalid(label + ": field 'importance_xxh64': not a string");
    r.xxh64 = j["importance_xxh64"].get<std::string>();
    check_importance_pairing(profile_path, r.path, r.xxh64);
  }
  return r;
}

void write_importance_record(nlohmann::ordered_json& j, const std::string& file, const std::string& xxh64) {
  j["importance_file"] = file.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(file);
  j["importance_xxh64"] = file.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(xxh64);
}

}  // namespace eq::plan
