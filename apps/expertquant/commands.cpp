#include "commands.h"

namespace eq::app {

std::vector<Command> add_all_commands(CLI::App& app) {
  std::vector<Command> c;
  c.push_back(add_inspect(app));
  c.push_back(add_profile(app));
  c.push_back(add_pack(app));
  c.push_back(add_verify(app));
  c.push_back(add_merge(app));
  c.push_back(add_export(app));
  c.push_back(add_perplexity(app));
  c.push_back(add_generate(app));
  c.push_back(add_eval(app));
  c.push_back(add_tune(app));
  c.push_back(add_formats(app));
  c.push_back(add_tokenize(app));
  return c;
}

}  // namespace eq::app
