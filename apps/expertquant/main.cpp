// expertquant: one binary, one subcommand per job. This file only wires the
// subcommands; each lives in its own cmd_*.cpp and registers through commands.h.
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "json_output.h"
#include "core/error.h"

int main(int argc, char** argv) {
  // Past a file-size limit (ulimit -f) the kernel would kill us with SIGXFSZ
  // mid-write; ignored, the write fails with EFBIG and we report it and clean up.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"expertquant: profile, pack and evaluate mixed-precision Mixture-of-Experts checkpoints"};
  app.set_version_flag("--version", std::string("expertquant ") + EQ_VERSION);
  app.require_subcommand(1);
  std::vector<eq::app::Command> commands = eq::app::add_all_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" that succeed; every other parse error
    // (a missing, unknown or out-of-range option) is bad input: one line, exit 2.
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    // `--json FILE` (the JSON to a file) is --json-out FILE: say so rather than
    // "FILE was not expected".
    const std::string json_misuse = eq::app::json_value_misuse(std::vector<std::string>(argv + 1, argv + argc),
                                                               app.remaining(true));
    std::fprintf(stderr, "expertquant: error: %s\n", json_misuse.empty() ? e.what() : json_misuse.c_str());
    return static_cast<int>(eq::ErrorKind::kInvalidInput);
  }
  try {
    for (auto& c : commands)
      if (c.sub && c.sub->parsed()) return c.run();
  } catch (const eq::Error& e) {
    std::fprintf(stderr, "expertquant: error: %s\n", e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "expertquant: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
