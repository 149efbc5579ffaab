#include "eval/collapse.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"
#include "exec/packed_model.h"
#include "model/generate.h"

namespace eq::eval {
namespace {

constexpr int kNumByteClasses = 8;
constexpr int kNumIdClasses = 16;

int byte_class(int32_t b) {
  if (b >= 'a' && b <= 'z') return 0;
  if (b >= 'A' && b <= 'Z') return 1;
  if (b >= '0' && b <= '9') return 2;
  if (b == ' ' || b == '\t') return 3;
  if (b == '\n' || b == '\r') return 4;
  if (b == '(' || b == ')' || b == '[' || b == ']' || b == '{' || b == '}' || b == '<' || b == '>') return 5;
  if (b > 32 && b < 127) return 6;
  return 7;
}

std::vector<double> histogram(const std::vector<int32_t>& t, bool byte_level, int64_t vocab) {
  const int classes = byte_level ? kNumByteClasses : kNumIdClasses;
  std::vector<double> h(static_cast<size_t>(classes), 0.5);
  for (int32_t id : t) {
    const int c = byte_level ? byte_class(id)
                             : static_cast<int>(std::min<int64_t>(kNumIdClasses - 1, id * kNumIdClasses / std::max<int64_t>(1, vocab)));
    h[static_cast<size_t>(c)] += 1;
  }
  double sum = 0;
  for (double v : h) sum += v;
  for (double& v : h) v /= sum;
  return h;
}

}  // namespace

std::string CollapseCheck::verdict() const {
  if (loop && drift) return "loop+drift";
  if (loop) return "loop";
  if (drift) return "drift";
  return "pass";
}

double repeated_ngram_coverage(const std::vector<int32_t>& tokens, int n) {
  const int64_t len = static_cast<int64_t>(tokens.size());
  if (len < n || n <= 0) return 0;
  std::map<std::vector<int32_t>, int> count;
  for (int64_t i = 0; i + n <= len; ++i) ++count[std::vector<int32_t>(tokens.begin() + i, tokens.begin() + i + n)];
  std::vector<char> covered(static_cast<size_t>(len), 0);
  for (int64_t i = 0; i + n <= len; ++i)
    if (count[std::vector<int32_t>(tokens.begin() + i, tokens.begin() + i + n)] >= 3)
      std::fill(covered.begin() + i, covered.begin() + i + n, 1);
  int64_t c = 0;
  for (char v : covered) c += v;
  return static_cast<double>(c) / static_cast<double>(len);
}

double class_divergence(const std::vector<int32_t>& a, const std::vector<int32_t>& b, bool byte_level,
                        int64_t vocab) {
  const std::vector<double> p = histogram(a, byte_level, vocab), q = histogram(b, byte_level, vocab);
  double jsd = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double mix = 0.5 * (p[i] + q[i]);
    jsd += 0.5 * p[i] * std::log2(p[i] / mix) + 0.5 * q[i] * std::log2(q[i] / mix);
  }
  return std::max(0.0, jsd);
}

std::vector<CollapsePrompt> domain_prompts(const std::vector<LabeledTokens>& texts, const CollapseOptions& options,
                                           bool byte_level) {
  std::vector<CollapsePrompt> out;
  for (const LabeledTokens& t : texts) {
    const int64_t n = static_cast<int64_t>(t.tokens.size()), P = options.prompt_tokens;
    if (n < P || options.prompts_per_domain <= 0) continue;
    const int64_t span = n - P;
    for (int64_t i = 0; i < options.prompts_per_domain; ++i) {
      int64_t at = span * (2 * i + 1) / (2 * options.prompts_per_domain);
      if (byte_level)  // start at a line when one begins within 256 bytes
        for (int64_t j = at; j < std::min(span, at + 256); ++j)
          if (j > 0 && t.tokens[static_cast<size_t>(j - 1)] == '\n') {
            at = j;
            break;
          }
      out.push_back({t.label, at, std::vector<int32_t>(t.tokens.begin() + at, t.tokens.begin() + at + P)});
    }
  }
  return out;
}

std::vector<CollapseCheck> run_collapse_checks(exec::PackedModel& pm, const std::vector<CollapsePrompt>& prompts,
                                               const CollapseOptions& options) {
  if (!pm.has_reference())
    invalid("collapse checks compare against the unquantized model: load the packed model with its source (--model)");
  pm.use_reference(false);
  model::Model& m = pm.model();
  const bool byte_level = m.config().byte_level();
  const int n = byte_level ? 8 : 4;
  model::GenerateOptions g;
  g.max_new_tokens = options.new_tokens;
  std::vector<CollapseCheck> out;
  const int64_t total = 2 * int64_t(prompts.size()) * options.new_tokens;
  int64_t done = 0;
  const auto on_token = [&](int32_t) {
    if (options.progress) options.progress(++done, total);
  };
  for (const CollapsePrompt& p : prompts) {
    CollapseCheck c;
    c.domain = p.domain;
    c.offset = p.offset;
    c.prompt = p.tokens;
    pm.use_reference(true);
    c.reference = model::generate(pm.model(), p.tokens, g, on_token).tokens;
    pm.use_reference(false);
    c.packed = model::generate(m, p.tokens, g, on_token).tokens;
    c.loop_reference = repeated_ngram_coverage(c.reference, n);
    c.loop_packed = repeated_ngram_coverage(c.packed, n);
    c.drift_jsd = class_divergence(c.packed, c.reference, byte_level, m.config().vocab_size);
    const CollapseThresholds& th = options.thresholds;
    c.loop = c.loop_packed >= th.loop_coverage && c.loop_packed >= c.loop_reference + th.loop_margin;
    c.drift = c.drift_jsd > th.drift_jsd;
    out.push_back(std::move(c));
  }
  pm.use_reference(false);
  return out;
}

}  // namespace eq::eval
