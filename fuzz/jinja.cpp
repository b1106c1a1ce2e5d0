// libFuzzer target: parse and render arbitrary template text under tight limits; only TemplateError may escape.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "text/jinja/error.h"
#include "text/jinja/template.h"

namespace {

const std::vector<std::pair<std::string, fs::jinja::Value>>& context() {
  static const auto vars = [] {
    auto messages = nlohmann::ordered_json::parse(R"([
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "hi é"}, {"type": "image"}]},
      {"role": "assistant", "content": "<think>x</think>ok", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1.5}}}]},
      {"role": "tool", "content": "42"}])");
    std::vector<std::pair<std::string, fs::jinja::Value>> v;
    v.emplace_back("messages", fs::jinja::from_json(messages));
    v.emplace_back("tools", fs::jinja::from_json(nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "f"}}])")));
    v.emplace_back("add_generation_prompt", fs::jinja::Value::boolean(true));
    v.emplace_back("bos_token", fs::jinja::Value::string("<s>"));
    return v;
  }();
  return vars;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fs::jinja::Limits limits;
  limits.max_steps = 200000;
  limits.max_output = 1 << 20;
  limits.max_items = 1 << 16;
  try {
    fs::jinja::Template t(std::string(reinterpret_cast<const char*>(data), size), limits);
    t.render(context());
  } catch (const fs::TemplateError&) {
  }
  return 0;
}
