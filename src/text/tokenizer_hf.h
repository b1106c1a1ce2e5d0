#pragma once
// The tokenizer.json implementation of fs::Tokenizer.
#include <memory>
#include <string>

#include "text/added_tokens.h"
#include "text/bpe.h"
#include "text/decoder.h"
#include "text/normalizer.h"
#include "text/post_processor.h"
#include "text/pre_tokenizer.h"
#include "text/tokenizer.h"

namespace fs::text {

class HfTokenizer : public Tokenizer {
 public:
  // Builds from the text of tokenizer.json; `origin` names it in errors.
  HfTokenizer(std::string_view tokenizer_json, const std::string& origin);

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const override;
  std::vector<int32_t> encode_literal(std::string_view text, const std::vector<std::pair<size_t, size_t>>& literal,
                                      bool add_special_tokens) const override;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const override;
  int32_t vocab_size() const override { return vocab_size_; }
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  std::string id_to_token(int32_t id) const override;
  bool is_special(int32_t id) const override;
  const std::string& bos_token() const override { return bos_token_; }
  const std::string& eos_token() const override { return eos_token_; }

  void set_bos_eos(std::string bos, std::string eos) {
    bos_token_ = std::move(bos);
    eos_token_ = std::move(eos);
  }

 private:
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<PostProcessor> post_processor_;
  std::unique_ptr<Decoder> decoder_;
  AddedVocabulary added_;
  int32_t vocab_size_ = 0;
  std::string bos_token_, eos_token_;
};

}  // namespace fs::text
