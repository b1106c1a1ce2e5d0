// Tokenizer throughput: encodes about 1 MB of mixed text (prose, code, CJK, emoji, numbers, whitespace) with one
// thread and prints MB/s. Usage: bench_tokenizer [TOKENIZER_DIR] (default: ../shared/models/tiny-qwen3).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "text/tokenizer.h"

namespace {

std::string mixed_text(size_t target_bytes) {
  const char* parts[] = {
      "The lanterns along the river were lit one by one as the evening boats came home. ",
      "def encode(self, text: str) -> list[int]:\n    return [self.vocab[t] for t in text.split()]\n",
      "数据显示，2024年的增长率为3.7%，高于预期。日本語のテキストも混ざっています。",
      "Emoji 😀👍🏽 and flags 🇫🇷🇯🇵, accents: Ünïcödé àccents ÀÉÎÕÜ. ",
      "Numbers 1234567890 and 3.14159, dates 2025-01-31, ids #A7F3. ",
      "\t\t  \n  mixed   whitespace \n\n\n",
      "Русский текст и ελληνικά γράμματα, العربية و עברית. ",
      "{\"key\": [1, 2, 3], \"url\": \"https://example.com/path?q=1&r=two#frag\"}\n",
  };
  std::string out;
  size_t k = 0, n = 0;
  while (out.size() < target_bytes) {
    out += parts[k % (sizeof parts / sizeof *parts)];
    // Vary the words so that the word cache does not see only repeats.
    out += "word" + std::to_string(n++ * 7919 % 100003) + " ";
    ++k;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::filesystem::path dir;
  if (argc > 1) {
    dir = argv[1];
  } else {
    const char* shared = std::getenv("FOLDSERVE_SHARED");
    dir = std::filesystem::path(shared && *shared ? shared : FOLDSERVE_SOURCE_DIR "/../shared") / "models" / "tiny-qwen3";
  }
  try {
    auto t0 = std::chrono::steady_clock::now();
    auto tok = fs::Tokenizer::load(dir);
    auto t1 = std::chrono::steady_clock::now();
    std::string text = mixed_text(1 << 20);
    size_t tokens = 0;
    double best = 1e9;
    for (int rep = 0; rep < 3; ++rep) {
      auto a = std::chrono::steady_clock::now();
      tokens = tok->encode(text, false).size();
      auto b = std::chrono::steady_clock::now();
      best = std::min(best, std::chrono::duration<double>(b - a).count());
    }
    double mb = static_cast<double>(text.size()) / 1e6;
    std::printf("tokenizer: %s\nload: %.3f s\ntext: %.2f MB, %zu tokens\nencode: %.3f s (best of 3), %.1f MB/s\n",
                dir.string().c_str(), std::chrono::duration<double>(t1 - t0).count(), mb, tokens, best, mb / best);
    return 0;
  } catch (const fs::Error& e) {
    std::fprintf(stderr, "bench_tokenizer: %s\n", e.what());
    return 1;
  }
}
