#include "tokenizer/hf_tokenizer.h"

#include <atomic>
#include <unordered_map>

#include "core/error.h"
#include "core/thread_pool.h"
#include "core/utf8.h"

namespace eq::tokenizer {

namespace {
std::atomic<uint64_t> next_tokenizer_serial{1};
const JsonNode& or_null(const std::optional<JsonNode>& n, const JsonNode& null_node) { return n ? *n : null_node; }
}  // namespace

HfTokenizer::HfTokenizer(const JsonNode& root, const TokenizerConfig& config, std::string source)
    : source_(std::move(source)), serial_(next_tokenizer_serial++) {
  root.require_object();
  static const nlohmann::json kNull;
  const JsonNode null_node(kNull, root.file(), "");
  if (auto a = root.find("added_tokens")) added_ = AddedTokens(*a);
  model_ = std::make_unique<BpeModel>(root.at("model"));
  if (auto a = root.find("added_tokens")) check_added_ids(*a);
  normalizer_ = make_normalizer(or_null(root.find("normalizer"), null_node));
  pre_tokenizer_ = make_pre_tokenizer(or_null(root.find("pre_tokenizer"), null_node));
  decoder_ = make_decoder(or_null(root.find("decoder"), null_node));
  for (const char* key : {"normalizer", "pre_tokenizer"})
    labels_.push_back(root.find(key) ? component_label(*root.find(key)) : source_);
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

// The reference gives an added token the model's id for its content when the
// vocabulary has it, and otherwise an id past the vocabulary, whatever the
// file says (it only warns): an id of the file that names another vocabulary
// token, or a token of the vocabulary listed with another id, would encode
// and decode differently from it, so both are refused naming the field.
void HfTokenizer::check_added_ids(const JsonNode& list) const {
  const Vocab& vocab = model_->vocab();
  for (size_t i = 0; i < added_.all().size(); ++i) {
    const AddedToken& t = added_.all()[i];
    const JsonNode id = list.index(i).at("id");
    if (const auto vocab_id = vocab.id(t.content); vocab_id && *vocab_id != t.id)
      id.invalid("\"" + t.content + "\" is id " + std::to_string(*vocab_id) + " of model.vocab, not " +
                 std::to_string(t.id));
    if (const std::string* other = vocab.token(t.id); other && *other != t.content)
      id.invalid("id " + std::to_string(t.id) + " is \"" + *other + "\" in model.vocab, not \"" + t.content + "\"");
  }
}

std::optional<int32_t> HfTokenizer::token_id(const std::string& token) const {
  if (const AddedToken* a = added_.by_content(token)) return a->id;
  return model_->vocab().id(token);
}

// Ids of words this thread has encoded with this tokenizer: text repeats
// words constantly, and BPE on a word costs far more than a lookup. Per
// thread, so encode stays safe to run from several threads without locks, and
// documents encoded one after another on a pool thread share it.
struct HfTokenizer::WordCache {
  static constexpr size_t kMaxWordBytes = 256;
  static constexpr size_t kMaxEntries = size_t{1} << 16;
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> ids;
};

// Keyed by a serial number never reused (an address can be, by the next
// tokenizer loaded); the caches of the last few tokenizers a thread used are kept.
HfTokenizer::WordCache& HfTokenizer::thread_cache() const {
  constexpr size_t kTokenizersKept = 4;
  thread_local std::unordered_map<uint64_t, WordCache> caches;
  if (caches.size() >= kTokenizersKept && !caches.contains(serial_)) caches.clear();
  return caches[serial_];
}

void HfTokenizer::encode_word(std::string_view word, WordCache& cache, std::vector<int32_t>& ids) const {
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
}

void HfTokenizer::split_section(std::string_view section, bool at_text_start, const WordSink& sink) const {
  std::string normalized;
  std::string_view text = section;
  if (normalizer_) {
    normalized.assign(section);
    normalizer_->normalize(normalized, kMaxComponentBytes);
    if (normalized.size() > kMaxComponentBytes) component_too_large(labels_[0], normalized.size(), kMaxComponentBytes);
    text = normalized;
  }
  const PieceSink word = [&](std::string_view piece, bool) {
    if (piece.size() > kMaxComponentBytes) component_too_large(labels_[1], piece.size(), kMaxComponentBytes);
    sink.word(piece);
  };
  std::vector<Segment> segments;
  if (added_.any(true)) added_.split(text, true, segments);
  else segments.push_back({0, text.size(), -1});
  for (const Segment& seg : segments) {
    if (seg.id >= 0) {
      sink.added(seg.id);
      continue;
    }
    const std::string_view part = text.substr(seg.begin, seg.end - seg.begin);
    const bool at_start = at_text_start && seg.begin == 0;
    if (pre_tokenizer_) pre_tokenizer_->split(part, at_start, word);
    else if (!part.empty()) word(part, at_start);
  }
}

void HfTokenizer::split_words(std::string_view text, const WordSink& sink) const {
  if (text.size() > kMaxDocumentBytes)
    fail(ErrorKind::kResource, source_ + ": a text of " + std::to_string(text.size()) +
                                   " bytes is more than one document may hold (" + std::to_string(kMaxDocumentBytes) +
                                   " bytes)");
  std::string repaired;  // what is not UTF-8 is read as U+FFFD first
  if (!is_valid_utf8(text)) {
    repaired = valid_utf8(text);
    text = repaired;
  }
  std::vector<Segment> segments;
  if (added_.any(false)) added_.split(text, false, segments);
  else segments.push_back({0, text.size(), -1});
  for (const Segment& seg : segments) {
    if (seg.id >= 0) sink.added(seg.id);
    else split_section(text.substr(seg.begin, seg.end - seg.begin), seg.begin == 0, sink);
  }
}

std::vector<int32_t> HfTokenizer::encode(std::string_view text, bool add_special) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 8);
  WordCache& cache = thread_cache();
  split_words(text, {[&](std::string_view w) { encode_word(w, cache, ids); }, [&](int32_t id) { ids.push_back(id); }});
  if (add_special) post_->apply(ids);
  return ids;
}

// The words are found in order on the calling thread (added tokens,
// normalizer, pre-tokenizer: a regex scan), gathered a batch at a time, and
// the batch's BPE is split over the pool in contiguous runs whose ids are
// appended in order: the same ids as encode, with memory bounded by a batch.
std::vector<int32_t> HfTokenizer::encode_parallel(std::string_view text, bool add_special, ThreadPool& pool) const {
  const size_t runs = static_cast<size_t>(pool.size());
  if (runs == 1 || text.size() < kParallelMinBytes) return encode(text, add_special);
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 8);
  // A word is arena[ends[i-1], ends[i]); an added token is stored as -(id + 1).
  std::string arena;
  std::vector<int64_t> ends;
  std::vector<std::vector<int32_t>> out(runs);
  const size_t batch_words = kParallelBatchWords * runs;
  const auto flush = [&] {
    if (ends.empty()) return;
    pool.run(runs, [&](size_t r) {
      const size_t b = ends.size() * r / runs, e = ends.size() * (r + 1) / runs;
      out[r].clear();
      WordCache& cache = thread_cache();
      int64_t at = 0;
      for (size_t i = b; i-- > 0;)
        if (ends[i] >= 0) {
          at = ends[i];
          break;
        }
      for (size_t i = b; i < e; ++i) {
        if (ends[i] < 0) {
          out[r].push_back(static_cast<int32_t>(-(ends[i] + 1)));
          continue;
        }
        encode_word(std::string_view(arena).substr(static_cast<size_t>(at), static_cast<size_t>(ends[i] - at)),
                    cache, out[r]);
        at = ends[i];
      }
    });
    for (const auto& o : out) ids.insert(ids.end(), o.begin(), o.end());
    arena.clear();
    ends.clear();
  };
  split_words(text, {[&](std::string_view w) {
                       arena.append(w);
                       ends.push_back(static_cast<int64_t>(arena.size()));
                       if (ends.size() >= batch_words) flush();
                     },
                     [&](int32_t id) {
                       ends.push_back(-(int64_t{id} + 1));
                       if (ends.size() >= batch_words) flush();
                     }});
  flush();
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
    size_t bytes = 0;
    for (const std::string& t : tokens) bytes += t.size();
    decoder_->decode_chain(tokens, kDecodeGrowth * bytes + kMaxComponentBytes);
    for (const std::string& t : tokens) out += t;
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
  }
  return out;
}

}  // namespace eq::tokenizer
