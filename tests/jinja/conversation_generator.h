#pragma once
// Seeded random conversations for the differential test: every role, tools and tool calls, reasoning,
// content as text or parts, awkward text (quotes, escapes, unicode, think tags), and random data values.
#include <cstdint>
#include <random>

#include "jinja/jinja_test_support.h"

namespace fs::test {

class ConversationGenerator {
 public:
  explicit ConversationGenerator(uint32_t seed) : rng_(seed) {}

  // {"messages", "tools" (array or null), "add_generation_prompt", "kwargs"}.
  ojson conversation();
  // A random JSON value nested up to `depth` levels.
  ojson data(int depth = 3);

 private:
  std::mt19937 rng_;

  int pick(int n) { return int(rng_() % uint32_t(n)); }
  bool chance(int percent) { return pick(100) < percent; }
  std::string text();
  ojson content();
  ojson tool();
  ojson tool_call();
  ojson arguments();
};

}  // namespace fs::test
