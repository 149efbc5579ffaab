#include "model/layer_pass.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/memory.h"
#include "model/forward.h"

namespace eq::model {

PassOrder parse_pass_order(std::string_view text, const std::string& option) {
  if (text == "window") return PassOrder::kWindow;
  if (text == "layer") return PassOrder::kLayer;
  invalid(option + ": expected 'layer' or 'window', got '" + std::string(text) + "'");
}

uint64_t default_hidden_memory() { return physical_memory_bytes() / 4; }

HiddenStates::HiddenStates(const std::vector<int64_t>& rows, int64_t width, uint64_t memory_bound,
                           const std::string& spill_dir)
    : width_(width) {
  offsets_.push_back(0);
  for (int64_t r : rows) offsets_.push_back(offsets_.back() + uint64_t(r) * uint64_t(width));
  if (bytes() <= (memory_bound ? memory_bound : default_hidden_memory())) {
    for (int64_t r : rows) memory_.emplace_back(r * width);
    return;
  }
  std::string dir = spill_dir;
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    dir = tmp && *tmp ? tmp : "/tmp";
  }
  std::string path = dir + "/.expertquant-hidden-XXXXXX";
  fd_ = mkstemp(path.data());  // mode 0600
  if (fd_ < 0)
    fail(ErrorKind::kIo, "hidden states (" + format_bytes(bytes()) + ", above the in-memory bound " +
                             format_bytes(memory_bound) + "): cannot create a temporary file in " + dir + ": " +
                             std::strerror(errno));
  unlink(path.c_str());
}

HiddenStates::~HiddenStates() {
  if (fd_ >= 0) close(fd_);
}

void HiddenStates::write(size_t i, const float* src) {
  const uint64_t n = (offsets_[i + 1] - offsets_[i]) * sizeof(float);
  if (!spilled()) {
    std::memcpy(memory_[i].data(), src, n);
    return;
  }
  const char* p = reinterpret_cast<const char*>(src);
  for (uint64_t done = 0; done < n;) {
    const ssize_t w = pwrite(fd_, p + done, n - done, off_t(offsets_[i] * sizeof(float) + done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail(ErrorKind::kIo, std::string("hidden states: writing the temporary file: ") + std::strerror(errno));
    done += uint64_t(w);
  }
}

void HiddenStates::read(size_t i, float* dst) const {
  const uint64_t n = (offsets_[i + 1] - offsets_[i]) * sizeof(float);
  if (!spilled()) {
    std::memcpy(dst, memory_[i].data(), n);
    return;
  }
  char* p = reinterpret_cast<char*>(dst);
  for (uint64_t done = 0; done < n;) {
    const ssize_t r = pread(fd_, p + done, n - done, off_t(offsets_[i] * sizeof(float) + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      fail(ErrorKind::kIo, std::string("hidden states: reading the temporary file: ") +
                               (r == 0 ? "short file" : std::strerror(errno)));
    done += uint64_t(r);
  }
}

void run_pass(Model& model, const std::vector<WindowBatch>& batches, const PassOptions& o,
              const std::function<void(size_t, FloatBuffer&)>& on_hidden) {
  const int64_t H = model.config().hidden_size, L = model.config().num_layers;
  PassProgress p;
  p.order = o.order;
  const io::SourceTensors& source = model.weights().source();
  const uint64_t bytes_at_start = source.bytes_converted();
  const auto report = [&] {
    if (!o.progress) return;
    p.checkpoint_bytes = source.bytes_converted() - bytes_at_start;
    o.progress(p);
  };
  p.layers = L;
  for (const WindowBatch& b : batches) p.tokens += b.rows();
  if (o.order == PassOrder::kWindow) {
    for (size_t i = 0; i < batches.size(); ++i) {
      const WindowBatch& b = batches[i];
      KvCache cache = model.new_cache(b.batch, b.seq_len);
      FloatBuffer h = model.forward_hidden(b.tokens, b.batch, b.seq_len, cache);
      on_hidden(i, h);
      p.tokens_done += b.rows();
      report();
    }
    return;
  }
  std::vector<int64_t> rows;
  for (const WindowBatch& b : batches) {
    if (b.batch <= 0 || b.seq_len <= 0 || int64_t(b.tokens.size()) != b.rows())
      invalid("forward: got " + std::to_string(b.tokens.size()) + " tokens for batch " + std::to_string(b.batch) +
              " x seq_len " + std::to_string(b.seq_len));
    rows.push_back(b.rows());
  }
  HiddenStates states(rows, H, o.hidden_memory, o.spill_dir);
  for (size_t i = 0; i < batches.size(); ++i) {
    FloatBuffer h = model.embed(batches[i].tokens, batches[i].seq_len);
    states.write(i, h.data());
  }
  FloatBuffer h;
  const WeightStore& weights = model.weights();
  // Released however the pass ends, so a caller that goes on (or catches) holds no layer.
  struct Holder {
    const WeightStore& w;
    int64_t layer = -1;
    ~Holder() {
      if (layer >= 0) w.release_layer(layer);
    }
  } held{weights};
  for (int64_t l = 0; l < L; ++l) {
    weights.hold_layer(held.layer = l);
    p.tokens_done = 0;
    for (size_t i = 0; i < batches.size(); ++i) {
      const WindowBatch& b = batches[i];
      h.resize(b.rows() * H);
      states.read(i, h.data());
      KvCache cache = model.new_cache(b.batch, b.seq_len);
      model.forward_layer(l, h.data(), b.batch, b.seq_len, cache);
      states.write(i, h.data());
      p.tokens_done += b.rows();
      report();
    }
    if (o.after_layer) o.after_layer(l);
    weights.release_layer(l);
    held.layer = -1;
    p.layers_done = l + 1;
    p.tokens_done = 0;
    report();
  }
  for (size_t i = 0; i < batches.size(); ++i) {
    h.resize(batches[i].rows() * H);
    states.read(i, h.data());
    model.final_norm(h.data(), batches[i].rows());
    on_hidden(i, h);
  }
  report();  // the final norm's bytes
}

}  // namespace eq::model
