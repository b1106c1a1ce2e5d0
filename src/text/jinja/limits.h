#pragma once
// Bounds that stop a hostile template from hanging or exhausting the process.
#include <cstddef>
#include <cstdint>

namespace fs::jinja {

struct Limits {
  uint64_t max_steps = 10'000'000;    // expression and statement evaluations per render
  size_t max_output = 32u << 20;      // bytes written in all, and the size of any one string
  int max_depth = 500;                // nested evaluation (macro recursion included)
  size_t max_items = 1u << 20;        // elements in any one list or dict
};

}  // namespace fs::jinja
