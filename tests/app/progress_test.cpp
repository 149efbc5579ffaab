// The CLI's progress component (apps/expertquant/progress): its lines are
// pure functions of a snapshot, and a phase always ends with a 100% line or
// a "stopped at X%" line saying why.
#include <gtest/gtest.h>

#include <cstdio>
#include <stdexcept>
#include <string>

#include "pass_options.h"
#include "progress.h"

namespace eq::app {
namespace {

ProgressSnapshot tokens(uint64_t done, uint64_t total, double seconds) {
  return {"quality", ProgressUnit::kTokens, done, total, seconds};
}

TEST(ProgressLine, TokensShowTokensPerSecondNotBytes) {
  const std::string line = progress_line(tokens(1020, 2048, 2.0), "");
  EXPECT_NE(line.find("510.0 tokens/s"), std::string::npos) << line;
  EXPECT_NE(line.find("1,020/2,048 tokens"), std::string::npos) << line;
  EXPECT_EQ(line.find("iB"), std::string::npos) << line;
  EXPECT_NE(line.find(" 49.8%"), std::string::npos) << line;
  EXPECT_NE(line.find("ETA 2s"), std::string::npos) << line;  // 1,028 left at 510/s
}

TEST(PassProgressStep, LayerOrderCountsTokensThroughTheWholeModelAndBytesRead) {
  model::PassProgress p;
  p.order = model::PassOrder::kLayer;
  p.layers_done = 2;
  p.layers = 4;
  p.tokens_done = 1024;
  p.tokens = 4096;
  p.checkpoint_bytes = 6u << 20;
  // (2 x 4,096 + 1,024) layer-tokens / 4 layers in 2 s; 6 MiB in 2 s.
  EXPECT_EQ(pass_progress_step(p, 2.0), "layer 3: 1,024/4,096 tokens, 1152.0 tokens/s, 3.00 MiB/s read");
  EXPECT_EQ(pass_progress_step(p, 0.0), "layer 3: 1,024/4,096 tokens");
  p.layers_done = 4;
  p.tokens_done = 0;
  EXPECT_EQ(pass_progress_step(p, 4.0), "layer 4: 0/4,096 tokens, 1024.0 tokens/s, 1.50 MiB/s read");
}

TEST(PassProgressStep, WindowOrderShowsTheRatesAlone) {
  model::PassProgress p;
  p.order = model::PassOrder::kWindow;
  p.tokens_done = 300;
  p.tokens = 900;
  p.checkpoint_bytes = 1u << 30;
  EXPECT_EQ(pass_progress_step(p, 3.0), "100.0 tokens/s, 341.33 MiB/s read");
}

TEST(ProgressLine, EachUnitNamesItsRate) {
  EXPECT_EQ(progress_rate(ProgressUnit::kTokens, 12.25), "12.2 tokens/s");
  EXPECT_EQ(progress_rate(ProgressUnit::kLayers, 0.5), "0.5 layers/s");
  EXPECT_EQ(progress_rate(ProgressUnit::kLayers, 0.025), "40.0 s/layer");
  EXPECT_EQ(progress_rate(ProgressUnit::kTokens, 0.05), "20.0 s/token");
  EXPECT_EQ(progress_rate(ProgressUnit::kExperts, 3), "3.0 experts/s");
  EXPECT_EQ(progress_rate(ProgressUnit::kBytes, 3.0 * 1024 * 1024), "3.00 MiB/s");
  EXPECT_EQ(progress_amount(ProgressUnit::kExperts, 1234), "1,234 experts");
  EXPECT_EQ(progress_rate(ProgressUnit::kMeasurements, 2), "2.0 measurements/s");
  const std::string bytes = progress_line({"pack", ProgressUnit::kBytes, 1 << 20, 4 << 20, 1.0}, "layer 3");
  EXPECT_NE(bytes.find("1.00 MiB/4.00 MiB"), std::string::npos) << bytes;
  EXPECT_NE(bytes.find("1.00 MiB/s"), std::string::npos) << bytes;
  EXPECT_NE(bytes.find("ETA 3s"), std::string::npos) << bytes;
  EXPECT_NE(bytes.find("  layer 3"), std::string::npos) << bytes;
}

TEST(ProgressLine, PercentReads100OnlyAtTheTotal) {
  EXPECT_DOUBLE_EQ(progress_percent(2047, 2048), 99.9);
  EXPECT_DOUBLE_EQ(progress_percent(999'999'999, 1'000'000'000), 99.9);
  EXPECT_DOUBLE_EQ(progress_percent(2048, 2048), 100.0);
  EXPECT_DOUBLE_EQ(progress_percent(0, 0), 100.0);
  EXPECT_DOUBLE_EQ(progress_percent(0, 10), 0.0);
}

TEST(ProgressLine, EtaInMinutesAndHoursAndUnknownBeforeAnyRate) {
  EXPECT_NE(progress_line(tokens(100, 100 + 150 * 100, 1.0), "").find("ETA 2m30s"), std::string::npos);
  EXPECT_NE(progress_line(tokens(1, 1 + 3720, 1.0), "").find("ETA 1h02m"), std::string::npos);
  EXPECT_NE(progress_line(tokens(0, 10, 0.5), "").find("ETA --"), std::string::npos);
}

TEST(ProgressLine, DoneAndStoppedLines) {
  EXPECT_EQ(progress_done_line(tokens(2048, 2048, 4.0)), "quality 100%  2,048 tokens in 4.0 s  512.0 tokens/s");
  EXPECT_EQ(progress_stopped_line(tokens(1020, 2048, 4.0), "out of memory"),
            "quality stopped at 49.8% (1,020/2,048 tokens): out of memory");
}

// Runs `body` on a Progress drawing into a temporary file; returns what it drew.
template <class F>
std::string drawn(bool verbose, bool terminal, F body) {
  std::FILE* f = std::tmpfile();
  if (!f) return "tmpfile failed";
  {
    Progress p("quality", verbose, terminal, f);
    body(p);
  }
  std::string text;
  std::rewind(f);
  for (int c; (c = std::fgetc(f)) != EOF;) text += char(c);
  std::fclose(f);
  return text;
}

TEST(Progress, TerminalEndsAt100Percent) {
  const std::string out = drawn(false, true, [](Progress& p) {
    p.phase("", ProgressUnit::kTokens);
    for (uint64_t d = 0; d <= 2048; d += 512) p.update(d, 2048);
    p.finish();
  });
  EXPECT_NE(out.find("\r\033[Kquality ["), std::string::npos) << out;  // drawn in place
  const std::string last = out.substr(out.rfind('\r') + 1);
  EXPECT_EQ(last.rfind("\033[Kquality 100%  2,048 tokens in ", 0), 0u) << last;
  EXPECT_NE(last.find("tokens/s\n"), std::string::npos) << last;
  EXPECT_EQ(out.find("KiB"), std::string::npos) << out;
}

TEST(Progress, ShortOfTheTotalSaysStoppedNot100) {
  const std::string out = drawn(false, true, [](Progress& p) {
    p.phase("", ProgressUnit::kTokens);
    p.update(1020, 2048);
    p.finish();
  });
  EXPECT_EQ(out.find("100%"), std::string::npos) << out;
  EXPECT_NE(out.find("quality stopped at 49.8% (1,020/2,048 tokens): the work ended short of its total\n"),
            std::string::npos)
      << out;
}

TEST(Progress, StopSaysWhy) {
  const std::string out = drawn(true, false, [](Progress& p) {
    p.phase("", ProgressUnit::kTokens);
    p.update(512, 2048);
    p.stop("interrupted");
  });
  EXPECT_NE(out.find("quality stopped at 25.0% (512/2,048 tokens): interrupted\n"), std::string::npos) << out;
}

TEST(Progress, AnErrorUnwindingSaysStopped) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  try {
    Progress p("quality", false, true, f);
    p.phase("", ProgressUnit::kTokens);
    p.update(300, 600);
    throw std::runtime_error("bad window");
  } catch (const std::runtime_error&) {
  }
  std::string text;
  std::rewind(f);
  for (int c; (c = std::fgetc(f)) != EOF;) text += char(c);
  std::fclose(f);
  EXPECT_NE(text.find("quality stopped at 50.0% (300/600 tokens): an error, reported below\n"), std::string::npos)
      << text;
}

TEST(Progress, ReturningBeforeFinishSaysStopped) {
  const std::string out = drawn(true, false, [](Progress& p) {
    p.phase("", ProgressUnit::kTokens);
    p.update(10, 600);
  });
  EXPECT_NE(out.find("quality stopped at 1.6% (10/600 tokens): the command ended before its total\n"),
            std::string::npos)
      << out;
}

TEST(Progress, VerboseWithoutTerminalLogsTenthsAndTheEnd) {
  const std::string out = drawn(true, false, [](Progress& p) {
    p.phase("pass", ProgressUnit::kTokens);
    for (uint64_t d = 0; d <= 1000; d += 25) p.update(d, 1000);
    p.phase("sensitivity", ProgressUnit::kExperts);
    p.update(8, 8);
    p.finish();
  });
  EXPECT_EQ(out.find('\r'), std::string::npos) << out;
  size_t lines = 0;
  for (char c : out) lines += c == '\n';
  EXPECT_EQ(lines, 9u + 1u + 1u) << out;  // 10%..90%, the pass's 100% line, the sensitivity's
  EXPECT_NE(out.find("quality pass [##"), std::string::npos) << out;
  EXPECT_NE(out.find("quality pass 100%  1,000 tokens in "), std::string::npos) << out;
  EXPECT_NE(out.find("quality sensitivity 100%  8 experts in "), std::string::npos) << out;
}

TEST(Progress, QuietWithoutTerminalUnlessVerbose) {
  const std::string out = drawn(false, false, [](Progress& p) {
    p.phase("", ProgressUnit::kBytes);
    p.update(1, 2);
    p.stop("why");
  });
  EXPECT_EQ(out, "");
}

}  // namespace
}  // namespace eq::app
