#include "text/utf8.h"

#include <algorithm>
#include <cstdlib>
#include <utf8proc.h>

#include "core/error.h"

namespace fs::text {

char32_t next_code_point(std::string_view s, size_t& i) {
  auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) {
    ++i;
    return b;
  }
  size_t len = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
  char32_t cp = b & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
  for (size_t k = 1; k < len && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += len;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Bytes of the longest valid prefix of a sequence at s[i] (the "maximal subpart"), and its full length.
static size_t valid_prefix(std::string_view s, size_t i, size_t& need) {
  auto b = static_cast<unsigned char>(s[i]);
  unsigned char lo = 0x80, hi = 0xBF;
  if (b < 0x80) {
    need = 1;
    return 1;
  }
  if (b >= 0xC2 && b <= 0xDF) {
    need = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 3;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 4;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    need = 1;
    return 0;
  }
  size_t k = 1;
  for (; k < need && i + k < s.size(); ++k) {
    auto c = static_cast<unsigned char>(s[i + k]);
    if (k == 1 ? (c < lo || c > hi) : (c < 0x80 || c > 0xBF)) break;
  }
  return k;
}

size_t valid_sequence_length(std::string_view s, size_t i) {
  size_t need = 0;
  size_t got = valid_prefix(s, i, need);
  return got == need ? need : 0;
}

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t n = valid_sequence_length(s, i);
    if (!n) return false;
    i += n;
  }
  return true;
}

std::string repair_utf8(std::string_view s) {
  if (is_valid_utf8(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  for (size_t i = 0; i < s.size();) {
    size_t need = 0;
    size_t got = valid_prefix(s, i, need);
    if (got == need) {
      out.append(s.substr(i, got));
      i += got;
    } else {
      append_utf8(out, kReplacementChar);
      i += got ? got : 1;
    }
  }
  return out;
}

size_t complete_utf8_prefix(std::string_view s) {
  // Look back at most 3 bytes for a lead byte whose sequence runs past the end.
  size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    auto b = static_cast<unsigned char>(s[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte
    size_t need = 0;
    size_t got = valid_prefix(s, n - back, need);
    if (got == back && need > back) return n - back;
    return n;
  }
  return n;
}

bool is_whitespace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
  switch (c) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

bool is_word_char(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  if (c == 0x200C || c == 0x200D) return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

bool is_numeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

// A character no normalization form changes and that nothing before it can compose or reorder with: text can be
// normalized piecewise between such characters.
static bool is_inert(char32_t c) {
  if (c < 0x80) return true;
  if ((c >= 0x1161 && c <= 0x1175) || (c >= 0x11A8 && c <= 0x11C2)) return false;  // Hangul vowel/trailing jamo
  const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(c));
  bool second = p->comb_index >= 0x8000 && p->comb_index != 0xFFFF;
  return p->combining_class == 0 && !second && p->decomp_seqindex == 0xFFFF && !p->comp_exclusion;
}

static std::string normalize_whole(std::string_view s, NormalForm form) {
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::NFC: options |= UTF8PROC_COMPOSE; break;
    case NormalForm::NFD: options |= UTF8PROC_DECOMPOSE; break;
    case NormalForm::NFKC: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalForm::NFKD: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* out = nullptr;
  auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), static_cast<utf8proc_ssize_t>(s.size()),
                        &out, static_cast<utf8proc_option_t>(options));
  if (n < 0) throw Error(std::string("unicode normalization failed: ") + utf8proc_errmsg(n));
  std::string result(reinterpret_cast<char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

std::string normalize_unicode(std::string_view s, NormalForm form) {
  std::string out;
  size_t copied = 0;    // s[..copied) is already in out
  size_t boundary = 0;  // start of the last inert character seen
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      boundary = i++;
      continue;
    }
    size_t start = i;
    if (is_inert(next_code_point(s, i))) {
      boundary = start;
      continue;
    }
    // Normalize from the last inert character up to the next one.
    size_t region = std::max(boundary, copied);
    size_t end = i;
    while (end < s.size()) {
      size_t probe = end;
      if (is_inert(next_code_point(s, probe))) break;
      end = probe;
    }
    if (out.empty()) out.reserve(s.size() + 16);
    out.append(s.substr(copied, region - copied));
    out += normalize_whole(s.substr(region, end - region), form);
    copied = end;
    boundary = end;
    i = end;
  }
  if (copied == 0) return std::string(s);
  out.append(s.substr(copied));
  return out;
}

std::string to_lowercase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    char32_t c = next_code_point(s, i);
    append_utf8(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
  }
  return out;
}

}  // namespace fs::text
