#include "server/api_request.h"

#include <cmath>
#include <limits>

#include "server/json_shape.h"

namespace fs::server {
namespace {

using json = nlohmann::ordered_json;

[[noreturn]] void fail(const std::string& param, const std::string& message) {
  throw ApiException{bad_request(param, message)};
}

json parse_body(std::string_view body) {
  if (auto why = json_shape_violation(body)) fail("", *why);
  json j = json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded()) fail("", "the request body is not valid JSON");
  if (!j.is_object()) fail("", "the request body must be a JSON object");
  return j;
}

// The member `key`, or nullptr when it is absent or null (clients send null for "unset").
const json* member(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<double> number_in(const json& obj, const char* key, double lo, double hi, bool lo_open = false) {
  const json* v = member(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) fail(key, std::string("'") + key + "' must be a number");
  double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi || (lo_open && d == lo)) {
    fail(key, std::string("'") + key + "' must be " + (lo_open ? "above " : "at least ") + json(lo).dump() +
                  " and at most " + json(hi).dump() + ", got " + v->dump());
  }
  return d;
}

std::optional<long long> integer_in(const json& obj, const char* key, long long lo, long long hi) {
  const json* v = member(obj, key);
  if (!v) return std::nullopt;
  bool integral = v->is_number_integer() ||
                  (v->is_number_float() && std::isfinite(v->get<double>()) &&
                   std::floor(v->get<double>()) == v->get<double>() && std::fabs(v->get<double>()) < 9e15);
  if (!integral) fail(key, std::string("'") + key + "' must be an integer");
  long long n = v->is_number_unsigned() ? (v->get<uint64_t>() > uint64_t(std::numeric_limits<long long>::max())
                                               ? std::numeric_limits<long long>::max()
                                               : (long long)v->get<uint64_t>())
                : v->is_number_integer() ? v->get<long long>()
                                         : (long long)v->get<double>();
  if (n < lo || n > hi) {
    fail(key, std::string("'") + key + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                  ", got " + v->dump());
  }
  return n;
}

std::optional<bool> boolean(const json& obj, const char* key) {
  const json* v = member(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) fail(key, std::string("'") + key + "' must be true or false");
  return v->get<bool>();
}

std::string model_name(const json& obj, const ParseLimits& limits) {
  const json* v = member(obj, "model");
  if (!v) return limits.served_model;
  if (!v->is_string()) fail("model", "'model' must be a string");
  std::string name = v->get<std::string>();
  if (!limits.served_model.empty() && name != limits.served_model) {
    throw ApiException{not_found("the model '" + name + "' does not exist; this server serves '" +
                                     limits.served_model + "'",
                                 "model_not_found")};
  }
  return name;
}

std::vector<std::string> stop_list(const json& obj) {
  const json* v = member(obj, "stop");
  if (!v) return {};
  std::vector<std::string> out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (v->size() > 16) fail("stop", "'stop' may list at most 16 strings");
    for (const auto& s : *v) {
      if (!s.is_string()) fail("stop", "'stop' must be a string or a list of strings");
      out.push_back(s.get<std::string>());
    }
  } else {
    fail("stop", "'stop' must be a string or a list of strings");
  }
  for (const auto& s : out)
    if (s.empty()) fail("stop", "stop strings must not be empty");
  return out;
}

// Fields shared by both endpoints; `chat` selects the logprobs convention (bool + top_logprobs, or a count).
GenerationFields generation_fields(const json& j, bool chat, const ParseLimits& limits) {
  GenerationFields g;
  constexpr long long kMaxTokens = 1 << 24;
  auto max_tokens = integer_in(j, "max_tokens", 1, kMaxTokens);
  if (chat) {
    if (auto m = integer_in(j, "max_completion_tokens", 1, kMaxTokens)) max_tokens = m;
  }
  if (max_tokens) g.max_tokens = int(*max_tokens);
  if (auto t = number_in(j, "temperature", 0.0, 2.0)) g.temperature = float(*t);
  if (auto p = number_in(j, "top_p", 0.0, 1.0, true)) g.top_p = float(*p);
  if (auto k = integer_in(j, "top_k", -1, 1 << 20)) g.top_k = int(*k < 0 ? 0 : *k);
  if (auto p = number_in(j, "min_p", 0.0, 1.0)) g.min_p = float(*p);
  if (auto r = number_in(j, "repetition_penalty", 0.0, 10.0, true)) g.repetition_penalty = float(*r);
  if (auto p = number_in(j, "presence_penalty", -2.0, 2.0)) g.presence_penalty = float(*p);
  if (auto p = number_in(j, "frequency_penalty", -2.0, 2.0)) g.frequency_penalty = float(*p);
  if (auto s = integer_in(j, "seed", std::numeric_limits<long long>::min(), std::numeric_limits<long long>::max()))
    g.seed = uint64_t(*s);
  g.stop = stop_list(j);
  if (auto n = integer_in(j, "n", 1, limits.max_n)) g.n = int(*n);
  if (chat) {
    g.logprobs = boolean(j, "logprobs").value_or(false);
    if (auto t = integer_in(j, "top_logprobs", 0, 20)) {
      if (!g.logprobs && *t > 0) fail("top_logprobs", "'top_logprobs' needs 'logprobs': true");
      g.top_logprobs = int(*t);
    }
  } else if (auto l = integer_in(j, "logprobs", 0, 5)) {
    g.logprobs = true;
    g.top_logprobs = int(*l);
  }
  g.stream = boolean(j, "stream").value_or(false);
  if (const json* so = member(j, "stream_options")) {
    if (!so->is_object()) fail("stream_options", "'stream_options' must be an object");
    g.include_usage = boolean(*so, "include_usage").value_or(false);
  }
  g.allow_draft = boolean(j, "draft").value_or(true);
  g.tokens_as_ids = boolean(j, "return_tokens_as_token_ids").value_or(false);
  g.constraint = response_constraint(j);
  if (boolean(j, "echo").value_or(false)) fail("echo", "'echo' is not supported");
  if (const json* bo = member(j, "best_of"); bo && !(bo->is_number_integer() && bo->get<long long>() == g.n))
    fail("best_of", "'best_of' other than n is not supported");
  return g;
}

// Refuses text holding a reserved string (an image placeholder token would smuggle an image into the prompt).
void check_text(const std::string& text, const std::string& param, const ParseLimits& limits) {
  for (const auto& r : limits.reserved_text) {
    if (!r.empty() && text.find(r) != std::string::npos)
      fail(param, "'" + param + "' contains '" + r + "', a token reserved for images; send images as image parts");
  }
}

// The URL of an image part: {"type": "image_url", "image_url": {"url"} or "..."}, {"type": "input_image",
// "image_url": "..."} or {"type": "image", "image" | "url": "..."}.
std::string image_url_of(const json& part, const std::string& type, const std::string& pw) {
  const json* v = nullptr;
  if (type == "image") {
    v = member(part, "image");
    if (!v) v = member(part, "url");
    if (!v) v = member(part, "image_url");
  } else {
    v = member(part, "image_url");
  }
  if (v && v->is_object()) v = member(*v, "url");
  if (!v || !v->is_string() || v->get<std::string>().empty())
    fail(pw + ".image_url", "'" + pw + "' needs an image URL ('image_url': {'url': 'data:...' or 'https://...'})");
  return v->get<std::string>();
}

// Message content: a string, null, or a list of text and image parts. Images are collected into `images`.
json message_content(const json& msg, const std::string& where, bool may_be_null, bool user,
                     const ParseLimits& limits, std::vector<ImageRef>& images) {
  const json* c = member(msg, "content");
  if (!c) {
    if (may_be_null) return nullptr;
    fail(where + ".content", "'" + where + ".content' is required");
  }
  if (c->is_string()) {
    check_text(c->get<std::string>(), where + ".content", limits);
    return *c;
  }
  if (!c->is_array()) fail(where + ".content", "'" + where + ".content' must be a string or a list of parts");
  json parts = json::array();
  std::string text;
  bool any_image = false;
  for (size_t i = 0; i < c->size(); ++i) {
    const json& part = (*c)[i];
    std::string pw = where + ".content[" + std::to_string(i) + "]";
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      fail(pw, "'" + pw + "' must be an object with a 'type'");
    std::string type = part["type"].get<std::string>();
    if (type == "text") {
      const json* t = member(part, "text");
      if (!t || !t->is_string()) fail(pw + ".text", "'" + pw + ".text' must be a string");
      check_text(t->get<std::string>(), pw + ".text", limits);
      text += t->get<std::string>();
      parts.push_back({{"type", "text"}, {"text", *t}});
    } else if (type == "image_url" || type == "input_image" || type == "image") {
      if (!limits.image_refusal.empty()) fail(pw, limits.image_refusal);
      if (!user) fail(pw, "image parts are accepted in user messages only");
      std::string url = image_url_of(part, type, pw);
      if (int(images.size()) >= limits.max_images)
        fail(pw, "a request may carry at most " + std::to_string(limits.max_images) + " images");
      images.push_back({std::move(url), pw});
      parts.push_back({{"type", "image"}});
      any_image = true;
    } else if (type == "video_url" || type == "input_video" || type == "video") {
      fail(pw, "'" + pw + "' is a video part; video input is not supported (send images)");
    } else {
      fail(pw + ".type", "unknown content part type '" + type + "'");
    }
  }
  if (any_image) return parts;
  return text;
}

json validate_messages(const json& j, const ParseLimits& limits, std::vector<ImageRef>& images) {
  const json* m = member(j, "messages");
  if (!m) fail("messages", "'messages' is required");
  if (!m->is_array() || m->empty()) fail("messages", "'messages' must be a non-empty list");
  json out = json::array();
  for (size_t i = 0; i < m->size(); ++i) {
    const json& msg = (*m)[i];
    std::string where = "messages[" + std::to_string(i) + "]";
    if (!msg.is_object()) fail(where, "'" + where + "' must be an object");
    const json* role = member(msg, "role");
    if (!role || !role->is_string()) fail(where + ".role", "'" + where + ".role' must be a string");
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";
    if (r != "system" && r != "user" && r != "assistant" && r != "tool")
      fail(where + ".role", "unknown role '" + r + "' (system, user, assistant or tool)");
    json copy = msg;
    copy["role"] = r;
    const json* calls = member(msg, "tool_calls");
    if (calls) {
      if (r != "assistant") fail(where + ".tool_calls", "only assistant messages carry 'tool_calls'");
      if (!calls->is_array()) fail(where + ".tool_calls", "'" + where + ".tool_calls' must be a list");
      for (const auto& c : *calls) {
        if (!c.is_object() || !c.contains("function") || !c["function"].is_object() ||
            !c["function"].contains("name") || !c["function"]["name"].is_string())
          fail(where + ".tool_calls", "each tool call needs 'function': {'name', 'arguments'}");
      }
    }
    copy["content"] = message_content(msg, where, r == "assistant", r == "user", limits, images);
    if (copy["content"].is_null()) copy["content"] = "";
    out.push_back(std::move(copy));
  }
  return out;
}

json validate_tools(const json& j) {
  const json* tools = member(j, "tools");
  std::string choice = "auto";
  if (const json* tc = member(j, "tool_choice")) {
    if (tc->is_string()) {
      choice = tc->get<std::string>();
      if (choice != "none" && choice != "auto" && choice != "required")
        fail("tool_choice", "'tool_choice' must be none, auto, required or {type: function, function: {name}}");
    } else if (!tc->is_object() || !tc->contains("function") || !(*tc)["function"].is_object() ||
               !(*tc)["function"].contains("name") || !(*tc)["function"]["name"].is_string()) {
      fail("tool_choice", "'tool_choice' must be none, auto, required or {type: function, function: {name}}");
    }
  }
  if (!tools) return nullptr;
  if (!tools->is_array()) fail("tools", "'tools' must be a list");
  for (size_t i = 0; i < tools->size(); ++i) {
    const json& t = (*tools)[i];
    std::string where = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object())
      fail(where, "'" + where + "' must be {type: function, function: {...}}");
    if (t.contains("type") && t["type"] != "function") fail(where + ".type", "only function tools are supported");
    const json& f = t["function"];
    if (!f.contains("name") || !f["name"].is_string() || f["name"].get<std::string>().empty())
      fail(where + ".function.name", "'" + where + ".function.name' must be a non-empty string");
    if (f.contains("parameters") && !f["parameters"].is_object() && !f["parameters"].is_null())
      fail(where + ".function.parameters", "'" + where + ".function.parameters' must be an object");
  }
  if (choice == "none" || tools->empty()) return nullptr;
  return *tools;
}

std::vector<int32_t> id_list(const json& arr, const std::string& where, const ParseLimits& limits) {
  std::vector<int32_t> ids;
  ids.reserve(arr.size());
  for (const auto& v : arr) {
    if (!v.is_number_integer()) fail("prompt", "'" + where + "' must hold integer token ids");
    long long id = v.get<long long>();
    if (id < 0 || id > INT32_MAX || (limits.vocab_size > 0 && id >= limits.vocab_size))
      fail("prompt", "token id " + std::to_string(id) + " in '" + where + "' is outside the vocabulary");
    ids.push_back(int32_t(id));
  }
  if (ids.empty()) fail("prompt", "'" + where + "' must not be empty");
  return ids;
}

std::vector<PromptInput> prompt_list(const json& j, const ParseLimits& limits) {
  const json* p = member(j, "prompt");
  if (!p) fail("prompt", "'prompt' is required");
  std::vector<PromptInput> out;
  if (p->is_string()) {
    out.push_back({p->get<std::string>(), {}});
  } else if (p->is_array()) {
    if (p->empty()) fail("prompt", "'prompt' must not be empty");
    if ((*p)[0].is_number()) {
      out.push_back({std::nullopt, id_list(*p, "prompt", limits)});
    } else {
      if (int(p->size()) > limits.max_prompts)
        fail("prompt", "'prompt' may list at most " + std::to_string(limits.max_prompts) + " prompts");
      for (size_t i = 0; i < p->size(); ++i) {
        const json& e = (*p)[i];
        std::string where = "prompt[" + std::to_string(i) + "]";
        if (e.is_string()) out.push_back({e.get<std::string>(), {}});
        else if (e.is_array()) out.push_back({std::nullopt, id_list(e, where, limits)});
        else fail("prompt", "'" + where + "' must be a string or a list of token ids");
      }
    }
  } else {
    fail("prompt", "'prompt' must be a string, a list of token ids, or a list of those");
  }
  return out;
}

}  // namespace

Parsed<ChatRequest> parse_chat_request(std::string_view body, const ParseLimits& limits) {
  try {
    json j = parse_body(body);
    ChatRequest r;
    r.model = model_name(j, limits);
    r.messages = validate_messages(j, limits, r.images);
    r.tools = validate_tools(j);
    r.literal_content = boolean(j, "literal_content");
    if (const json* kw = member(j, "chat_template_kwargs")) {
      if (!kw->is_object()) fail("chat_template_kwargs", "'chat_template_kwargs' must be an object");
      r.template_kwargs = *kw;
    }
    r.gen = generation_fields(j, true, limits);
    if (auto forced = tool_constraint(j, r.tools)) {
      if (r.gen.constraint) fail("tool_choice", "a forced tool call cannot be combined with '" + r.gen.constraint->param + "'");
      r.gen.constraint = std::move(forced);
    }
    return r;
  } catch (const ApiException& e) {
    return e.error;
  }
}

Parsed<CompletionRequest> parse_completion_request(std::string_view body, const ParseLimits& limits) {
  try {
    json j = parse_body(body);
    CompletionRequest r;
    r.model = model_name(j, limits);
    r.prompts = prompt_list(j, limits);
    r.gen = generation_fields(j, false, limits);
    if (int(r.prompts.size()) * r.gen.n > limits.max_n * limits.max_prompts)
      fail("n", "too many choices in one request");
    return r;
  } catch (const ApiException& e) {
    return e.error;
  }
}

SamplingParams resolve_sampling(const GenerationFields& gen, const GenerationConfig& defaults) {
  // A generation_config without do_sample means greedy decoding, as transformers does it.
  const bool sample = defaults.do_sample;
  SamplingParams s;
  s.temperature = gen.temperature.value_or(sample ? defaults.temperature.value_or(1.0f) : 0.0f);
  s.top_p = gen.top_p.value_or(sample ? defaults.top_p.value_or(1.0f) : 1.0f);
  s.top_k = gen.top_k.value_or(sample ? defaults.top_k.value_or(0) : 0);
  s.min_p = gen.min_p.value_or(sample ? defaults.min_p.value_or(0.0f) : 0.0f);
  s.repetition_penalty = gen.repetition_penalty.value_or(defaults.repetition_penalty.value_or(1.0f));
  s.presence_penalty = gen.presence_penalty;
  s.frequency_penalty = gen.frequency_penalty;
  s.seed = gen.seed;
  s.logprobs = gen.logprobs;
  s.top_logprobs = gen.top_logprobs;
  return s;
}

}  // namespace fs::server
