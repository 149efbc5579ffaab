#include "tokenizer/hf_tokenizer.h"

#include <unordered_map>

#include "core/error.h"
#include "core/utf8.h"

namespace eq::tokenizer {

namespace {
const JsonNode& or_null(const std::optional<JsonNode>& n, const JsonNode& null_node) { return n ? *n : null_node; }
}  // namespace

HfTokenizer::HfTokenizer(const JsonNode& root, const TokenizerConfig& config, std::string source)
    : source_(std::move(source)) {
  root.require_object();
  static const nlohmann::json kNull;
  const JsonNode null_node(kNull, root.file(), "");
  if (auto a = root.find("added_tokens")) added_ = AddedTokens(*a);
  model_ = std::make_unique<BpeModel>(root.at("model"));
  normalizer_ = make_normalizer(or_null(root.find("normalizer"), null_node));
  pre_tokenizer_ = make_pre_tokenizer(or_null(root.find("pre_tokenizer"), null_node));
  decoder_ = make_decoder(or_null(root.find("decoder"), null_node));
  post_ = std::make_unique<PostProcessor>(make_post_processor(or_null(root.find("post_processor"), null_node)));

  vocab_size_ = model_->vocab().size();
  for (const AddedToken& t : added_.all()) vocab_size_ = std::max<int64_t>(vocab_size_, int64_t{t.id} + 1);

  const auto resolve = [&](const std::string& token, const char* field) -> int32_t {
    auto id = token_id(token);
    if (!id) eq::invalid(source_ + ": tokenizer_config.json " + field + " \"" + token + "\" is not a token of the tokenizer");
    return *id;
  };
  if (config.add_bos || config.add_eos) {
    std::vector<int32_t> before, after;
    if (config.add_bos.value_or(false) && !config.bos_token.empty()) before.push_back(resolve(config.bos_token, "bos_token"));
    if (config.add_eos.value_or(false) && !config.eos_token.empty()) after.push_back(resolve(config.eos_token, "eos_token"));
    post_ = std::make_unique<PostProcessor>(std::move(before), std::move(after));
  }
  if (!config.eos_token.empty()) eos_id_ = resolve(config.eos_token, "eos_token");
  for (const int32_t id : post_->before())
    if (id >= vocab_size_) eq::invalid(source_ + ": post_processor: id " + std::to_string(id) + " is outside the vocabulary");
  for (const int32_t id : post_->after())
    if (id >= vocab_size_) eq::invalid(source_ + ": post_processor: id " + std::to_string(id) + " is outside the vocabulary");
}

std::optional<int32_t> HfTokenizer::token_id(const std::string& token) const {
  if (const AddedToken* a = added_.by_content(token)) return a->id;
  return model_->vocab().id(token);
}

// Ids of words already encoded in this call: text repeats words constantly,
// and BPE on a word costs far more than a lookup. Per call, so encode stays
// safe to run from several threads without locks.
struct HfTokenizer::WordCache {
  static constexpr size_t kMaxWordBytes = 256;
  static constexpr size_t kMaxEntries = size_t{1} << 16;
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> ids;
};

void HfTokenizer::encode_section(std::string_view section, bool at_text_start, WordCache& cache,
                                 std::vector<int32_t>& ids) const {
  std::string normalized;
  std::string_view text = section;
  if (normalizer_) {
    normalized.assign(section);
    normalizer_->normalize(normalized);
    text = normalized;
  }
  const auto encode_word = [&](std::string_view word, bool) {
    if (word.size() > WordCache::kMaxWordBytes) {
      model_->encode_word(word, ids);
      return;
    }
    auto it = cache.ids.find(word);
    if (it == cache.ids.end()) {
      if (cache.ids.size() >= WordCache::kMaxEntries) cache.ids.clear();
      std::vector<int32_t> word_ids;
      model_->encode_word(word, word_ids);
      it = cache.ids.emplace(std::string(word), std::move(word_ids)).first;
    }
    ids.insert(ids.end(), it->second.begin(), it->second.end());
  };
  const PieceSink sink = encode_word;
  std::vector<Segment> segments;
  if (added_.any(true)) added_.split(text, true, segments);
  else segments.push_back({0, text.size(), -1});
  for (const Segment& seg : segments) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    const std::string_view part = text.substr(seg.begin, seg.end - seg.begin);
    const bool at_start = at_text_start && seg.begin == 0;
    if (pre_tokenizer_) pre_tokenizer_->split(part, at_start, sink);
    else if (!part.empty()) encode_word(part, at_start);
  }
}

std::vector<int32_t> HfTokenizer::encode(std::string_view text, bool add_special) const {
  std::string repaired;
  if (!is_valid_utf8(text)) {
    repaired = valid_utf8(text);
    text = repaired;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 8);
  WordCache cache;
  std::vector<Segment> segments;
  if (added_.any(false)) added_.split(text, false, segments);
  else segments.push_back({0, text.size(), -1});
  for (const Segment& seg : segments) {
    if (seg.id >= 0) ids.push_back(seg.id);
    else encode_section(text.substr(seg.begin, seg.end - seg.begin), seg.begin == 0, cache, ids);
  }
  if (add_special) post_->apply(ids);
  return ids;
}

std::string HfTokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const AddedToken* a = added_.by_id(ids[i]);
    const std::string* t = a ? &a->content : model_->vocab().token(ids[i]);
    if (!t)
      eq::invalid("token " + std::to_string(i) + ": id " + std::to_string(ids[i]) + " has no token in " + source_ +
                  " (ids 0.." + std::to_string(vocab_size_ - 1) + ")");
    if (skip_special && a && a->special) continue;
    tokens.push_back(*t);
  }
  std::string out;
  if (decoder_) {
    decoder_->decode_chain(tokens);
    for (const std::string& t : tokens) out += t;
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
  }
  return out;
}

}  // namespace eq::tokenizer
