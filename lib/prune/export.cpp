#include "prune/export.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <span>

#include "core/error.h"
#include "core/hash.h"
#include "core/memory.h"
#include "core/shape.h"
#include "io/atomic_file.h"
#include "io/input_file.h"
#include "io/quantized_source.h"
#include "io/safetensors.h"
#include "io/tensor_hashes.h"
#include "io/text_file.h"
#include "model/config.h"
#include "model/expert_axis.h"
#include "model/open_checkpoint.h"
#include "pack/manifest.h"
#include "pack/output.h"
#include "plan/fingerprint.h"
#include "profile/profile.h"
#include "prune/config_text.h"

namespace eq::prune {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kConfigFile = "config.json";

// One output tensor: the source tensor it comes from and the rows kept
// (empty: the whole tensor).
struct PlannedTensor {
  std::string source;  // stored name in the source checkpoint
  std::string logical; // the name the model reads it under (hashes)
  pack::OutputTensor out;
  std::vector<int64_t> rows;  // dim-0 indices kept, ascending; empty = all
};

struct Plan {
  std::vector<PlannedTensor> tensors;
  int num_shards = 1;
  uint64_t total_bytes = 0;
  int64_t expert_tensors_dropped = 0, mtp_tensors_dropped = 0;
};

// `stored` with the expert number at `axis` (found in `logical`, which ends
// like `stored`: a wrapper's prefix is the only difference) replaced by `e`.
std::string renumbered(const std::string& stored, const std::string& logical, const model::ExpertAxis& axis, int64_t e) {
  const size_t pos = axis.expert_pos + (stored.size() - logical.size());
  return stored.substr(0, pos) + std::to_string(e) + stored.substr(pos + axis.expert_len);
}

Plan make_plan(const io::Checkpoint& ckpt, const model::ModelConfig& cfg, const Selection& sel, uint64_t shard_size) {
  if (shard_size == 0) invalid("--shard-size must be positive");
  // New index of every source expert per MoE layer (-1: dropped).
  std::map<int64_t, std::vector<int64_t>> new_index;
  std::map<int64_t, const LayerChoice*> choice;
  for (const LayerChoice& lc : sel.layers) {
    std::vector<int64_t>& m = new_index[lc.layer];
    m.assign(static_cast<size_t>(cfg.num_experts), -1);
    for (size_t i = 0; i < lc.kept.size(); ++i) m[static_cast<size_t>(lc.kept[i])] = static_cast<int64_t>(i);
    choice[lc.layer] = &lc;
  }
  std::map<std::string, std::string> logical_of;  // stored -> logical
  for (const std::string& n : ckpt.tensor_names()) logical_of[ckpt.info(n).name] = n;
  Plan plan;
  for (const auto& shard : ckpt.shards())
    for (const io::TensorInfo& t : shard->tensors()) {
      const std::string& logical = logical_of.at(t.name);
      if (model::is_mtp_tensor(cfg, logical)) {
        ++plan.mtp_tensors_dropped;
        continue;
      }
      const model::ExpertAxis axis = model::expert_axis(cfg, logical);
      PlannedTensor p{t.name, logical, {t.name, t.dtype, t.shape, t.nbytes(), 0}, {}};
      if (axis.kind == model::ExpertAxisKind::kOneExpert) {
        const int64_t e = new_index.at(axis.layer)[static_cast<size_t>(axis.expert)];
        if (e < 0) {
          ++plan.expert_tensors_dropped;
          continue;
        }
        p.out.name = renumbered(t.name, logical, axis, e);
      } else if (axis.kind == model::ExpertAxisKind::kStacked) {
        if (t.shape.empty() || t.shape[0] != cfg.num_experts)
          invalid(ckpt.path() + ": tensor '" + t.name + "' has shape " + shape_str(t.shape) +
                  "; a tensor along the experts needs dim 0 = " + std::to_string(cfg.num_experts) + " (config.json)");
        p.rows = choice.at(axis.layer)->kept;
        p.out.shape[0] = static_cast<int64_t>(p.rows.size());
        p.out.nbytes = t.nbytes() / static_cast<uint64_t>(cfg.num_experts) * p.rows.size();
      }
      plan.tensors.push_back(std::move(p));
    }
  // Shards filled in order up to shard_size (a larger tensor alone).
  int shard = 0;
  uint64_t in_shard = 0;
  for (PlannedTensor& p : plan.tensors) {
    if (in_shard > 0 && in_shard + p.out.nbytes > shard_size) {
      ++shard;
      in_shard = 0;
    }
    p.out.shard = shard;
    in_shard += p.out.nbytes;
    plan.total_bytes += p.out.nbytes;
  }
  plan.num_shards = shard + 1;
  return plan;
}

// Copies a file byte for byte into `dst` (written as dst.tmp and renamed).
void copy_file(const std::string& src, const std::string& dst) {
  io::InputFile in(src);
  const std::string tmp = dst + ".tmp";
  const int fd = io::create_file(tmp);
  try {
    std::vector<char> buf(1 << 20);
    while (const size_t n = in.read(buf.data(), buf.size())) io::write_all(fd, buf.data(), n, tmp);
  } catch (...) {
    ::close(fd);
    std::remove(tmp.c_str());
    throw;
  }
  io::commit_file(fd, tmp, dst);
}

// The source folder's files other than config.json and the weights, by name.
std::vector<std::string> side_files(const std::string& folder) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec)) {
    const std::string name = e.path().filename().string();
    if (is_replaced_file(name) || !e.is_regular_file()) continue;  // folders (e.g. references) are not the model's
    names.push_back(name);
  }
  if (ec) fail(ErrorKind::kIo, "cannot list " + folder + ": " + ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

void release_all(const io::Checkpoint& ckpt) {
  for (const auto& shard : ckpt.shards()) {
    io::TensorInfo whole;
    whole.end = shard->file_size() - 8 - shard->header_size();
    shard->release(whole);
  }
  malloc_trim(0);
}

}  // namespace

bool is_replaced_file(const std::string& name) {
  auto ends = [&](std::string_view suffix) { return name.ends_with(suffix); };
  return name == kConfigFile || ends(".safetensors") || ends(".safetensors.index.json") || ends(".bin") ||
         ends(".bin.index.json") || ends(".pt") || ends(".pth") || ends(".gguf") || ends(".h5") ||
         ends(".msgpack") || ends(".ckpt") || ends(".pdparams");
}

ExportSummary run_export(const ExportRequest& rq, ExportObserver* observer) {
  const auto t0 = std::chrono::steady_clock::now();
  if (rq.profile_path.empty()) invalid("export: --profile is required (it ranks the experts)");
  const auto [ckpt, cfg] = model::open_checkpoint(rq.model_path);
  const io::SourceTensors src(*ckpt, cfg.source_quant);
  model::check_against_checkpoint(cfg, src);

  const std::string profile_label = "profile " + rq.profile_path;
  const profile::Profile prof = profile::read_profile(rq.profile_path);
  // The profile must describe this checkpoint: config, tensor index and every
  // tensor's sample hash now, the full hashes as the export reads them.
  plan::ModelFingerprint here = plan::fingerprint_metadata(*ckpt, rq.model_path);
  if (const std::string d = plan::fingerprint_difference(prof.model, profile_label, here, "--model " + rq.model_path);
      !d.empty())
    invalid("export: " + profile_label + " was made from a different checkpoint: " + d);

  ExportSummary s;
  s.model_path = rq.model_path;
  s.profile_path = rq.profile_path;
  s.out_path = rq.out_path;
  s.model_type = cfg.model_type;
  s.selection = select_experts(cfg, prof, rq.selection, profile_label);
  const Plan plan = make_plan(*ckpt, cfg, s.selection, rq.shard_size);
  s.expert_tensors_dropped = plan.expert_tensors_dropped;
  s.mtp_tensors_dropped = plan.mtp_tensors_dropped;
  s.bytes_before = ckpt->total_tensor_bytes();
  s.bytes_after = plan.total_bytes;
  const std::string config_path = ckpt->folder() + "/" + std::string(kConfigFile);
  const std::string config_text =
      set_expert_count(io::read_file_bytes(config_path, model::kMaxConfigBytes), cfg.arch->text_config,
                       s.selection.experts_after, config_path);

  // Locked for the rest of the run; removes its staging folder if anything below throws.
  pack::OutputFolder folder(rq.out_path, rq.force, kConfigFile);
  release_all(*ckpt);
  reset_peak_rss();
  const uint64_t baseline = current_rss_bytes();
  if (observer) observer->on_start(s.selection, plan.total_bytes);

  std::vector<pack::OutputTensor> decls;
  for (const PlannedTensor& p : plan.tensors) decls.push_back(p.out);
  pack::ShardedOutput out(folder.staging(), std::move(decls), plan.num_shards);
  std::map<std::string, uint64_t> full_hash;  // logical name -> XXH64 of the stored bytes read
  uint64_t done = 0;
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const PlannedTensor& p = plan.tensors[i];
    const io::TensorInfo& info = ckpt->info(p.source);
    const io::TensorView view = ckpt->view(p.source);
    if (p.rows.empty()) {
      full_hash[p.logical] = out.append(i, view.bytes());  // the same bytes: the source's hash
    } else {
      full_hash[p.logical] = xxhash64(view.bytes());
      const uint64_t row_bytes = info.nbytes() / static_cast<uint64_t>(info.shape[0]);
      std::vector<std::span<const uint8_t>> pieces;
      for (int64_t r : p.rows) pieces.push_back(view.bytes().subspan(static_cast<size_t>(r) * row_bytes, row_bytes));
      out.append(i, pieces);
      ++s.tensors_sliced;
    }
    ckpt->shard_of(p.source).release(info);
    done += p.out.nbytes;
    if (observer) observer->on_progress(done, p.out.name);
  }
  s.tensors_copied = static_cast<int64_t>(plan.tensors.size()) - s.tensors_sliced;
  for (io::TensorHash& t : here.tensors)
    if (auto it = full_hash.find(t.name); it != full_hash.end()) t.full = it->second;
  if (const auto d = io::first_full_difference(prof.model.tensors, here.tensors))
    invalid("export: --model " + rq.model_path + ": tensor '" + d->tensor + "' has " + d->b + ", " + profile_label +
            " records " + d->a + " (it was profiled from different weights); nothing written");
  for (const pack::ManifestShard& sh : out.finish()) s.shards.push_back(sh.file);

  for (const std::string& name : side_files(ckpt->folder())) {
    copy_file(ckpt->folder() + "/" + name, folder.staging() + "/" + name);
    s.files_copied.push_back(name);
  }
  io::write_file_atomic(folder.staged_marker_path(), config_text);
  const uint64_t peak = peak_rss_bytes();
  s.peak_rss_above_baseline = peak > baseline ? peak - baseline : 0;
  folder.commit();
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

nlohmann::ordered_json summary_to_json(const ExportSummary& s) {
  nlohmann::ordered_json j;
  j["output"] = s.out_path;
  j["model"] = s.model_path;
  j["profile"] = s.profile_path;
  j["model_type"] = s.model_type;
  j["rule"] = s.selection.rule;
  j["experts_before"] = s.selection.experts_before;
  j["experts_after"] = s.selection.experts_after;
  j["top_k"] = s.selection.top_k;
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (const LayerChoice& l : s.selection.layers)
    layers.push_back({{"layer", l.layer},
                      {"kept", l.kept},
                      {"dropped", l.dropped},
                      {"dropped_usage_share", l.dropped_usage_share},
                      {"dropped_reap_share", l.dropped_reap_share}});
  j["layers"] = layers;
  j["tensors"] = {{"copied", s.tensors_copied},
                  {"sliced", s.tensors_sliced},
                  {"expert_tensors_dropped", s.expert_tensors_dropped},
                  {"mtp_tensors_dropped", s.mtp_tensors_dropped}};
  j["bytes_before"] = s.bytes_before;
  j["bytes_after"] = s.bytes_after;
  j["shards"] = s.shards;
  j["files_copied"] = s.files_copied;
  j["peak_rss_above_baseline_bytes"] = s.peak_rss_above_baseline;
  j["seconds"] = s.seconds;
  return j;
}

}  // namespace eq::prune
