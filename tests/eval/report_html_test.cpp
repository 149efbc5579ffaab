// The HTML report built from a hand-made EvalReport (no model needed): the
// collapse prompts read as UTF-8 text and the class heatmap has an expert axis.
#include <gtest/gtest.h>

#include <string>

#include "eval/report.h"

namespace eq::eval {
namespace {

std::vector<int32_t> byte_tokens(const std::string& s) {
  std::vector<int32_t> t;
  for (char c : s) t.push_back(static_cast<unsigned char>(c));
  return t;
}

EvalReport report_with_prompt(const std::string& prompt_bytes, bool byte_level) {
  EvalReport r;
  r.byte_level = byte_level;
  CollapseCheck c;
  c.domain = "prose";
  c.prompt = byte_tokens(prompt_bytes);
  c.reference = byte_tokens("ok");
  c.packed = byte_tokens("ok");
  r.collapse.push_back(c);
  r.packed.layers = {1, 2};
  r.packed.classes = {std::vector<int>(24, 0), std::vector<int>(24, 1)};
  return r;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST(ReportHtml, CollapsePromptsAreDecodedAsUtf8) {
  // "café <日本> & x" then an invalid byte and a control byte.
  const std::string prompt = "caf\xC3\xA9 <\xE6\x97\xA5\xE6\x9C\xAC> & x\xFF\x01";
  const std::string html = report_html(report_with_prompt(prompt, true));
  EXPECT_NE(html.find("<pre>caf\xC3\xA9 &lt;\xE6\x97\xA5\xE6\x9C\xAC&gt; &amp; x\xEF\xBF\xBD\xE2\x90\x81</pre>"),
            std::string::npos)
      << html.substr(html.find("<table id='collapse'"));
  EXPECT_EQ(html.find("\\xc3"), std::string::npos);  // no byte-by-byte escapes left
  EXPECT_EQ(html.find("\\xff"), std::string::npos);
}

TEST(ReportHtml, TokenIdsStayIdsWithoutByteLevel) {
  const std::string html = report_html(report_with_prompt("AB", false));
  EXPECT_NE(html.find("<pre>65 66 </pre>"), std::string::npos);
}

TEST(ReportHtml, ClassHeatmapHasAnExpertAxis) {
  const std::string html = report_html(report_with_prompt("x", true));
  const size_t axis = html.find("<g class='expert-axis'");
  ASSERT_NE(axis, std::string::npos);
  const std::string g = html.substr(axis, html.find("</g>", axis) - axis);
  // 24 experts at 14 px: a tick every 2 experts (28 px apart), 0..22, and the axis name.
  EXPECT_EQ(count(g, "<line"), 12u) << g;
  for (const char* label : {">0</text>", ">2</text>", ">22</text>", ">expert</text>"})
    EXPECT_NE(g.find(label), std::string::npos) << label << "\n" << g;
  EXPECT_EQ(g.find(">23</text>"), std::string::npos) << g;
  EXPECT_LT(axis, html.find("</svg>", html.find("aria-label='class heatmap'")));
}

}  // namespace
}  // namespace eq::eval
