// expertquant export: a checkpoint with experts removed, in the source's own
// HF layout, for any engine (docs/prune.md). The same model_type; in every
// MoE layer the experts select_experts drops are gone and the survivors
// renumbered 0..kept-1; every tensor with an expert axis (model/expert_axis.h:
// the router's weight, bias and e_score_correction_bias, stacked expert
// tensors with their biases, mxfp4 blocks and scales, fp8 scale_inv) keeps
// the survivors' rows; config.json differs in the expert count alone; every
// other tensor and every other file of the source folder is copied byte for
// byte. Bytes are sliced, never converted: the dtype and encoding of the
// source stay.
//
// As pack: the profile must describe this checkpoint (its fingerprint, then
// the full hash of every tensor read); one tensor at a time goes from the
// mapped source to the output, whose pages are released after it; the output
// folder is staged and renamed when complete (pack::OutputFolder, with
// config.json as the file renamed last), so a failed or killed run leaves no
// loadable folder and an existing OUT as it was.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "prune/selection.h"

namespace eq::prune {

struct ExportRequest {
  std::string model_path, profile_path, out_path;
  SelectionOptions selection;
  uint64_t shard_size = 4ull << 30;  // bytes per output shard at most (a larger tensor gets a shard alone)
  bool force = false;                // replace an existing OUT
};

class ExportObserver {
 public:
  virtual ~ExportObserver() = default;
  // The selection is made and `total_bytes` of tensors are about to be written.
  virtual void on_start(const Selection&, uint64_t /*total_bytes*/) {}
  virtual void on_progress(uint64_t /*done_bytes*/, const std::string& /*tensor*/) {}
};

struct ExportSummary {
  std::string model_path, profile_path, out_path, model_type;
  Selection selection;
  // Output tensors copied whole, cut along the expert axis; source tensors
  // left out (the dropped experts' own tensors; multi-token-prediction
  // layers, which the config does not describe).
  int64_t tensors_copied = 0, tensors_sliced = 0, expert_tensors_dropped = 0, mtp_tensors_dropped = 0;
  uint64_t bytes_before = 0, bytes_after = 0;  // tensor bytes of the source and of the export
  std::vector<std::string> shards;             // file names, in order
  std::vector<std::string> files_copied;       // the source folder's other files, byte for byte
  uint64_t peak_rss_above_baseline = 0;
  double seconds = 0;
};

ExportSummary run_export(const ExportRequest& rq, ExportObserver* observer = nullptr);

// export --json / --json-out.
nlohmann::ordered_json summary_to_json(const ExportSummary& s);

// The files of a source folder an export does not copy: config.json (written
// with the new expert count) and the weights (safetensors shards and their
// index, and other weight formats, which would still hold every expert).
bool is_replaced_file(const std::string& file_name);

}  // namespace eq::prune
