#pragma once
// A model's chat template (Jinja) rendered by our own engine, as transformers renders it.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/jinja/error.h"

namespace fs {

class ChatTemplate {
 public:
  // Finds the template in DIR: chat_template.jinja, chat_template.json, or tokenizer_config.json's
  // "chat_template" (a string or a list of {name, template}; "default" is used). nullopt when there is none.
  // bos/eos tokens come from tokenizer_config.json. Throws TemplateError when the template does not parse.
  static std::optional<ChatTemplate> load(const std::filesystem::path& dir);
  explicit ChatTemplate(std::string source, std::string bos_token = "", std::string eos_token = "");
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;
  ~ChatTemplate();

  // messages: array; tools: array or null; kwargs: object of extra variables (enable_thinking, ...).
  // Throws TemplateError (raise_exception's message, a runtime error, or a limit reached).
  // The ordered_json form keeps the caller's key order, which `tojson` output shows (as Python dicts do).
  std::string render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                     bool add_generation_prompt,
                     const nlohmann::ordered_json& kwargs = nlohmann::ordered_json::object()) const;
  std::string render(const nlohmann::json& messages, const nlohmann::json& tools, bool add_generation_prompt,
                     const nlohmann::json& kwargs = nlohmann::json::object()) const;

  // A rendered prompt with the byte ranges [begin, end) that came from message content (string contents and text
  // parts), for encoding them without special-token matching.
  struct Marked {
    std::string text;
    std::vector<std::pair<size_t, size_t>> content;
  };
  // As render; each content is rendered as a unique placeholder, then put back where it landed. When the result
  // differs from render's (a template that inspects or transforms content), only user, system and tool contents
  // are marked, and if it still differs, none.
  Marked render_marked(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                       bool add_generation_prompt,
                       const nlohmann::ordered_json& kwargs = nlohmann::ordered_json::object()) const;

  const std::string& source() const;
  const std::string& bos_token() const;
  const std::string& eos_token() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fs
