// config.json -> architecture config (model_type, sizes, expert counts, layer kinds).
#include <string_view>

#include "fuzz/fuzz_target.h"
#include "model/config.h"

EQ_FUZZ_TARGET(config) {
  eq::model::parse_config_text(std::string_view(reinterpret_cast<const char*>(input.data()), input.size()),
                               "fuzz/config.json");
}
