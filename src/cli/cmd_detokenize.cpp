// foldserve detokenize MODEL_DIR --ids 1,2,3 [--skip-special] → {"text": "..."}
#include <cstdio>

#include "cli/args.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/files.h"
#include "io/hub_cache.h"
#include "text/tokenizer.h"

namespace fs::cli {
namespace {

int run_detokenize(const std::vector<std::string>& argv) {
  Args args(argv, {"ids", "revision"}, {"skip-special"});
  if (args.positionals().size() != 1 || !args.get("ids"))
    throw Error("usage: foldserve detokenize MODEL_DIR --ids 1,2,3 [--skip-special]");
  auto tok = Tokenizer::load(resolve_model_location(args.positionals()[0], args.get_or("revision", "")));
  auto ids = parse_id_list(*args.get("ids"));
  for (int32_t id : ids)
    if (id >= tok->vocab_size())
      throw Error("token id " + std::to_string(id) + " is outside the vocabulary (size " +
                  std::to_string(tok->vocab_size()) + ")");
  std::string text = tok->decode(ids, args.has("skip-special"));
  std::printf("{\"text\": %s}\n", json(text).dump(-1, ' ', false, json::error_handler_t::replace).c_str());
  return 0;
}

}  // namespace

FS_REGISTER_COMMAND("detokenize", "MODEL_DIR --ids 1,2,3 [--skip-special]: print the decoded text as JSON",
                    run_detokenize);

}  // namespace fs::cli
