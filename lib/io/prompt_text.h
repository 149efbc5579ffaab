// Prompts typed on a command line: `--prompt "import os\nimport"` reaches us
// with a backslash and an 'n', because shells do not translate escapes inside
// quotes. unescape_prompt() turns the C escapes \n \t \r \0 \\ \" \' and
// \xHH into their bytes; any other backslash is kept as typed. (Pass
// --raw-prompt, or --prompt-file, to send a prompt byte for byte.)
#pragma once

#include <string>
#include <string_view>

namespace eq::io {

std::string unescape_prompt(std::string_view text);

}  // namespace eq::io
