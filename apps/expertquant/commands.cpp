#include "commands.h"

namespace eq::app {

std::vector<Command> add_all_commands(CLI::App& app) {
  std::vector<Command> c;
  c.push_back(add_inspect(app));
  return c;
}

}  // namespace eq::app
