// eval::run_eval (lib/eval/run.h): the whole eval pipeline on a small pack,
// its stages told to the observer in the order they run.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "eval/run.h"
#include "exec/packed_fixture.h"

namespace eq::eval {
namespace {

// Writes each event as one string: "stage quality", "pass reference", ...
class Recorder : public EvalObserver {
 public:
  std::vector<std::string> events;
  int64_t progress_calls = 0, pass_progress_calls = 0;
  void on_loaded(const exec::PackedModel&) override { events.push_back("loaded"); }
  void on_stage_start(EvalStage stage, const std::string& model) override {
    const char* name = stage == EvalStage::kQuality ? "quality" : stage == EvalStage::kCollapse ? "collapse" : "latency";
    events.push_back(std::string("stage ") + name + (model.empty() ? "" : " " + model));
  }
  void on_pass_start(const std::string& model) override { events.push_back("pass " + model); }
  void on_pass_progress(const model::PassProgress&) override { ++pass_progress_calls; }
  void on_progress(int64_t, int64_t, const std::string&) override { ++progress_calls; }
  void on_stage_end() override { events.push_back("end"); }
  void on_capturing(const std::string& model, int64_t rows) override {
    events.push_back("capture " + model + " " + std::to_string(rows));
  }
  void on_source_verified(uint64_t) override { events.push_back("source verified"); }
};

EvalRequest small_request() {
  EvalRequest q;
  q.packed = test::mixed_pack();
  q.model = test::tinymoe_path();
  q.inputs.texts = {(test::data_dir() / "corpus" / "eval_prose.txt.zst").string()};
  q.inputs.max_tokens = 300;
  q.runtime = exec::default_runtime_config();
  q.dispatch = "sorted,auto";
  q.ctx = 128;
  q.collapse_options.prompts_per_domain = 1;
  q.collapse_options.new_tokens = 4;
  q.collapse_options.prompt_tokens = 16;
  q.latency_options.sweep = {1, 4};
  q.latency_options.reps = 1;
  q.latency_options.warmup = 0;
  q.latency_options.decode_tokens = 2;
  q.latency_options.decode_prompt = 4;
  q.latency_options.prefill_tokens = 8;
  return q;
}

TEST(RunEval, TellsEveryStageInTheOrderItRuns) {
  Recorder rec;
  const EvalReport r = run_eval(small_request(), &rec);
  const std::vector<std::string> want = {"loaded",        "stage quality",  "pass reference",   "pass packed", "end",
                                         "stage collapse", "end",           "source verified", "capture packed 4",
                                         "stage latency packed", "end"};
  EXPECT_EQ(rec.events, want);
  EXPECT_GT(rec.pass_progress_calls, 0);
  EXPECT_GT(rec.progress_calls, 0);
  EXPECT_EQ(r.texts, std::vector<std::string>{"prose"});
  EXPECT_EQ(r.ctx, 128);
  ASSERT_TRUE(r.quality.has_value());
  EXPECT_GT(r.quality->overall.scored_tokens, 0);
  EXPECT_EQ(r.collapse.size(), 1u);
  ASSERT_TRUE(r.latency.has_value());
  ASSERT_EQ(r.latency->strategies.size(), 2u);
  EXPECT_EQ(r.latency->strategies[0].dispatch, "sorted");
  std::vector<std::string> phases;
  for (const auto& p : r.phases) phases.push_back(p.name);
  EXPECT_EQ(phases, (std::vector<std::string>{"load", "quality reference", "quality packed", "collapse",
                                              "source check", "latency"}));
  EXPECT_TRUE(r.comparison_skipped.empty());
}

TEST(RunEval, SkippedStagesAreNotRun) {
  EvalRequest q = small_request();
  q.quality = q.collapse = q.latency = false;
  Recorder rec;
  const EvalReport r = run_eval(q, &rec);
  EXPECT_EQ(rec.events, (std::vector<std::string>{"loaded", "source verified"}));
  EXPECT_FALSE(r.quality.has_value());
  EXPECT_FALSE(r.latency.has_value());
  EXPECT_TRUE(r.collapse.empty());
}

TEST(RunEval, AnUnknownDispatchNamesTheOption) {
  EvalRequest q = small_request();
  q.quality = q.collapse = false;
  q.dispatch = "sorted,fast";
  try {
    run_eval(q);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "--dispatch: unknown strategy 'fast' (mask-combine, sorted, auto)");
  }
}

}  // namespace
}  // namespace eq::eval
