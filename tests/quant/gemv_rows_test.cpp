// The small-batch decode entry point (GemvKernel::run_rows, gemv_run_rows):
// for 1..kMaxGemvRows inputs at once, every input's outputs have exactly the
// bits of run() on that input alone, for every format and ISA, whatever the
// other inputs are (so the small-batch and decode variants of the executor
// agree bit for bit).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/cpu_features.h"
#include "quant/format.h"
#include "quant/gemv.h"
#include "quant_test_util.h"
#include "support/test_formats.h"

namespace eq::quant {
namespace {

TEST(GemvRows, EveryInputGetsTheBitsOfRunAlone) {
  for (const FormatTraits& f : eq::test::all_rows()) {
    if (!f.gemv) continue;
    const int64_t g = std::max(f.col_multiple, 1), r = std::max(f.row_multiple, 1);
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{17, 3 * g}, {70, 288}, {128, 256}}) {
      if (cols % g != 0 || rows % r != 0) continue;
      SCOPED_TRACE(std::string(f.name) + " [" + std::to_string(rows) + ", " + std::to_string(cols) + "]");
      const std::vector<float> w = test::normal_matrix(rows, cols, static_cast<uint64_t>(rows * 31 + cols), 0.05f);
      const QuantizedMatrix q = f.quantize(w.data(), rows, cols, QuantizeOptions{});
      const PackedMatrix m = q.view();
      std::vector<GemvActivation> acts(kMaxGemvRows);
      std::vector<std::vector<float>> xs;
      for (int i = 0; i < kMaxGemvRows; ++i) {
        xs.push_back(test::normal_matrix(1, cols, static_cast<uint64_t>(977 * i + cols), 1.0f + i));
        xs.back()[static_cast<size_t>((i * 37) % cols)] = 8.0f - 3.0f * i;  // outliers in different blocks
      }
      for (Isa isa : test::supported_isas()) {
        test::IsaGuard guard(isa);
        SCOPED_TRACE(std::string(isa_name(isa)));
        const int64_t begin = f.gemv->row_align > 1 ? 0 : rows / 5, end = rows;
        std::vector<std::vector<float>> alone(kMaxGemvRows);
        std::vector<const GemvInput*> ins;
        for (int i = 0; i < kMaxGemvRows; ++i) {
          if (f.gemv->prepare) f.gemv->prepare(m, xs[i].data(), acts[i]);
          else acts[i].set(xs[i].data(), cols);
          ins.push_back(&acts[i].input());
          alone[i].assign(static_cast<size_t>(end - begin), NAN);
          f.gemv->run(m, acts[i].input(), begin, end, alone[i].data());
        }
        for (int n = 1; n <= kMaxGemvRows; ++n) {
          // Inputs in a rotated order, so each one meets different neighbours.
          std::vector<const GemvInput*> sel;
          std::vector<int> which;
          for (int i = 0; i < n; ++i) which.push_back((i + n) % kMaxGemvRows), sel.push_back(ins[which.back()]);
          std::vector<std::vector<float>> out(n, std::vector<float>(static_cast<size_t>(end - begin), NAN));
          std::vector<float*> ys;
          for (auto& o : out) ys.push_back(o.data());
          gemv_run_rows(*f.gemv, m, sel.data(), n, begin, end, ys.data());
          for (int i = 0; i < n; ++i) EXPECT_EQ(out[i], alone[which[i]]) << n << " inputs, input " << which[i];
        }
      }
    }
  }
}

}  // namespace
}  // namespace eq::quant
