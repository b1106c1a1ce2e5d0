#pragma once
// A byte-level context-free grammar: rules of alternatives, each a sequence of byte sets and rule references.
// Compilers (regex, JSON Schema) build one with GrammarBuilder; ByteAutomaton runs it.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fs::structured {

// A set of byte values.
struct ByteSet {
  std::array<uint64_t, 4> bits{};
  void add(uint8_t b) { bits[b >> 6] |= uint64_t(1) << (b & 63); }
  void add_range(int lo, int hi) {
    for (int b = lo; b <= hi; ++b) add(uint8_t(b));
  }
  bool has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  bool empty() const { return (bits[0] | bits[1] | bits[2] | bits[3]) == 0; }
  bool operator==(const ByteSet&) const = default;
};

// One element of a sequence: a byte set (is_rule false) or a reference to a rule.
struct Sym {
  bool is_rule = false;
  uint32_t id = 0;
};
using Seq = std::vector<Sym>;

// Flat code: every alternative is a run of elements ending in an End element; positions index `code`.
struct Grammar {
  enum Kind : uint8_t { Set, Ref, End };
  struct Elem {
    Kind kind;
    uint32_t arg;  // set id or rule id
  };
  std::vector<Elem> code;
  std::vector<ByteSet> sets;
  std::vector<std::vector<uint32_t>> rule_alts;  // rule → start positions of its alternatives
  uint32_t root = 0;
};

class GrammarBuilder {
 public:
  // A fresh rule with no alternatives yet (so a rule may refer to itself before it is defined).
  uint32_t new_rule();
  void add_alt(uint32_t rule, Seq seq);
  Sym set(const ByteSet& s);
  Sym byte(uint8_t b);
  // The bytes of `text`, one set each.
  Seq literal(std::string_view text);
  // A rule matching any one of `alts`.
  Sym any_of(std::vector<Seq> alts);
  Sym optional(Seq s);
  Sym star(Seq s);
  // `s` repeated min..max times (max < 0 → unbounded).
  Seq repeat(const Seq& s, int min, int max);
  size_t rule_count() const { return alts_.size(); }
  // Flattens the rules; `root` is the rule the whole input must match.
  Grammar build(uint32_t root) const;

 private:
  std::vector<std::vector<Seq>> alts_;
  std::vector<ByteSet> sets_;
};

// Appends `tail` to `head`.
inline void append(Seq& head, const Seq& tail) { head.insert(head.end(), tail.begin(), tail.end()); }

}  // namespace fs::structured
