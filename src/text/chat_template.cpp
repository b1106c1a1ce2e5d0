#include "text/chat_template.h"

#include <algorithm>

#include "core/files.h"
#include "text/jinja/template.h"

namespace fs {

struct ChatTemplate::Impl {
  std::string source, bos, eos;
  jinja::Template tmpl;
  Impl(std::string src, std::string b, std::string e)
      : source(std::move(src)), bos(std::move(b)), eos(std::move(e)), tmpl(source) {}
};

ChatTemplate::ChatTemplate(std::string source, std::string bos_token, std::string eos_token)
    : impl_(std::make_unique<Impl>(std::move(source), std::move(bos_token), std::move(eos_token))) {}
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;
ChatTemplate::~ChatTemplate() = default;

const std::string& ChatTemplate::source() const { return impl_->source; }
const std::string& ChatTemplate::bos_token() const { return impl_->bos; }
const std::string& ChatTemplate::eos_token() const { return impl_->eos; }

namespace {

using ojson = nlohmann::ordered_json;

ojson read_ordered(const std::filesystem::path& path) {
  std::string text = read_file(path);
  try {
    return ojson::parse(text);
  } catch (const std::exception& e) {
    throw Error(path.string() + ": invalid JSON: " + e.what());
  }
}

// A special token as tokenizer_config.json writes it: a string, {"content": ...}, or null.
std::string token_text(const ojson& config, const char* key) {
  if (!config.is_object() || !config.contains(key)) return "";
  const ojson& t = config[key];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_object() && t.contains("content") && t["content"].is_string()) return t["content"].get<std::string>();
  return "";
}

// tokenizer_config.json's chat_template: a string, or a list of {name, template} ("default" wins).
std::optional<std::string> template_from(const ojson& value, const std::filesystem::path& where) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_array()) {
    for (const auto& entry : value) {
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
          entry["template"].is_string())
        return entry["template"].get<std::string>();
    }
    throw Error(where.string() + ": chat_template list has no \"default\" entry");
  }
  if (value.is_null()) return std::nullopt;
  throw Error(where.string() + ": chat_template must be a string or a list of {name, template}");
}

}  // namespace

std::optional<ChatTemplate> ChatTemplate::load(const std::filesystem::path& dir) {
  ojson config = ojson::object();
  auto config_path = dir / "tokenizer_config.json";
  if (std::filesystem::exists(config_path)) config = read_ordered(config_path);
  std::string bos = token_text(config, "bos_token"), eos = token_text(config, "eos_token");
  std::optional<std::string> source;
  if (std::filesystem::exists(dir / "chat_template.jinja")) {
    source = read_file(dir / "chat_template.jinja");
  } else if (std::filesystem::exists(dir / "chat_template.json")) {
    ojson j = read_ordered(dir / "chat_template.json");
    if (!j.is_object() || !j.contains("chat_template"))
      throw Error((dir / "chat_template.json").string() + ": no \"chat_template\" field");
    source = template_from(j["chat_template"], dir / "chat_template.json");
  } else if (config.is_object() && config.contains("chat_template")) {
    source = template_from(config["chat_template"], config_path);
  }
  if (!source) return std::nullopt;
  return ChatTemplate(std::move(*source), std::move(bos), std::move(eos));
}

std::string ChatTemplate::render(const ojson& messages, const ojson& tools, bool add_generation_prompt,
                                 const ojson& kwargs) const {
  if (!messages.is_array()) throw TemplateError("messages must be an array");
  if (!tools.is_null() && !tools.is_array()) throw TemplateError("tools must be an array or null");
  if (!kwargs.is_null() && !kwargs.is_object()) throw TemplateError("template kwargs must be an object");
  std::vector<std::pair<std::string, jinja::Value>> vars;
  vars.emplace_back("bos_token", jinja::Value::string(impl_->bos));
  vars.emplace_back("eos_token", jinja::Value::string(impl_->eos));
  if (kwargs.is_object())
    for (const auto& [k, v] : kwargs.items()) vars.emplace_back(k, jinja::from_json(v));
  vars.emplace_back("messages", jinja::from_json(messages));
  vars.emplace_back("tools", jinja::from_json(tools));
  vars.emplace_back("documents", jinja::Value::none());
  vars.emplace_back("add_generation_prompt", jinja::Value::boolean(add_generation_prompt));
  return impl_->tmpl.render(vars);
}

namespace {

// A placeholder no template writes by itself: private-use code points around the content's number.
std::string content_placeholder(size_t n) { return "\uE000fs-content-" + std::to_string(n) + "\uE001"; }

// Replaces the marked contents of `messages` (all roles, or user/system/tool only) with placeholders; `originals`
// gets the contents in placeholder order.
ojson with_placeholders(const ojson& messages, bool all_roles, std::vector<std::string>& originals) {
  ojson out = messages;
  for (auto& m : out) {
    if (!m.is_object() || !m.contains("content")) continue;
    const std::string role = m.value("role", "");
    if (!all_roles && role != "user" && role != "system" && role != "tool") continue;
    auto mark = [&](ojson& text) {
      if (!text.is_string() || text.get_ref<const std::string&>().empty()) return;
      originals.push_back(text.get<std::string>());
      text = content_placeholder(originals.size() - 1);
    };
    ojson& content = m["content"];
    if (content.is_string()) mark(content);
    else if (content.is_array())
      for (auto& part : content)
        if (part.is_object() && part.value("type", "") == "text" && part.contains("text")) mark(part["text"]);
  }
  return out;
}

// Puts the contents back where their placeholders landed; false when a placeholder is missing or repeated.
bool put_back(const std::string& rendered, const std::vector<std::string>& originals, ChatTemplate::Marked& out) {
  std::vector<std::pair<size_t, size_t>> spots;  // (position in rendered, content index)
  for (size_t i = 0; i < originals.size(); ++i) {
    const std::string ph = content_placeholder(i);
    const size_t at = rendered.find(ph);
    if (at == std::string::npos || rendered.find(ph, at + 1) != std::string::npos) return false;
    spots.emplace_back(at, i);
  }
  std::sort(spots.begin(), spots.end());
  size_t from = 0;
  for (const auto& [at, i] : spots) {
    out.text.append(rendered, from, at - from);
    out.content.emplace_back(out.text.size(), out.text.size() + originals[i].size());
    out.text += originals[i];
    from = at + content_placeholder(i).size();
  }
  out.text.append(rendered, from, std::string::npos);
  return true;
}

}  // namespace

ChatTemplate::Marked ChatTemplate::render_marked(const ojson& messages, const ojson& tools,
                                                 bool add_generation_prompt, const ojson& kwargs) const {
  const std::string plain = render(messages, tools, add_generation_prompt, kwargs);
  for (bool all_roles : {true, false}) {
    std::vector<std::string> originals;
    const ojson marked = with_placeholders(messages, all_roles, originals);
    Marked out;
    if (put_back(render(marked, tools, add_generation_prompt, kwargs), originals, out) && out.text == plain)
      return out;
  }
  return Marked{plain, {}};
}

std::string ChatTemplate::render(const nlohmann::json& messages, const nlohmann::json& tools,
                                 bool add_generation_prompt, const nlohmann::json& kwargs) const {
  return render(ojson(messages), ojson(tools), add_generation_prompt, ojson(kwargs));
}

}  // namespace fs
