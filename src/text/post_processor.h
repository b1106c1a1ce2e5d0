#pragma once
// tokenizer.json post-processors for single sequences: TemplateProcessing, Bert, Roberta, ByteLevel, Sequence.
#include <cstdint>
#include <memory>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace fs::text {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // Adds the special tokens around one encoded sequence (only called when special tokens are wanted).
  virtual void process(std::vector<int32_t>& ids) const = 0;
};

std::unique_ptr<PostProcessor> make_post_processor(const nlohmann::json& spec);

}  // namespace fs::text
