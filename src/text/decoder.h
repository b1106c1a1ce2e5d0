#pragma once
// tokenizer.json decoders: ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace fs::text {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Rewrites the token strings in place (some decoders fuse them into one).
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

std::unique_ptr<Decoder> make_decoder(const nlohmann::json& spec);

}  // namespace fs::text
