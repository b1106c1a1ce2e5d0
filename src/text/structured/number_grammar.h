#pragma once
// JSON numbers as grammar sequences: unbounded numbers and integers, and decimal integers within bounds.
#include <cstdint>
#include <optional>

#include "text/structured/grammar.h"

namespace fs::structured {

// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?  (integer_only: without fraction and exponent)
Seq json_number(GrammarBuilder& b, bool integer_only);

// Integers in [lo, hi] written in JSON (no leading zeros, no "-0"); `fraction` adds an optional ".digits" wherever
// every value it can spell stays inside [lo, hi].
Seq bounded_number(GrammarBuilder& b, int64_t lo, int64_t hi, bool fraction);

// The widest integer bound used when a schema leaves one side open (16 digits).
constexpr int64_t kOpenBound = 9999999999999999;

}  // namespace fs::structured
