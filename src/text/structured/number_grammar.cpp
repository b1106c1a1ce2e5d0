#include "text/structured/number_grammar.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace fs::structured {

namespace {

Sym digits(GrammarBuilder& b, char lo, char hi) {
  ByteSet s;
  s.add_range(lo, hi);
  return b.set(s);
}

// Alternatives spelling every decimal string of the same length between a and b (a <= b, equal lengths).
void same_length(GrammarBuilder& b, const std::string& lo, const std::string& hi, Seq prefix, std::vector<Seq>& out) {
  if (lo.empty()) {
    out.push_back(std::move(prefix));
    return;
  }
  if (lo[0] == hi[0]) {
    prefix.push_back(digits(b, lo[0], lo[0]));
    return same_length(b, lo.substr(1), hi.substr(1), std::move(prefix), out);
  }
  const size_t rest = lo.size() - 1;
  const std::string nines(rest, '9'), zeros(rest, '0');
  const bool lo_full = lo.substr(1) == zeros, hi_full = hi.substr(1) == nines;
  const char mid_lo = lo_full ? lo[0] : char(lo[0] + 1), mid_hi = hi_full ? hi[0] : char(hi[0] - 1);
  if (!lo_full) {
    Seq p = prefix;
    p.push_back(digits(b, lo[0], lo[0]));
    same_length(b, lo.substr(1), nines, std::move(p), out);
  }
  if (mid_lo <= mid_hi) {
    Seq p = prefix;
    p.push_back(digits(b, mid_lo, mid_hi));
    for (size_t i = 0; i < rest; ++i) p.push_back(digits(b, '0', '9'));
    out.push_back(std::move(p));
  }
  if (!hi_full) {
    Seq p = prefix;
    p.push_back(digits(b, hi[0], hi[0]));
    same_length(b, zeros, hi.substr(1), std::move(p), out);
  }
}

// Alternatives for the non-negative integers [lo, hi].
void non_negative(GrammarBuilder& b, int64_t lo, int64_t hi, Seq prefix, std::vector<Seq>& out) {
  if (lo > hi) return;
  int64_t start = lo;
  while (start <= hi) {
    const std::string s = std::to_string(start);
    int64_t top = 9;
    for (size_t i = 1; i < s.size(); ++i) top = top * 10 + 9;
    const int64_t end = std::min(hi, top);
    same_length(b, s, std::to_string(end), prefix, out);
    if (end == hi) break;
    start = end + 1;
  }
}

}  // namespace

Seq json_number(GrammarBuilder& b, bool integer_only) {
  const Sym digit = digits(b, '0', '9');
  Seq out{b.optional(b.literal("-")), b.any_of({b.literal("0"), {digits(b, '1', '9'), b.star({digit})}})};
  if (integer_only) return out;
  out.push_back(b.optional({b.byte('.'), digit, b.star({digit})}));
  ByteSet e, sign;
  e.add('e');
  e.add('E');
  sign.add('+');
  sign.add('-');
  out.push_back(b.optional({b.set(e), b.optional({b.set(sign)}), digit, b.star({digit})}));
  return out;
}

Seq bounded_number(GrammarBuilder& b, int64_t lo, int64_t hi, bool fraction) {
  if (lo > hi) throw Error("the bounds leave no integer between them");
  const Sym digit = digits(b, '0', '9');
  const Seq frac = {b.byte('.'), digit, b.star({digit})};
  std::vector<Seq> alts;
  // Non-negative values i, and i.fff where i + 1 <= hi.
  if (hi >= 0) {
    const int64_t a = std::max<int64_t>(lo, 0);
    non_negative(b, a, hi, {}, alts);
    if (fraction && a <= hi - 1) {
      std::vector<Seq> with_frac;
      non_negative(b, a, hi - 1, {}, with_frac);
      Seq s{b.any_of(std::move(with_frac))};
      append(s, frac);
      alts.push_back(std::move(s));
    }
  }
  // Negative values -m, and -m.fff where -(m + 1) >= lo.
  if (lo < 0) {
    const int64_t m_lo = std::max<int64_t>(1, hi < 0 ? -hi : 1), m_hi = -lo;
    non_negative(b, m_lo, m_hi, b.literal("-"), alts);
    if (fraction && m_lo <= m_hi - 1) {
      std::vector<Seq> with_frac;
      non_negative(b, m_lo, m_hi - 1, {}, with_frac);
      Seq s = b.literal("-");
      s.push_back(b.any_of(std::move(with_frac)));
      append(s, frac);
      alts.push_back(std::move(s));
    }
  }
  return {b.any_of(std::move(alts))};
}

}  // namespace fs::structured
