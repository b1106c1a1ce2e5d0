#pragma once
// A terminal chat over the engine: history kept, replies streamed, Ctrl-C stops a reply, Ctrl-D or /exit quits.
#include <string>

#include "engine/engine.h"
#include "engine/loaded_model.h"

namespace fs::cli {

int interactive_chat(LoadedModel& model, const EngineOptions& options, const SamplingParams& sampling,
                     int max_tokens, const std::string& system_prompt);

}  // namespace fs::cli
