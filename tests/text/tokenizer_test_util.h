#pragma once
// Shared helpers for the tokenizer tests: tokenizers loaded once per folder, and the streaming decode.
#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/files.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace fs::test {

// Loads DIR's tokenizer once per test process.
inline const Tokenizer& cached_tokenizer(const std::filesystem::path& dir) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Tokenizer>> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = loaded[dir.string()];
  if (!slot) slot = Tokenizer::load(dir);
  return *slot;
}

// Text produced by feeding ids one by one through an IncrementalDecoder, then flushing.
inline std::string stream_decode(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special) {
  IncrementalDecoder dec(tok, skip_special);
  std::string out;
  for (int32_t id : ids) {
    std::string piece = dec.push(id);
    if (!text::is_valid_utf8(piece)) ADD_FAILURE() << "streamed piece is not valid UTF-8 after id " << id;
    out += piece;
  }
  out += dec.flush();
  return out;
}

// Writes `tokenizer` as tokenizer.json into a fresh temporary folder and returns the folder.
inline std::filesystem::path write_tokenizer_dir(const std::string& name, const std::string& tokenizer_json) {
  // Per process and per call: ctest runs each test in its own process, several at once.
  static std::atomic<int> calls{0};
  auto dir = std::filesystem::temp_directory_path() /
             ("foldserve_tok_" + name + "_" + std::to_string(::getpid()) + "_" + std::to_string(calls++));
  std::filesystem::create_directories(dir);
  std::FILE* f = std::fopen((dir / "tokenizer.json").c_str(), "wb");
  std::fwrite(tokenizer_json.data(), 1, tokenizer_json.size(), f);
  std::fclose(f);
  return dir;
}

// Tokenizer::load of `tokenizer_json` through such a folder, removed again once loaded (or refused).
inline std::unique_ptr<Tokenizer> load_tokenizer_json(const std::string& name, const std::string& tokenizer_json) {
  struct Removed {
    std::filesystem::path dir;
    ~Removed() {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  } folder{write_tokenizer_dir(name, tokenizer_json)};
  return Tokenizer::load(folder.dir);
}

}  // namespace fs::test
