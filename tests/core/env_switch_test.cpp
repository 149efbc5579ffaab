// env_switch and env_switch_or_unset (core/env_switch.h): how a measurement
// switch reads its value.
#include <gtest/gtest.h>

#include <cstdlib>

#include "core/env_switch.h"

namespace eq {
namespace {

constexpr const char* kName = "EQ_TEST_ENV_SWITCH";

bool with(const char* value, bool fallback) {
  if (value == nullptr) ::unsetenv(kName);
  else ::setenv(kName, value, 1);
  const bool on = env_switch(kName, fallback);
  ::unsetenv(kName);
  return on;
}

TEST(EnvSwitch, ZeroIsOffOneIsOnElseTheFallback) {
  for (bool fallback : {false, true}) {
    EXPECT_FALSE(with("0", fallback));
    EXPECT_TRUE(with("1", fallback));
    EXPECT_EQ(with(nullptr, fallback), fallback);
    EXPECT_EQ(with("", fallback), fallback);
    EXPECT_EQ(with("yes", fallback), fallback);
  }
}

TEST(EnvSwitch, OrUnsetSaysWhichOfTheThree) {
  const auto mode = [](const char* value) {
    if (value == nullptr) ::unsetenv(kName);
    else ::setenv(kName, value, 1);
    const int m = env_switch_or_unset(kName);
    ::unsetenv(kName);
    return m;
  };
  EXPECT_EQ(mode("0"), 0);
  EXPECT_EQ(mode("1"), 1);
  EXPECT_EQ(mode("10"), 1);
  EXPECT_EQ(mode(nullptr), -1);
  EXPECT_EQ(mode(""), -1);
  EXPECT_EQ(mode("on"), -1);
}

}  // namespace
}  // namespace eq
