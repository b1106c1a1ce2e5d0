#pragma once
// Flags shared by the commands that load and run a model (run, serve, bench).
#include <filesystem>
#include <set>
#include <string>

#include "cli/args.h"
#include "engine/engine.h"
#include "io/hf_config.h"
#include "models/checkpoint_maker.h"

namespace fs::cli {

// Adds the shared engine flags (--device, --context, --parallel, --prefill-chunk, --round-tokens, --threads) and
// --revision to `own`.
std::set<std::string> with_model_flags(std::set<std::string> own);
// The model folder from the one optional positional (a folder, or ORG/NAME in the Hugging Face cache) and
// --revision; empty when none is given (the built-in model).
std::filesystem::path model_dir_from_args(const Args& args);
// The ORG/NAME the positional names when it resolves through the hub cache, else "" (a name for the served model
// that is not the snapshot's commit hash).
std::string hub_model_name(const Args& args);
// Validates --device (and applies --threads); returns the device name.
std::string check_device(const Args& args);
// --tensor-parallel N (1 when absent): GPUs to split the model over.
int tensor_parallel_from_args(const Args& args);
EngineOptions engine_options_from_args(const Args& args, int default_parallel);
// For a model on a GPU: rounds of kGpuRoundTokens rows and prompt chunks as long as a round, where --round-tokens
// and --prefill-chunk leave them out.
void use_gpu_round_sizes(const Args& args, EngineOptions& o);
// The preset size flags (--layers, --hidden, … --vision-intermediate) given, as overrides; 0 where absent.
ConfigOverrides size_overrides_from_args(const Args& args);
// --temperature/--top-p/--top-k/--min-p/--seed over the model's generation_config defaults.
SamplingParams sampling_from_args(const Args& args, const GenerationConfig& defaults);

}  // namespace fs::cli
