#include "support/multimodal_wrapper.h"

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "io/text_file.h"

namespace eq::test {

namespace fs = std::filesystem;

fs::path make_multimodal_wrapper(const fs::path& text_model, const fs::path& dir) {
  fs::create_directories(dir);
  nlohmann::json text = nlohmann::json::parse(io::read_file_bytes((text_model / "config.json").string()));
  nlohmann::json wrapper = {{"model_type", "qwen3_5_moe"},
                            {"architectures", {"Qwen3_5MoeForConditionalGeneration"}},
                            {"text_config", text},
                            {"vision_config", {{"depth", 1}, {"hidden_size", 8}}}};
  std::ofstream(dir / "config.json") << wrapper.dump(2);
  auto ckpt = io::Checkpoint::open(text_model.string());
  std::vector<io::TensorToWrite> tensors;
  for (const std::string& n : ckpt->tensor_names()) {
    const io::TensorView v = ckpt->view(n);
    const std::string to = n.rfind("model.", 0) == 0 ? "model.language_model." + n.substr(6) : n;
    tensors.push_back({to, v.info->dtype, v.info->shape, v.bytes()});
  }
  static const std::vector<uint8_t> vision(4 * 8 * 2, 0);
  tensors.push_back({kWrapperVisionTensor, DType::kBF16, {4, 8}, vision});
  io::write_safetensors((dir / "model.safetensors").string(), tensors);
  return dir;
}

}  // namespace eq::test
