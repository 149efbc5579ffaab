// The command-line checks the hardening tests share: a command run under
// `timeout` (a regression that blocks fails with 124 instead of hanging the
// suite) and the shape of a refusal (its exit code, the error prefix, and
// the names it must give).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_support.h"

namespace eq::test {

inline int run_cli(const std::string& args, std::string* out) {
  return run_command("timeout 60 " + binary() + " " + args, out);
}

inline void expect_cli_error(int rc, const std::string& out, int code, const std::vector<std::string>& needles) {
  EXPECT_EQ(rc, code) << out;
  EXPECT_NE(out.find("expertquant: error: "), std::string::npos) << out;
  for (const auto& n : needles) EXPECT_NE(out.find(n), std::string::npos) << "missing '" << n << "' in: " << out;
}

}  // namespace eq::test
