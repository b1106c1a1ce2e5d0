#include "jinja/conversation_generator.h"

namespace fs::test {

std::string ConversationGenerator::text() {
  static const char* words[] = {"hello", "world", "What", "is", "2+2?", "the", "cat", "sat", "on", "a", "mat.",
                                "it's", "\"quoted\"", "back\\slash", "tab\there", "café", "中文", "😀", "naïve",
                                "<think>", "</think>", "{{ not jinja }}", "{% raw %}", "x=1;", "--", "  ", "\n",
                                "\n\n", "[1, 2]", "{'a': 1}", "%s", "{}", "é\u00a0", "line\r\nbreak", "\u2028"};
  std::string out;
  int n = 1 + pick(8);
  if (chance(10)) out += chance(50) ? "\n" : "  ";
  for (int k = 0; k < n; ++k) {
    if (k) out += " ";
    out += words[pick(int(std::size(words)))];
  }
  if (chance(10)) out += chance(50) ? "\n" : " ";
  return out;
}

ojson ConversationGenerator::content() {
  if (!chance(25)) return text();
  ojson parts = ojson::array();
  int n = 1 + pick(3);
  for (int k = 0; k < n; ++k) {
    if (chance(30)) parts.push_back({{"type", "image"}, {"image", "img" + std::to_string(pick(5)) + ".png"}});
    else parts.push_back({{"type", "text"}, {"text", text()}});
  }
  return parts;
}

ojson ConversationGenerator::data(int depth) {
  switch (pick(depth > 0 ? 9 : 6)) {
    case 0: return nullptr;
    case 1: return chance(50);
    case 2: return int64_t(pick(2001)) - 1000;
    case 3: {
      static const double floats[] = {0.5, -1.25, 1e-7, 3.0, 1e16, 123456.789, 0.1, 2.5e-5, 100.0};
      return floats[pick(int(std::size(floats)))];
    }
    case 4: case 5: return text();
    case 6: case 7: {
      ojson o = ojson::object();
      int n = pick(4);
      static const char* keys[] = {"name", "type", "value", "description", "properties", "é", "a b", "items"};
      for (int k = 0; k < n; ++k) o[keys[pick(int(std::size(keys)))]] = data(depth - 1);
      return o;
    }
    default: {
      ojson a = ojson::array();
      int n = pick(4);
      for (int k = 0; k < n; ++k) a.push_back(data(depth - 1));
      return a;
    }
  }
}

ojson ConversationGenerator::arguments() {
  ojson args = ojson::object();
  args["city"] = text();
  if (chance(50)) args["days"] = pick(10);
  if (chance(30)) args["options"] = data(2);
  return args;
}

ojson ConversationGenerator::tool() {
  static const char* names[] = {"get_weather", "search", "calc", "lookup_ünïcode"};
  ojson params = {{"type", "object"},
                  {"properties", {{"city", {{"type", "string"}, {"description", text()}}},
                                  {"days", {{"type", "integer"}, {"minimum", 1}, {"default", 1.5}}}}},
                  {"required", ojson::array({"city"})}};
  ojson fn = {{"name", names[pick(4)]}, {"description", text()}, {"parameters", params}};
  return {{"type", "function"}, {"function", fn}};
}

ojson ConversationGenerator::tool_call() {
  ojson fn = {{"name", chance(50) ? "get_weather" : "search"}};
  fn["arguments"] = chance(70) ? arguments() : ojson(arguments().dump());
  ojson call = ojson::object();
  if (chance(50)) call["id"] = "call_" + std::to_string(pick(1000));
  call["type"] = "function";
  call["function"] = fn;
  return chance(85) ? call : fn;
}

ojson ConversationGenerator::conversation() {
  ojson messages = ojson::array();
  bool plain = chance(30);  // strictly alternating user/assistant text, as the strictest templates want
  if (!plain && chance(40)) messages.push_back({{"role", "system"}, {"content", chance(85) ? ojson(text()) : content()}});
  int turns = 1 + pick(4);
  for (int t = 0; t < turns; ++t) {
    std::string user = text();
    if (chance(10)) user = "<tool_response>" + user + "</tool_response>";
    messages.push_back({{"role", "user"}, {"content", plain || chance(80) ? ojson(user) : content()}});
    if (t == turns - 1 && chance(50)) break;
    if (plain) {
      messages.push_back({{"role", "assistant"}, {"content", text()}});
      continue;
    }
    ojson assistant = {{"role", "assistant"}};
    std::string reply = text();
    if (chance(20)) reply = "<think>\n" + text() + "\n</think>\n\n" + reply;
    assistant["content"] = chance(90) ? ojson(reply) : content();
    if (chance(25)) assistant["reasoning_content"] = chance(90) ? ojson(text()) : ojson(nullptr);
    bool calls = chance(30);
    if (calls) {
      ojson list = ojson::array();
      for (int k = 0, n = 1 + pick(2); k < n; ++k) list.push_back(tool_call());
      assistant["tool_calls"] = list;
      if (chance(30)) assistant["content"] = "";
    }
    messages.push_back(assistant);
    if (calls) {
      for (int k = 0, n = 1 + pick(2); k < n; ++k)
        messages.push_back({{"role", "tool"}, {"content", chance(80) ? ojson(text()) : ojson(arguments().dump())}});
      if (chance(50)) messages.push_back({{"role", "assistant"}, {"content", text()}});
    }
  }
  ojson tools = nullptr;
  if (chance(35)) {
    tools = ojson::array();
    for (int k = 0, n = 1 + pick(3); k < n; ++k) tools.push_back(tool());
  }
  ojson kwargs = ojson::object();
  int thinking = pick(3);
  if (thinking == 1) kwargs["enable_thinking"] = true;
  if (thinking == 2) kwargs["enable_thinking"] = false;
  return {{"messages", messages}, {"tools", tools}, {"add_generation_prompt", chance(50)}, {"kwargs", kwargs}};
}

}  // namespace fs::test
