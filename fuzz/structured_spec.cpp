// Fuzzes the structured-output compilers: the first byte picks JSON Schema, regex or tool list, the rest is the
// spec; a spec compiles into a grammar or is refused with fs::Error, and the automaton then walks the remaining
// bytes without crashing, hanging or running past its state limit.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "text/structured/byte_automaton.h"
#include "text/structured/constraint_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  using fs::structured::ConstraintSpec;
  const ConstraintSpec::Kind kinds[] = {ConstraintSpec::Kind::JsonSchema, ConstraintSpec::Kind::Regex,
                                        ConstraintSpec::Kind::ToolCall, ConstraintSpec::Kind::JsonObject};
  // The spec is the input up to the first NUL; the bytes after it are a reply to walk.
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t nul = rest.find('\0');
  ConstraintSpec spec{kinds[data[0] % 4], rest.substr(0, nul)};
  const std::string reply = nul == std::string::npos ? std::string() : rest.substr(nul + 1);
  try {
    fs::structured::ByteAutomaton automaton(fs::structured::grammar_for(spec), 64, 4096);
    int32_t state = automaton.start();
    for (char c : reply) {
      state = automaton.next(state, uint8_t(c));
      if (state == fs::structured::ByteAutomaton::kDead) break;
    }
    if (state != fs::structured::ByteAutomaton::kDead) (void)automaton.accepting(state);
  } catch (const fs::Error&) {
  }
  return 0;
}
