#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/unicode.h"
#include "core/utf8.h"

namespace eq::tokenizer {

AddedTokens::AddedTokens(const JsonNode& list) {
  list.require_array();
  for (size_t i = 0; i < list.value().size(); ++i) {
    const JsonNode n = list.index(i);
    AddedToken t;
    const JsonNode id = n.at("id");
    const int64_t v = id.integer();
    if (v < 0 || v > kMaxTokenId) id.invalid("expected an id in [0, " + std::to_string(kMaxTokenId) + "], found " + std::to_string(v));
    t.id = static_cast<int32_t>(v);
    t.content = n.at("content").str();
    if (t.content.empty()) n.at("content").invalid("expected a non-empty string");
    t.special = n.bool_or("special", false);
    t.single_word = n.bool_or("single_word", false);
    t.lstrip = n.bool_or("lstrip", false);
    t.rstrip = n.bool_or("rstrip", false);
    t.normalized = n.bool_or("normalized", !t.special);
    if (static_cast<size_t>(t.id) < index_of_id_.size() && index_of_id_[t.id] >= 0)
      id.invalid("id " + std::to_string(t.id) + " is already \"" + tokens_[index_of_id_[t.id]].content + "\"");
    if (!by_content_.emplace(t.content, static_cast<int32_t>(tokens_.size())).second)
      n.at("content").invalid("\"" + t.content + "\" is listed twice");
    if (static_cast<size_t>(t.id) >= index_of_id_.size()) index_of_id_.resize(t.id + 1, -1);
    index_of_id_[t.id] = static_cast<int32_t>(tokens_.size());
    (t.normalized ? any_normalized_ : any_raw_) = true;
    tokens_.push_back(std::move(t));
  }
  for (uint32_t i = 0; i < tokens_.size(); ++i)
    by_first_byte_[static_cast<unsigned char>(tokens_[i].content[0])].push_back(i);
  for (auto& v : by_first_byte_)
    std::stable_sort(v.begin(), v.end(),
                     [&](uint32_t a, uint32_t b) { return tokens_[a].content.size() > tokens_[b].content.size(); });
}

const AddedToken* AddedTokens::by_id(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= index_of_id_.size() || index_of_id_[id] < 0) return nullptr;
  return &tokens_[index_of_id_[id]];
}

const AddedToken* AddedTokens::by_content(std::string_view content) const {
  auto it = by_content_.find(content);
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

namespace {
bool word_char_before(std::string_view text, size_t pos) {
  if (pos == 0) return false;
  size_t b = pos - 1;
  while (b > 0 && (static_cast<uint8_t>(text[b]) & 0xC0) == 0x80) --b;
  const size_t n = utf8_sequence_length(text, b);
  return n == pos - b && is_alphanumeric(utf8_decode_at(text, b, n));
}
bool word_char_after(std::string_view text, size_t pos) {
  if (pos >= text.size()) return false;
  const size_t n = utf8_sequence_length(text, pos);
  return n != 0 && is_alphanumeric(utf8_decode_at(text, pos, n));
}
}  // namespace

void AddedTokens::split(std::string_view text, bool normalized, std::vector<Segment>& out) const {
  size_t done = 0;  // end of the last emitted segment
  size_t pos = 0;
  while (pos < text.size()) {
    const auto& candidates = by_first_byte_[static_cast<unsigned char>(text[pos])];
    const AddedToken* hit = nullptr;
    for (uint32_t i : candidates) {
      const AddedToken& t = tokens_[i];
      if (t.normalized != normalized) continue;
      if (text.compare(pos, t.content.size(), t.content) == 0) {
        hit = &t;
        break;
      }
    }
    if (!hit) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + hit->content.size();
    if (hit->single_word && (word_char_before(text, start) || word_char_after(text, stop))) {
      pos = stop;  // the search goes on after the refused match, as the reference's matcher does
      continue;
    }
    if (hit->lstrip) start = std::max(done, start - trailing_whitespace_bytes(text.substr(0, start)));
    if (hit->rstrip) stop += leading_whitespace_bytes(text.substr(stop));
    if (done < start) out.push_back({done, start, -1});
    out.push_back({start, stop, hit->id});
    done = pos = stop;
  }
  if (done < text.size()) out.push_back({done, text.size(), -1});
}

}  // namespace eq::tokenizer
