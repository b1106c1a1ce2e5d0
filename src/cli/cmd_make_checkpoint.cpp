// foldserve make-checkpoint: a random-weight checkpoint of a real model's shapes, for benchmarks; size flags
// (--layers, --hidden, --head-dim, --linear-value-heads, --vision-depth, ...) shrink a preset for tests.
#include <cstdio>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/model_options.h"
#include "core/error.h"
#include "core/files.h"
#include "models/checkpoint_maker.h"

namespace fs::cli {
namespace {

int make(const std::vector<std::string>& argv) {
  Args args(argv,
            {"like", "config", "dtype", "shards", "seed", "tokenizer-from", "layers", "hidden", "heads", "kv-heads",
             "intermediate", "vocab", "head-dim", "linear-key-heads", "linear-value-heads", "linear-key-dim",
             "linear-value-dim", "vision-depth", "vision-hidden", "vision-heads", "vision-intermediate"},
            {});
  if (args.positionals().size() != 1) throw Error("usage: foldserve make-checkpoint (--like NAME | --config FILE) OUT");
  json config;
  if (auto path = args.get("config")) config = read_json_file(*path);
  else config = preset_config(args.get_or("like", "llama-3-8b"));
  apply_overrides(config, size_overrides_from_args(args));
  MakeCheckpointOptions o;
  std::string dtype = args.get_or("dtype", "bf16");
  if (dtype == "bf16") o.dtype = DType::BF16;
  else if (dtype == "f16") o.dtype = DType::F16;
  else if (dtype == "f32") o.dtype = DType::F32;
  else throw Error("--dtype must be bf16, f16 or f32");
  o.shards = int(args.get_int("shards", 1));
  o.seed = uint64_t(args.get_int("seed", 1));
  if (auto t = args.get("tokenizer-from")) o.tokenizer_from = *t;
  make_checkpoint(config, args.positionals()[0], o);
  std::printf("wrote %s\n", args.positionals()[0].c_str());
  return 0;
}

FS_REGISTER_COMMAND("make-checkpoint", "write a random-weight checkpoint of a real model's shapes", make);

}  // namespace
}  // namespace fs::cli
