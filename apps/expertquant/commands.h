// Subcommand wiring. Each cmd_<name>.cpp defines add_<name>(app): it adds its
// CLI11 subcommand, binds options into a plain struct (kept alive by the
// returned closure) and returns the function that runs it. commands.cpp lists
// them all, in the order `--help` shows them.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace eq::app {

struct Command {
  CLI::App* sub = nullptr;
  std::function<int()> run;
};

std::vector<Command> add_all_commands(CLI::App& app);

Command add_inspect(CLI::App& app);
Command add_profile(CLI::App& app);
Command add_pack(CLI::App& app);
Command add_verify(CLI::App& app);
Command add_merge(CLI::App& app);
Command add_export(CLI::App& app);
Command add_perplexity(CLI::App& app);
Command add_generate(CLI::App& app);
Command add_eval(CLI::App& app);
Command add_tune(CLI::App& app);
Command add_formats(CLI::App& app);
Command add_tokenize(CLI::App& app);

// The formats table that ends `pack --help` (cmd_formats.cpp).
std::string formats_help_footer();

}  // namespace eq::app
