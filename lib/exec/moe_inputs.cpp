#include "exec/moe_inputs.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "exec/packed_model.h"
#include "model/moe_observer.h"

namespace eq::exec {
namespace {

class InputRecorder : public model::MoeObserver {
 public:
  explicit InputRecorder(MoeInputs& out) : out_(out) {}
  void on_moe_block(const model::MoeObservation& obs) override {
    model::FloatBuffer& dst = out_.by_layer[obs.layer];
    const size_t add = static_cast<size_t>(obs.tokens * obs.hidden);
    dst.insert(dst.end(), obs.input, obs.input + add);
  }

 private:
  MoeInputs& out_;
};

}  // namespace

MoeInputs capture_moe_inputs(PackedModel& pm, std::span<const int32_t> tokens, int64_t rows, int64_t ctx) {
  if (tokens.empty()) invalid("capture_moe_inputs: no evaluation tokens");
  model::Model& m = pm.model();
  MoeInputs in;
  in.hidden = m.config().hidden_size;
  in.rows = rows;
  InputRecorder rec(in);
  m.set_observer(&rec);
  const int64_t want = std::min<int64_t>(rows, static_cast<int64_t>(tokens.size()));
  try {
    for (int64_t b = 0; b < want; b += ctx) {
      const int64_t len = std::min(ctx, want - b);
      model::KvCache cache = m.new_cache(1, len);
      (void)m.forward_hidden(tokens.subspan(static_cast<size_t>(b), static_cast<size_t>(len)), 1, len, cache);
    }
  } catch (...) {
    m.set_observer(nullptr);
    throw;
  }
  m.set_observer(nullptr);
  const size_t H = static_cast<size_t>(in.hidden);
  for (auto& [layer, buf] : in.by_layer) {
    const size_t have = buf.size() / H;
    buf.resize(static_cast<size_t>(rows) * H);
    for (size_t r = have; r < static_cast<size_t>(rows); ++r)
      std::memcpy(buf.data() + r * H, buf.data() + (r % have) * H, H * sizeof(float));
  }
  return in;
}

}  // namespace eq::exec
