// Collapse checks: greedy continuations of fixed prompts must not degenerate
// into repetition nor leave the prompt's domain. The prompts are drawn from
// each evaluation domain and continued greedily by the
// unquantized and the packed model; two verdicts per prompt:
//
//  loop   the packed continuation is dominated by repetition: the share of
//         its positions covered by an n-gram occurring at least 3 times
//         (n = 8 for byte-level models, 4 otherwise) is >= 0.5 AND exceeds the
//         unquantized continuation's share by >= 0.25 (small models repeat
//         themselves too; only repetition the quantization added counts).
//  drift  the packed continuation left the prompt's domain: the Jensen–Shannon
//         divergence (base 2, in [0, 1]) between its class histogram and the
//         unquantized continuation's exceeds 0.20. Classes are byte classes
//         for byte-level models (lower, upper, digit, space/tab, newline,
//         brackets, other punctuation, control/non-ASCII), else 16 equal
//         ranges of token ids; counts are smoothed by +0.5.
//
// A check passes when neither is flagged. The thresholds are heuristics set
// on the bundled models (where unquantized continuations of the same domain
// stay below JSD 0.1); they are reported with the figures so a reader can
// judge them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "eval/quality.h"

namespace eq::exec {
class PackedModel;
}

namespace eq::eval {

struct CollapseThresholds {
  double loop_coverage = 0.5;
  double loop_margin = 0.25;
  double drift_jsd = 0.20;
};

struct CollapseOptions {
  int64_t prompts_per_domain = 3;
  int64_t prompt_tokens = 64;
  int64_t new_tokens = 96;
  CollapseThresholds thresholds;
  // (tokens generated, tokens to generate): each prompt's reference and
  // packed continuations (a reference decode step converts every routed
  // expert it uses, which at full size takes seconds); null for none.
  std::function<void(int64_t, int64_t)> progress;
};

struct CollapsePrompt {
  std::string domain;
  int64_t offset = 0;  // token position in the domain's text
  std::vector<int32_t> tokens;
};

struct CollapseCheck {
  std::string domain;
  int64_t offset = 0;
  std::vector<int32_t> prompt, reference, packed;  // continuations: new tokens only
  double loop_reference = 0, loop_packed = 0;        // repeated n-gram coverage
  double drift_jsd = 0;
  bool loop = false, drift = false;
  bool passed() const { return !loop && !drift; }
  std::string verdict() const;  // "pass", "loop", "drift", "loop+drift"
};

// Evenly spaced prompts from each text, each starting after a newline when
// one is near (byte-level) so prompts begin at a line.
std::vector<CollapsePrompt> domain_prompts(const std::vector<LabeledTokens>& texts, const CollapseOptions& options,
                                           bool byte_level);

// Share of positions covered by an n-gram that occurs >= 3 times.
double repeated_ngram_coverage(const std::vector<int32_t>& tokens, int n);
// Class histogram divergence (JSD, base 2) between two continuations.
double class_divergence(const std::vector<int32_t>& a, const std::vector<int32_t>& b, bool byte_level,
                        int64_t vocab);

// Leaves `pm` running its packed blocks.
std::vector<CollapseCheck> run_collapse_checks(exec::PackedModel& pm, const std::vector<CollapsePrompt>& prompts,
                                               const CollapseOptions& options);

}  // namespace eq::eval
