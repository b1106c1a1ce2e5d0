#pragma once
// A model's chat template (Jinja) rendered by our own engine, as transformers renders it.
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace fs {

// A template that raised (raise_exception) or failed to render; the message is the template's own.
struct TemplateError : Error {
  using Error::Error;
};

class ChatTemplate {
 public:
  // Finds the template in DIR: chat_template.jinja, chat_template.json, or tokenizer_config.json's
  // "chat_template" (a string or a list of {name, template}; "default" is used). nullopt when there is none.
  static std::optional<ChatTemplate> load(const std::filesystem::path& dir);
  explicit ChatTemplate(std::string source, std::string bos_token = "", std::string eos_token = "");
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;
  ~ChatTemplate();

  // messages: array; tools: array or null; kwargs: object of extra variables (enable_thinking, ...).
  std::string render(const nlohmann::json& messages, const nlohmann::json& tools, bool add_generation_prompt,
                     const nlohmann::json& kwargs = nlohmann::json::object()) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fs
