#pragma once
// A decoder family on the CPU: forward() and hidden_states() are one pass, with or without the states kept.
#include <span>
#include <vector>

#include "models/model.h"

namespace fs {

class CpuDecoderModel : public Model {
 public:
  std::vector<float> forward(std::span<const SequenceChunk> chunks, KvPool& pool) final {
    return run(chunks, pool, nullptr);
  }

  std::vector<float> hidden_states(const SequenceChunk& chunk, KvPool& pool) final {
    std::vector<float> states;
    run(std::span<const SequenceChunk>(&chunk, 1), pool, &states);
    return states;
  }

 protected:
  // The logits of one forward pass; with `states`, also fills them as hidden_states() describes.
  virtual std::vector<float> run(std::span<const SequenceChunk> chunks, KvPool& pool, std::vector<float>* states) = 0;
};

}  // namespace fs
