// Packed copies of the bundled model for executor and eval tests, made once
// per build: a mixed pack (int8_row, fp4_g32, trellis2, int2_g32 and
// pruned experts, so every layer has several bit groups) and a uniform bf16
// passthrough pack.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/thread_pool.h"
#include "exec/packed_model.h"
#include "io/atomic_file.h"
#include "io/text_file.h"
#include "io/tokens.h"
#include "model/config.h"
#include "pack/packer.h"
#include "test_support.h"

namespace eq::test {

inline std::string tinymoe_path() { return (data_dir() / "tinymoe").string(); }

// Expert e of MoE layer l: pruned when (e + l) % 16 == 15, else formats[e % 4]
// (with classes[e % 4] to match); dense layers are not listed.
using FormatCycle = std::array<const char*, 4>;
inline nlohmann::json mixed_allocation(
    const model::ModelConfig& c, const FormatCycle& formats = {"int8_row", "fp4_g32", "trellis2", "int2_g32"},
    const FormatCycle& classes = {"critical", "standard", "deprioritized", "deprioritized"}) {
  nlohmann::json layers = nlohmann::json::array();
  for (int64_t l = 0; l < c.num_layers; ++l) {
    if (!c.layer_is_moe[static_cast<size_t>(l)]) continue;
    nlohmann::json experts = nlohmann::json::array();
    for (int64_t e = 0; e < c.num_experts; ++e) {
      if ((e + l) % 16 == 15)
        experts.push_back({{"class", "pruned"}});
      else
        experts.push_back({{"class", classes[e % 4]}, {"format", formats[e % 4]}});
    }
    layers.push_back({{"layer", l}, {"experts", experts}});
  }
  return {{"schema", "expertquant.allocation"}, {"version", 1}, {"layers", layers}};
}

// Packs are cached beside the command-line binary and shared by every test
// binary of the build (ctest runs every test in its own process, and several
// binaries use the same packs). A pack is rebuilt when its stamp changes: the
// binary's modification time (it links the library statically, so any library
// change relinks it) and what the fixture asks for (`request`: the allocation
// or format). A file lock serializes processes that run in parallel.
inline std::filesystem::path fixture_dir(const std::string& tag) {
  // One set per binary: the plain and the sanitized tests (EQ_SANITIZER_TESTS) each pack with their own library.
  const std::filesystem::path bin(binary());
  const std::filesystem::path dir = bin.parent_path() / "test-packs" / bin.filename() / tag;
  std::filesystem::create_directories(dir);
  return dir;
}
inline std::string fixture_stamp(const std::string& request) {
  return std::to_string(std::filesystem::last_write_time(binary()).time_since_epoch().count()) + "-" +
         std::to_string(std::hash<std::string>{}(request));
}

inline std::string pack_once(const std::string& tag, const std::string& uniform) {
  namespace fs = std::filesystem;
  const fs::path dir = fixture_dir(tag);
  const int lock = ::open((dir / "lock").c_str(), O_CREAT | O_RDWR, 0644);
  if (lock >= 0) ::flock(lock, LOCK_EX);
  const std::string allocation =
      uniform.empty() ? mixed_allocation(model::load_config(tinymoe_path())).dump(1) : std::string();
  const std::string stamp = fixture_stamp(uniform + allocation);
  pack::PackRequest rq;
  rq.model_path = tinymoe_path();
  rq.out_path = (dir / "packed").string();
  std::string have;
  if (std::ifstream f(dir / "stamp"); f) std::getline(f, have);
  if (have != stamp || !fs::exists(dir / "packed" / "manifest.json")) {
    if (uniform.empty()) {
      const std::string alloc = (dir / "allocation.json").string();
      io::write_file_atomic(alloc, allocation);
      rq.allocation_path = alloc;
    } else {
      rq.uniform_format = uniform;
    }
    rq.force = true;
    // One thread while packing: the packer runs trellis quantization inside
    // its own pool tasks, and eq::ThreadPool is not reentrant.
    set_num_threads(1);
    pack::run_pack(rq);
    set_num_threads(0);
    io::write_file_atomic((dir / "stamp").string(), stamp + "\n");
  }
  if (lock >= 0) ::close(lock);
  return rq.out_path;
}

// An evaluation text of the corpus as byte tokens: the plain copy in
// ../shared/corpus when present, else the bundled data/corpus/*.zst.
inline std::vector<int32_t> corpus_tokens(const std::string& domain, size_t max_tokens) {
  const std::filesystem::path shared = shared_dir();
  const std::filesystem::path plain = shared.empty() ? std::filesystem::path() : shared / "corpus" / ("eval_" + domain + ".txt");
  const std::string path = !plain.empty() && std::filesystem::exists(plain)
                               ? plain.string()
                               : (data_dir() / "corpus" / ("eval_" + domain + ".txt.zst")).string();
  std::vector<int32_t> t = io::bytes_to_tokens(io::read_file_bytes(path));
  t.resize(std::min(max_tokens, t.size()));
  return t;
}

// Packs made from a copy of the bundled model whose folder is renamed
// afterwards, so nothing at the manifest's source.path exists: they must run
// on their own. `source` is the renamed copy (for --model comparisons).
// mixed: the mixed allocation; bf16: uniform bf16 passthrough; attn: bf16
// experts with --attn-format int8_row (attention and lm_head quantized).
struct StandalonePacks {
  std::string source, source_path_in_manifest, mixed, bf16, attn;
};
inline const StandalonePacks& standalone_packs() {
  static const StandalonePacks packs = [] {
    namespace fs = std::filesystem;
    const fs::path dir = fixture_dir("standalone");
    const int lock = ::open((dir / "lock").c_str(), O_CREAT | O_RDWR, 0644);
    if (lock >= 0) ::flock(lock, LOCK_EX);
    const std::string allocation = mixed_allocation(model::load_config(tinymoe_path())).dump(1);
    const std::string stamp = fixture_stamp("standalone: mixed, bf16, bf16 + int8_row attention\n" + allocation);
    StandalonePacks p;
    p.source_path_in_manifest = (dir / "src").string();
    p.source = (dir / "src-moved").string();
    p.mixed = (dir / "mixed").string();
    p.bf16 = (dir / "bf16").string();
    p.attn = (dir / "attn").string();
    std::string have;
    if (std::ifstream f(dir / "stamp"); f) std::getline(f, have);
    if (have != stamp || !fs::exists(fs::path(p.attn) / "manifest.json")) {
      for (const char* sub : {"src", "src-moved", "mixed", "bf16", "attn", "stamp"}) fs::remove_all(dir / sub);
      fs::copy(tinymoe_path(), dir / "src", fs::copy_options::recursive);
      const std::string alloc = (dir / "allocation.json").string();
      io::write_file_atomic(alloc, allocation);
      set_num_threads(1);  // as in pack_once
      auto pack = [&](const std::string& out, const std::string& uniform, const std::string& attn) {
        pack::PackRequest rq;
        rq.model_path = p.source_path_in_manifest;
        rq.out_path = out;
        if (uniform.empty())
          rq.allocation_path = alloc;
        else
          rq.uniform_format = uniform;
        rq.attn_format = attn;
        rq.force = true;
        pack::run_pack(rq);
      };
      pack(p.mixed, "", "");
      pack(p.bf16, "bf16", "");
      pack(p.attn, "bf16", "int8_row");
      set_num_threads(0);
      fs::rename(dir / "src", dir / "src-moved");
      io::write_file_atomic((dir / "stamp").string(), stamp + "\n");
    }
    if (lock >= 0) ::close(lock);
    return p;
  }();
  return packs;
}

inline exec::PackedModelOptions open_options(bool verify, const std::string& model = tinymoe_path()) {
  exec::PackedModelOptions o;
  o.verify = verify;
  o.model_path = model;
  return o;
}

inline const std::string& mixed_pack() {
  static const std::string path = pack_once("mixed", "");
  return path;
}
inline const std::string& bf16_pack() {
  static const std::string path = pack_once("bf16", "bf16");
  return path;
}

}  // namespace eq::test
