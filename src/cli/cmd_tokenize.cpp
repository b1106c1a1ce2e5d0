// foldserve tokenize MODEL_DIR --text TEXT [--special] → {"ids": [...]}
#include <cstdio>

#include "cli/args.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/files.h"
#include "io/hub_cache.h"
#include "text/tokenizer.h"

namespace fs::cli {
namespace {

int run_tokenize(const std::vector<std::string>& argv) {
  Args args(argv, {"text", "revision"}, {"special"});
  if (args.positionals().size() != 1 || !args.get("text"))
    throw Error("usage: foldserve tokenize MODEL_DIR --text TEXT [--special]");
  auto tok = Tokenizer::load(resolve_model_location(args.positionals()[0], args.get_or("revision", "")));
  auto ids = tok->encode(*args.get("text"), args.has("special"));
  // Spaced like Python's json.dumps: {"ids": [1, 2, 3]}.
  std::string out = "{\"ids\": [";
  for (size_t k = 0; k < ids.size(); ++k) out += (k ? ", " : "") + std::to_string(ids[k]);
  std::printf("%s]}\n", out.c_str());
  return 0;
}

}  // namespace

FS_REGISTER_COMMAND("tokenize", "MODEL_DIR --text TEXT [--special]: print the token ids as JSON", run_tokenize);

}  // namespace fs::cli
