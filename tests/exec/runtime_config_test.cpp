// Where the runtime config is read from and written to: the user's config
// folder ($XDG_CONFIG_HOME, else ~/.config), never a file of the source tree.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "exec/runtime_config.h"
#include "test_support.h"

namespace eq::exec {
namespace {

namespace fs = std::filesystem;

// Sets (or unsets, with nullopt) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value->c_str(), 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(RuntimeConfigLocation, XdgConfigHomeThenHome) {
  const fs::path dir = test::temp_dir("runtime-location");
  const ScopedEnv env("EXPERTQUANT_RUNTIME_CONFIG", std::nullopt);
  const ScopedEnv home("HOME", (dir / "home").string());
  {
    const ScopedEnv xdg("XDG_CONFIG_HOME", (dir / "xdg").string());
    EXPECT_EQ(user_runtime_config_path(), (dir / "xdg" / "expertquant" / "runtime.json").string());
  }
  {
    const ScopedEnv xdg("XDG_CONFIG_HOME", std::nullopt);
    EXPECT_EQ(user_runtime_config_path(), (dir / "home" / ".config" / "expertquant" / "runtime.json").string());
  }
  {
    // The XDG spec: a relative $XDG_CONFIG_HOME is invalid and ignored.
    const ScopedEnv xdg("XDG_CONFIG_HOME", "relative/config");
    EXPECT_EQ(user_runtime_config_path(), (dir / "home" / ".config" / "expertquant" / "runtime.json").string());
  }
  {
    const ScopedEnv xdg("XDG_CONFIG_HOME", std::nullopt);
    const ScopedEnv no_home("HOME", std::nullopt);
    EXPECT_EQ(user_runtime_config_path(), "");
    EXPECT_EQ(default_runtime_config_path(), "");
    EXPECT_EQ(default_runtime_config().source, "built-in default");
  }
}

TEST(RuntimeConfigLocation, WrittenThereIsReadBackElseBuiltInDefaults) {
  const fs::path dir = test::temp_dir("runtime-roundtrip");
  const ScopedEnv env("EXPERTQUANT_RUNTIME_CONFIG", std::nullopt);
  const ScopedEnv xdg("XDG_CONFIG_HOME", (dir / "xdg").string());
  const std::string user = (dir / "xdg" / "expertquant" / "runtime.json").string();
  // Nothing written yet: no file is found (none in the source tree either), the built-in defaults apply.
  EXPECT_EQ(find_runtime_config(), "");
  const RuntimeConfig none = default_runtime_config();
  EXPECT_EQ(none.source, "built-in default");
  EXPECT_EQ(none.sort_cutoff, kDefaultSortCutoff);
  EXPECT_EQ(none.mlp_kernels.decode_max_tokens, kDefaultDecodeMaxTokens);

  RuntimeConfig r;
  r.sort_cutoff = 17;
  r.mlp_kernels.decode_max_tokens = 3;
  r.mlp_kernels.small_batch_max_tokens = 40;
  EXPECT_EQ(default_runtime_config_path(), user);
  write_runtime_config(r, user);  // creates xdg/expertquant/
  EXPECT_EQ(find_runtime_config(), user);
  const RuntimeConfig back = default_runtime_config();
  EXPECT_EQ(back.source, user);
  EXPECT_EQ(back.sort_cutoff, 17);
  EXPECT_EQ(back.mlp_kernels.decode_max_tokens, 3);
  EXPECT_EQ(back.mlp_kernels.small_batch_max_tokens, 40);

  // $EXPERTQUANT_RUNTIME_CONFIG names the file to use instead, existing or not.
  const std::string named = (dir / "named.json").string();
  const ScopedEnv set("EXPERTQUANT_RUNTIME_CONFIG", named);
  EXPECT_EQ(default_runtime_config_path(), named);
  EXPECT_EQ(find_runtime_config(), named);
}

}  // namespace
}  // namespace eq::exec
