#include "eval/tune_run.h"

#include <algorithm>

#include "exec/moe_inputs.h"
#include "exec/packed_model.h"

namespace eq::eval {

exec::TuneResult run_tune(const TuneRequest& q) {
  exec::PackedModelOptions po;
  po.model_path = q.model;
  po.verify = q.verify;
  auto pm = exec::PackedModel::open(q.packed, po);
  const auto texts = read_text_inputs(q.inputs, q.packed, pm->config().vocab_size);
  if (q.measuring) q.measuring();
  const int64_t rows = *std::max_element(q.options.sweep.begin(), q.options.sweep.end());
  const exec::MoeInputs inputs = exec::capture_moe_inputs(*pm, texts.front().tokens, rows, q.ctx);
  return exec::tune_sort_cutoff(*pm, inputs, q.options);
}

}  // namespace eq::eval
