// libFuzzer target: encodes arbitrary bytes (invalid UTF-8 included) with the Qwen3 tokenizer, decodes the ids
// whole and streamed, and checks that both decodings agree.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "text/tokenizer.h"
#include "text/utf8.h"

namespace {

const fs::Tokenizer& tokenizer() {
  static std::unique_ptr<fs::Tokenizer> tok = [] {
    const char* shared = std::getenv("FOLDSERVE_SHARED");
    std::filesystem::path dir = shared && *shared ? shared : "/work/shared";
    return fs::Tokenizer::load(dir / "models" / "tiny-qwen3");
  }();
  return *tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& tok = tokenizer();
  std::string input(reinterpret_cast<const char*>(data), size);
  auto ids = tok.encode(input, size % 2 == 0);
  std::string full = tok.decode(ids, false);
  fs::IncrementalDecoder dec(tok, false);
  std::string streamed;
  for (int32_t id : ids) streamed += dec.push(id);
  streamed += dec.flush();
  if (streamed != full || !fs::text::is_valid_utf8(full)) std::abort();
  return 0;
}
