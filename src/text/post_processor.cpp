#include "text/post_processor.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace fs::text {
namespace {

// The "single" template: special-token ids before and after sequence A.
class Template : public PostProcessor {
 public:
  Template(std::vector<int32_t> before, std::vector<int32_t> after) : before_(std::move(before)), after_(std::move(after)) {}
  void process(std::vector<int32_t>& ids) const override {
    ids.insert(ids.begin(), before_.begin(), before_.end());
    ids.insert(ids.end(), after_.begin(), after_.end());
  }

 private:
  std::vector<int32_t> before_, after_;
};

class Sequence : public PostProcessor {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PostProcessor>> parts) : parts_(std::move(parts)) {}
  void process(std::vector<int32_t>& ids) const override {
    for (const auto& p : parts_) p->process(ids);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

std::unique_ptr<PostProcessor> make_template(const nlohmann::json& spec) {
  const auto& specials = spec.contains("special_tokens") ? spec.at("special_tokens") : nlohmann::json::object();
  std::vector<int32_t> before, after;
  bool seen_sequence = false;
  for (const auto& item : spec.at("single")) {
    if (item.contains("Sequence")) {
      if (item.at("Sequence").at("id").get<std::string>() != "A")
        throw Error("tokenizer.json: TemplateProcessing single template names sequence B");
      seen_sequence = true;
      continue;
    }
    if (!item.contains("SpecialToken")) throw Error("tokenizer.json: TemplateProcessing item is neither kind");
    std::string name = item.at("SpecialToken").at("id").get<std::string>();
    if (!specials.contains(name)) throw Error("tokenizer.json: TemplateProcessing special token '" + name + "' has no ids");
    auto ids = specials.at(name).at("ids").get<std::vector<int32_t>>();
    auto& side = seen_sequence ? after : before;
    side.insert(side.end(), ids.begin(), ids.end());
  }
  return std::make_unique<Template>(std::move(before), std::move(after));
}

std::vector<int32_t> pair_ids(const nlohmann::json& pair) {
  // Bert/Roberta store [token, id].
  return {pair.at(1).get<int32_t>()};
}

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const nlohmann::json& spec) {
  if (spec.is_null()) return nullptr;
  if (!spec.is_object() || !spec.contains("type")) throw Error("tokenizer.json: post_processor without a type");
  std::string type = spec.at("type").get<std::string>();
  if (type == "TemplateProcessing") return make_template(spec);
  if (type == "ByteLevel") return nullptr;  // only adjusts offsets
  if (type == "BertProcessing" || type == "RobertaProcessing")
    return std::make_unique<Template>(pair_ids(spec.at("cls")), pair_ids(spec.at("sep")));
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PostProcessor>> parts;
    for (const auto& p : spec.at("processors"))
      if (auto n = make_post_processor(p)) parts.push_back(std::move(n));
    return std::make_unique<Sequence>(std::move(parts));
  }
  throw Error("tokenizer.json: unsupported post_processor type '" + type + "'");
}

}  // namespace fs::text
