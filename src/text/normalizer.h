#pragma once
// tokenizer.json normalizers: NFC/NFD/NFKC/NFKD, Lowercase, Replace, Prepend, Strip, Sequence.
#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace fs::text {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& s) const = 0;
};

// Builds the normalizer described by `spec` (null → nullptr); throws fs::Error on an unknown or malformed one.
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& spec);

}  // namespace fs::text
