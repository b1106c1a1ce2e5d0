#include "text/structured/grammar.h"

#include "core/error.h"

namespace fs::structured {

uint32_t GrammarBuilder::new_rule() {
  alts_.emplace_back();
  return uint32_t(alts_.size() - 1);
}

void GrammarBuilder::add_alt(uint32_t rule, Seq seq) { alts_[rule].push_back(std::move(seq)); }

Sym GrammarBuilder::set(const ByteSet& s) {
  for (size_t i = 0; i < sets_.size(); ++i)
    if (sets_[i] == s) return {false, uint32_t(i)};
  sets_.push_back(s);
  return {false, uint32_t(sets_.size() - 1)};
}

Sym GrammarBuilder::byte(uint8_t b) {
  ByteSet s;
  s.add(b);
  return set(s);
}

Seq GrammarBuilder::literal(std::string_view text) {
  Seq out;
  for (char c : text) out.push_back(byte(uint8_t(c)));
  return out;
}

Sym GrammarBuilder::any_of(std::vector<Seq> alts) {
  uint32_t r = new_rule();
  for (auto& a : alts) add_alt(r, std::move(a));
  return {true, r};
}

Sym GrammarBuilder::optional(Seq s) { return any_of({std::move(s), {}}); }

Sym GrammarBuilder::star(Seq s) {
  uint32_t r = new_rule();
  s.push_back({true, r});
  add_alt(r, std::move(s));
  add_alt(r, {});
  return {true, r};
}

Seq GrammarBuilder::repeat(const Seq& s, int min, int max) {
  Seq out;
  for (int i = 0; i < min; ++i) append(out, s);
  if (max < 0) {
    out.push_back(star(s));
    return out;
  }
  // Right-nested optionals: (s (s (s)?)?)?
  Seq tail;
  for (int i = min; i < max; ++i) {
    Seq inner = s;
    append(inner, tail);
    tail = {optional(std::move(inner))};
  }
  append(out, tail);
  return out;
}

Grammar GrammarBuilder::build(uint32_t root) const {
  Grammar g;
  g.sets = sets_;
  g.root = root;
  g.rule_alts.resize(alts_.size());
  for (size_t r = 0; r < alts_.size(); ++r) {
    if (alts_[r].empty()) throw Error("grammar rule " + std::to_string(r) + " has no alternatives");
    for (const Seq& seq : alts_[r]) {
      g.rule_alts[r].push_back(uint32_t(g.code.size()));
      for (Sym s : seq) g.code.push_back({s.is_rule ? Grammar::Ref : Grammar::Set, s.id});
      g.code.push_back({Grammar::End, 0});
    }
  }
  return g;
}

}  // namespace fs::structured
