#pragma once
// A Hugging Face tokenizer.json tokenizer: normalizer, pre-tokenizer, BPE model, added tokens, post-processor,
// decoder — encoding and decoding exactly as the tokenizers library does.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fs {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Loads DIR/tokenizer.json (and DIR/tokenizer_config.json for bos/eos token strings when present).
  static std::unique_ptr<Tokenizer> load(const std::filesystem::path& dir);

  virtual std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const = 0;
  // As encode, but no added token is matched where it would overlap a `literal` byte range [begin, end) of
  // `text`: those bytes are encoded as ordinary text (message content that must not become control tokens).
  virtual std::vector<int32_t> encode_literal(std::string_view text,
                                              const std::vector<std::pair<size_t, size_t>>& literal,
                                              bool add_special_tokens) const = 0;
  virtual std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const = 0;
  virtual int32_t vocab_size() const = 0;
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  virtual std::string id_to_token(int32_t id) const = 0;
  virtual bool is_special(int32_t id) const = 0;
  // Token strings from tokenizer_config.json ("" when absent), for chat templates.
  virtual const std::string& bos_token() const = 0;
  virtual const std::string& eos_token() const = 0;
};

// Streams text for generated ids: never emits part of a UTF-8 character, and the pieces it returns add up to
// tok.decode(all ids). It re-decodes a short window (the last emitted ids plus the new ones) per step.
class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer& tok, bool skip_special_tokens = true);
  // Adds one id; returns the newly complete text (possibly empty).
  std::string push(int32_t id);
  // Returns whatever is still held back (an incomplete character at the end becomes U+FFFD as decode does).
  std::string flush();

 private:
  const Tokenizer& tok_;
  bool skip_special_;
  std::vector<int32_t> ids_;
  size_t prefix_offset_ = 0;  // window start: ids already emitted, kept as context for the decoder
  size_t read_offset_ = 0;    // ids before this are emitted
};

}  // namespace fs
