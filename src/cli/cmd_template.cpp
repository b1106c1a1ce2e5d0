// foldserve template MODEL_DIR --messages FILE.json [--tools FILE.json] [--kwargs JSON] [--no-generation-prompt]
// Prints the model's chat template rendered over the conversation, byte for byte.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/files.h"
#include "io/hub_cache.h"
#include "text/chat_template.h"

namespace fs::cli {
namespace {

using ojson = nlohmann::ordered_json;

ojson parse_json(const std::string& text, const std::string& what) {
  try {
    return ojson::parse(text);
  } catch (const std::exception& e) {
    throw Error(what + ": invalid JSON: " + e.what());
  }
}

int run_template(const std::vector<std::string>& argv) {
  Args args(argv, {"messages", "tools", "kwargs", "revision"}, {"no-generation-prompt"});
  if (args.positionals().size() != 1 || !args.has("messages"))
    throw Error("usage: foldserve template MODEL_DIR --messages FILE.json [--tools FILE.json] [--kwargs JSON] "
                "[--no-generation-prompt]");
  std::filesystem::path dir = resolve_model_location(args.positionals()[0], args.get_or("revision", ""));
  if (!std::filesystem::is_directory(dir)) throw Error(dir.string() + ": not a directory");
  auto tmpl = ChatTemplate::load(dir);
  if (!tmpl) throw Error(dir.string() + ": no chat template (chat_template.jinja, chat_template.json or "
                         "tokenizer_config.json's chat_template)");

  std::string messages_path = *args.get("messages");
  ojson messages = parse_json(read_file(messages_path), messages_path);
  ojson tools = nullptr;
  // A file holding {"messages": [...], "tools": [...]} works too.
  if (messages.is_object() && messages.contains("messages")) {
    if (messages.contains("tools")) tools = messages["tools"];
    ojson m = messages["messages"];
    messages = std::move(m);
  }
  if (!messages.is_array()) throw Error(messages_path + ": messages must be a JSON array");
  if (auto tools_path = args.get("tools")) tools = parse_json(read_file(*tools_path), *tools_path);
  if (!tools.is_null() && !tools.is_array()) throw Error("tools must be a JSON array");
  ojson kwargs = ojson::object();
  if (auto k = args.get("kwargs")) kwargs = parse_json(*k, "--kwargs");
  if (!kwargs.is_object()) throw Error("--kwargs must be a JSON object");

  std::string text = tmpl->render(messages, tools, !args.has("no-generation-prompt"), kwargs);
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)
    throw Error("could not write to stdout");
  return 0;
}

}  // namespace

FS_REGISTER_COMMAND("template", "render a model's chat template over messages (JSON)", run_template);

}  // namespace fs::cli
