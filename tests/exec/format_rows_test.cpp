// A row added the way docs/adding-a-format.md says ("Trying a row in the
// tests": tests/support/test_formats.cpp) runs end to end: the generic
// suites iterate it (eq::test::all_rows()), a kernel whose preconditions the
// row does not meet is not chosen for it (the generic kernel or the fp32
// panels run instead, asserted by identity, and match float64), and the row
// packs, verifies and evaluates like a registry row. The doc's list of touch
// points and of the suites every row runs through is checked against the
// sources.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "eval/quality.h"
#include "exec/batch_mlp.h"
#include "exec/int8_panel_gemm.h"
#include "exec/packed_fixture.h"
#include "exec/packed_model.h"
#include "pack/packer.h"
#include "pack/verify.h"
#include "quant/format.h"
#include "quant/format_info.h"
#include "quant/gemv.h"
#include "quant/gemv_kernels.h"
#include "support/test_formats.h"
#include "test_support.h"

namespace eq {
namespace {

namespace fs = std::filesystem;

class IsaGuard {
 public:
  explicit IsaGuard(Isa isa) { set_active_isa_for_testing(isa); }
  ~IsaGuard() { set_active_isa_for_testing(detected_isa()); }
};

std::vector<Isa> supported_isas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512})
    if (isa <= detected_isa()) isas.push_back(isa);
  return isas;
}

std::vector<float> wave(int64_t n, double f, float amp) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = amp * static_cast<float>(std::sin(f * static_cast<double>(i * i % 1013) + 0.3));
  return v;
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The lines of `doc` between the heading `heading` and the next heading.
std::vector<std::string> section(const std::string& doc, const std::string& heading) {
  std::vector<std::string> out;
  std::istringstream in(doc);
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.rfind("#", 0) == 0) {
      inside = line == heading;
      continue;
    }
    if (inside) out.push_back(line);
  }
  return out;
}

// The backticked spans of a line, in order.
std::vector<std::string> code_spans(const std::string& line) {
  std::vector<std::string> out;
  size_t at = 0;
  while (true) {
    const size_t a = line.find('`', at);
    if (a == std::string::npos) break;
    const size_t b = line.find('`', a + 1);
    if (b == std::string::npos) break;
    out.push_back(line.substr(a + 1, b - a - 1));
    at = b + 1;
  }
  return out;
}

TEST(TestRows, AreRegisteredOnceAndFoundByName) {
  const size_t before = quant::all_formats().size();
  const auto rows = eq::test::all_rows();
  EXPECT_GE(rows.size(), before);
  for (std::string_view name : eq::test::kTestRowNames) {
    const quant::FormatTraits* f = quant::find_format(name);
    ASSERT_NE(f, nullptr) << name;
    EXPECT_EQ(&quant::format_by_name(name), f);
    EXPECT_EQ(f, &rows[static_cast<size_t>(f - rows.data())]) << name << " is a row of all_formats()";
  }
  EXPECT_EQ(eq::test::all_rows().size(), rows.size()) << "a second call adds nothing";
  EXPECT_THROW(quant::add_format_for_testing(quant::format_by_name("int4_g16")), Error);  // names stay unique
}

// fp4_g8: groups of 8, which the AVX2/AVX-512 decode kernels do not take
// (their int32 sums run over units of 16 or 32 k): the choice is the generic
// kernel on every ISA. int4_g16, which they take, runs the ISA's own.
TEST(TestRows, DecodeKernelFallsBackToGenericForAGroupTheSimdKernelsDoNotTake) {
  eq::test::all_rows();
  const quant::FormatTraits& g8 = quant::format_by_name("fp4_g8");
  const quant::FormatTraits& g16 = quant::format_by_name("int4_g16");
  ASSERT_EQ(g8.gemv, &quant::kStreamGemvInt8);
  ASSERT_EQ(g16.gemv, &quant::kStreamGemvInt8);
  for (Isa isa : supported_isas()) {
    SCOPED_TRACE(std::string(isa_name(isa)));
    const quant::GemvIsaKernels& table = quant::gemv_isa_kernels(isa);
    const quant::StreamGemvChoice c8 = quant::stream_gemv_int8_for(table, g8);
    EXPECT_EQ(c8.run, &quant::kernels::gemv_stream_int8_generic);
    EXPECT_EQ(c8.run_multi, nullptr);
    const quant::StreamGemvChoice c16 = quant::stream_gemv_int8_for(table, g16);
    EXPECT_EQ(c16.run, table.stream_int8);
    if (isa != Isa::kGeneric) {
      EXPECT_NE(c16.run, &quant::kernels::gemv_stream_int8_generic);
    }
  }

  // `expertquant formats` names the kernel that runs.
  EXPECT_EQ(quant::describe_format(g8).decode, "gemv, int8 x (generic)");
  EXPECT_EQ(quant::describe_format(g16).decode, "gemv, int8 x (" + std::string(isa_name(active_isa())) + ")");
  EXPECT_EQ(quant::describe_format(g8).prefill, "fp32 panels (" + std::string(isa_name(active_isa())) + ")");

  // The fallback's results: the generic kernel's bits on the best ISA, and
  // float64 of the dequantized weights within the int8 rounding of x.
  const int64_t rows = 40, cols = 200;
  const std::vector<float> w = wave(rows * cols, 0.37, 0.05f), x = wave(cols, 0.71, 1.0f);
  const quant::QuantizedMatrix q = g8.quantize(w.data(), rows, cols, {});
  std::vector<float> wd(w.size());
  g8.dequantize(q.view(), wd.data());
  quant::GemvActivation act;
  act.set(x.data(), cols);
  std::vector<float> generic(rows), best(rows);
  {
    IsaGuard guard(Isa::kGeneric);
    g8.gemv->run(q.view(), act.input(), 0, rows, generic.data());
  }
  g8.gemv->run(q.view(), act.input(), 0, rows, best.data());
  for (int64_t n = 0; n < rows; ++n) {
    double ref = 0, bound = 1e-6;
    for (int64_t k = 0; k < cols; ++k) {
      ref += static_cast<double>(wd[n * cols + k]) * x[k];
      bound += std::fabs(wd[n * cols + k]) * act.input().q_scale[k / quant::kGemvBlock] * 0.5 +
               1e-5 * std::fabs(wd[n * cols + k] * x[k]);
    }
    EXPECT_EQ(best[n], generic[n]) << "row " << n;
    EXPECT_NEAR(best[n], ref, bound) << "row " << n;
  }
}

// Groups of 16 are not whole 32-k units: neither test row has int8 panels,
// so the batch kernel runs them on fp32 panels (dequantize_block), where the
// same shape of int4_g32 takes the integer path; results match float64.
TEST(TestRows, BatchKernelRunsFp32PanelsWithoutInt8Panels) {
  eq::test::all_rows();
  const int64_t H = 96, I = 64, tokens = 5;
  const std::vector<float> x = wave(tokens * H, 0.53, 1.0f);
  const std::vector<float> gw = wave(I * H, 0.11, 0.05f), uw = wave(I * H, 0.23, 0.05f), dw = wave(H * I, 0.29, 0.05f);
  for (std::string_view name : {"int4_g16", "fp4_g8", "int4_g32"}) {
    SCOPED_TRACE(std::string(name));
    const quant::FormatTraits& f = quant::format_by_name(name);
    const quant::QuantizedMatrix g = f.quantize(gw.data(), I, H, {}), u = f.quantize(uw.data(), I, H, {}),
                                 d = f.quantize(dw.data(), H, I, {});
    const exec::ExpertWeights e{g.view(), u.view(), d.view()};
    const bool int8 = f.int8_panels != nullptr && exec::active_int8_batch_kernels().gemm != nullptr;
    EXPECT_EQ(f.int8_panels == nullptr, name != "int4_g32");
    EXPECT_EQ(exec::batch_path_of(e), int8 ? exec::BatchPath::kInt8Panels : exec::BatchPath::kFloatPanels);
    if (name == "int4_g32") continue;

    std::vector<float> y(static_cast<size_t>(tokens * H), NAN);
    const exec::ExpertBatch b{&e, &f, x.data(), y.data(), tokens};
    exec::run_batch_mlp(std::span(&b, 1));
    std::vector<float> gd(gw.size()), ud(uw.size()), dd(dw.size());
    f.dequantize(e.gate, gd.data());
    f.dequantize(e.up, ud.data());
    f.dequantize(e.down, dd.data());
    double scale = 0, worst = 0;
    std::vector<double> want(y.size()), act(static_cast<size_t>(I));
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t i = 0; i < I; ++i) {
        double a = 0, c = 0;
        for (int64_t k = 0; k < H; ++k) a += double(gd[i * H + k]) * x[t * H + k], c += double(ud[i * H + k]) * x[t * H + k];
        act[i] = a / (1.0 + std::exp(-a)) * c;
      }
      for (int64_t h = 0; h < H; ++h) {
        double s = 0;
        for (int64_t i = 0; i < I; ++i) s += double(dd[h * I + i]) * act[i];
        want[t * H + h] = s;
        scale = std::max(scale, std::fabs(s));
      }
    }
    for (size_t i = 0; i < y.size(); ++i) worst = std::max(worst, std::fabs(y[i] - want[i]));
    EXPECT_GT(scale, 0.0);
    EXPECT_LE(worst, 2e-5 * scale + 1e-7) << "max |y| " << scale;
  }
}

// pack -> verify -> eval of the bundled model (hidden 128, expert width 64:
// multiples of 16 and 8) with every expert in a test row.
TEST(TestRows, PackVerifyAndEvaluateLikeRegistryRows) {
  eq::test::all_rows();
  const fs::path dir = test::temp_dir("test_rows_pack");
  const std::vector<int32_t> text = test::corpus_tokens("prose", 130);
  for (std::string_view name : eq::test::kTestRowNames) {
    SCOPED_TRACE(std::string(name));
    pack::PackRequest rq;
    rq.model_path = test::tinymoe_path();
    rq.out_path = (dir / std::string(name)).string();
    rq.uniform_format = std::string(name);
    set_num_threads(1);  // as packed_fixture.h's pack_once
    const pack::Manifest m = pack::run_pack(rq);
    set_num_threads(0);
    int parts = 0;
    for (const pack::ManifestTensor& t : m.tensors) parts += t.kind == "group_part" && t.format == name;
    EXPECT_EQ(parts, 4 * 3 * static_cast<int>(quant::format_by_name(name).parts.size())) << "layers x projections x parts";

    const pack::VerifyReport v = pack::verify_packed(rq.out_path);
    EXPECT_TRUE(v.ok()) << (v.problems.empty() ? "" : v.problems.front());
    EXPECT_GT(v.sampled_matrices, 0u);

    auto pm = exec::PackedModel::open(rq.out_path, test::open_options(true));
    eval::QualityOptions o;
    o.ctx = 64;
    const eval::QualityResult r = eval::compare_quality(*pm, {{"prose", text}}, o);
    EXPECT_GT(r.overall.scored_tokens, 100);
    EXPECT_TRUE(std::isfinite(r.overall.bits_packed));
    EXPECT_LT(std::fabs(r.overall.bits_packed - r.overall.bits_reference), 0.1 * r.overall.bits_reference);
    EXPECT_GT(r.overall.top1_agreement, 0.8);
    ASSERT_EQ(r.layers.size(), 4u);
    for (const eval::LayerError& e : r.layers) {
      EXPECT_GT(e.rel_l2, 0.0) << "layer " << e.layer << " ran quantized";
      EXPECT_LT(e.rel_l2, 0.2) << "layer " << e.layer;
    }
  }
}

// docs/adding-a-format.md, "Touch points": every `path` — `symbol` line names
// a file that exists and holds the symbol; "Suites every row runs through":
// every suite named exists in a test file that iterates eq::test::all_rows().
TEST(TestRows, DocListsTheRealTouchPointsAndSuites) {
  const fs::path root = test::source_dir();
  const std::string doc = read_text(root / "docs" / "adding-a-format.md");
  int points = 0;
  for (const std::string& line : section(doc, "## Touch points")) {
    if (line.rfind("- `", 0) != 0) continue;
    const std::vector<std::string> spans = code_spans(line);
    ASSERT_GE(spans.size(), 2u) << line;
    const fs::path file = root / spans[0];
    ASSERT_TRUE(fs::exists(file)) << line;
    EXPECT_NE(read_text(file).find(spans[1]), std::string::npos) << spans[0] << " has no " << spans[1];
    ++points;
  }
  EXPECT_GE(points, 5);

  std::vector<std::string> sources;
  for (const auto& e : fs::recursive_directory_iterator(root / "tests"))
    if (e.path().extension() == ".cpp") sources.push_back(read_text(e.path()));
  // The body of TEST(suite, name): from its declaration to the next TEST.
  auto body_of = [&](const std::string& decl) -> std::string {
    for (const std::string& s : sources)
      if (const size_t at = s.find(decl); at != std::string::npos) return s.substr(at, s.find("\nTEST(", at) - at);
    return "";
  };
  // A suite name: Suite.Name, letters and digits.
  auto is_suite = [](const std::string& span) {
    const size_t dot = span.find('.');
    if (span.empty() || !std::isupper(static_cast<unsigned char>(span[0])) || dot == std::string::npos) return false;
    for (size_t i = 0; i < span.size(); ++i)
      if (i != dot && !std::isalnum(static_cast<unsigned char>(span[i]))) return false;
    return true;
  };
  int suites = 0;
  for (const std::string& line : section(doc, "## Suites every row runs through"))
    for (const std::string& span : code_spans(line)) {
      if (!is_suite(span)) continue;
      const size_t dot = span.find('.');
      const std::string decl = "TEST(" + span.substr(0, dot) + ", " + span.substr(dot + 1) + ")";
      const std::string body = body_of(decl);
      EXPECT_FALSE(body.empty()) << decl << " not found under tests/";
      EXPECT_NE(body.find("eq::test::all_rows()"), std::string::npos) << decl << " does not iterate eq::test::all_rows()";
      ++suites;
    }
  EXPECT_GE(suites, 15);
}

}  // namespace
}  // namespace eq
