// expertquant formats and the formats table of pack --help: every registry row,
// with the figures of its row.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "quant/format.h"
#include "test_support.h"

namespace eq {
namespace {

TEST(FormatsCli, JsonListsEveryRowWithItsBitsAndKernels) {
  std::string out;
  ASSERT_EQ(test::run_command(test::binary() + " formats --json 2>/dev/null", &out), 0) << out;
  const auto j = nlohmann::json::parse(out);
  const auto rows = quant::all_formats();
  ASSERT_EQ(j.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(j[i]["name"], std::string(rows[i].name));
    EXPECT_DOUBLE_EQ(j[i]["bits_per_weight"].get<double>(), rows[i].bits_per_weight);
    EXPECT_EQ(j[i]["description"], std::string(rows[i].description));
    // The batch kernel follows the row's hooks.
    const std::string prefill = j[i]["prefill"];
    const char* want = rows[i].rotated ? "rotated-basis" : rows[i].int8_panels ? "int8 panels"
                       : rows[i].dequantize_block                          ? "fp32 panels"
                                                                            : "matmul";
    EXPECT_EQ(prefill.rfind(want, 0), 0u) << rows[i].name << ": " << prefill;
  }
}

TEST(FormatsCli, TableAndPackHelpNameEveryFormat) {
  std::string table, help;
  ASSERT_EQ(test::run_command(test::binary() + " formats", &table), 0) << table;
  ASSERT_EQ(test::run_command(test::binary() + " pack --help", &help), 0) << help;
  for (const quant::FormatTraits& f : quant::all_formats()) {
    const std::string name(f.name);
    EXPECT_NE(table.find("\n" + name + " "), std::string::npos) << name;
    EXPECT_NE(help.find("  " + name + " "), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace eq
