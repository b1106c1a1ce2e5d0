#include "cli/model_options.h"

#include <cstdlib>

#include "core/error.h"
#include "io/hub_cache.h"

namespace fs::cli {

std::set<std::string> with_model_flags(std::set<std::string> own) {
  for (const char* f : {"device", "context", "parallel", "prefill-chunk", "round-tokens", "threads", "revision",
                        "tensor-parallel"})
    own.insert(f);
  return own;
}

std::filesystem::path model_dir_from_args(const Args& args) {
  if (args.positionals().size() > 1) throw Error("expected at most one MODEL_DIR");
  return resolve_model_location(args.positionals().empty() ? "" : args.positionals()[0], args.get_or("revision", ""));
}

std::string hub_model_name(const Args& args) {
  if (args.positionals().size() != 1) return "";
  const std::string& model = args.positionals()[0];
  std::error_code ec;
  return looks_like_repo_id(model) && !std::filesystem::is_directory(model, ec) ? model : "";
}

std::string check_device(const Args& args) {
  std::string device = args.get_or("device", "auto");
  if (device != "auto" && device != "cpu" && device != "cuda")
    throw Error("--device must be auto, cpu or cuda (got '" + device + "')");
  if (auto t = args.get("threads")) setenv("FOLDSERVE_THREADS", t->c_str(), 1);
  return device;
}

int tensor_parallel_from_args(const Args& args) {
  const int64_t n = args.get_int("tensor-parallel", 1);
  if (n < 1 || n > 64) throw Error("--tensor-parallel must be between 1 and 64");
  if (n > 1 && args.get_or("device", "auto") == "cpu") throw Error("--tensor-parallel splits a model over GPUs; --device cpu has none");
  return int(n);
}

EngineOptions engine_options_from_args(const Args& args, int default_parallel) {
  EngineOptions o;
  o.parallel = int(args.get_int("parallel", default_parallel));
  o.context = int(args.get_int("context", o.context));
  o.prefill_chunk = int(args.get_int("prefill-chunk", o.prefill_chunk));
  o.round_tokens = int(args.get_int("round-tokens", o.round_tokens));
  o.prefill_first = args.has("prefill-first");
  if (o.parallel < 1 || o.parallel > 1024) throw Error("--parallel must be between 1 and 1024");
  if (o.context < 2) throw Error("--context must be at least 2");
  if (o.prefill_chunk < 1 || o.round_tokens < 1) throw Error("--prefill-chunk and --round-tokens must be positive");
  return o;
}

void use_gpu_round_sizes(const Args& args, EngineOptions& o) {
  if (!args.has("round-tokens")) o.round_tokens = kGpuRoundTokens;
  if (!args.has("prefill-chunk")) o.prefill_chunk = o.round_tokens;
}

ConfigOverrides size_overrides_from_args(const Args& args) {
  ConfigOverrides o;
  auto size = [&](const char* flag) { return int(args.get_int(flag, 0)); };
  o.layers = size("layers");
  o.hidden = size("hidden");
  o.heads = size("heads");
  o.kv_heads = size("kv-heads");
  o.intermediate = size("intermediate");
  o.vocab = size("vocab");
  o.head_dim = size("head-dim");
  o.linear_key_heads = size("linear-key-heads");
  o.linear_value_heads = size("linear-value-heads");
  o.linear_key_dim = size("linear-key-dim");
  o.linear_value_dim = size("linear-value-dim");
  o.vision_depth = size("vision-depth");
  o.vision_hidden = size("vision-hidden");
  o.vision_heads = size("vision-heads");
  o.vision_intermediate = size("vision-intermediate");
  return o;
}

SamplingParams sampling_from_args(const Args& args, const GenerationConfig& g) {
  SamplingParams p;
  p.temperature = g.do_sample ? g.temperature.value_or(1.0f) : 0.0f;
  p.top_p = g.do_sample ? g.top_p.value_or(1.0f) : 1.0f;
  p.top_k = g.do_sample ? g.top_k.value_or(0) : 0;
  p.min_p = g.do_sample ? g.min_p.value_or(0.0f) : 0.0f;
  p.temperature = float(args.get_double("temperature", p.temperature));
  p.top_p = float(args.get_double("top-p", p.top_p));
  p.top_k = int(args.get_int("top-k", p.top_k));
  p.min_p = float(args.get_double("min-p", p.min_p));
  if (args.has("seed")) p.seed = uint64_t(args.get_int("seed", 0));
  if (p.temperature < 0) throw Error("--temperature must be ≥ 0");
  if (p.top_p <= 0 || p.top_p > 1) throw Error("--top-p must be in (0, 1]");
  if (p.top_k < 0) throw Error("--top-k must be ≥ 0");
  if (p.min_p < 0 || p.min_p > 1) throw Error("--min-p must be in [0, 1]");
  return p;
}

}  // namespace fs::cli
