#pragma once
// A model that hands every call to a real one: tests derive from it to change what the engine sees of the model.
#include "models/model.h"

namespace fs::test {

class ForwardingModel : public Model {
 public:
  explicit ForwardingModel(Model& inner) : inner_(inner) {}
  const ModelConfig& config() const override { return inner_.config(); }
  std::vector<float> forward(std::span<const SequenceChunk> chunks, KvPool& pool) override {
    return inner_.forward(chunks, pool);
  }
  std::vector<float> hidden_states(const SequenceChunk& chunk, KvPool& pool) override {
    return inner_.hidden_states(chunk, pool);
  }
  size_t weight_bytes() const override { return inner_.weight_bytes(); }
  SequenceMemorySpec memory_spec() const override { return inner_.memory_spec(); }

 protected:
  Model& inner_;
};

}  // namespace fs::test
