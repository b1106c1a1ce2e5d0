// foldserve run: generate from a prompt (text, chat or ids) on the local machine, or chat interactively.
#include <cstdio>
#include <fstream>
#include <future>
#include <iostream>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/interactive_chat.h"
#include "cli/draft_options.h"
#include "cli/model_options.h"
#include "core/error.h"
#include "core/files.h"
#include "engine/engine.h"
#include "engine/loaded_model.h"
#include "models/kv_pool.h"

namespace fs::cli {
namespace {

// Logits of the prompt's last position, computed on a private pool.
std::vector<float> last_logits(Model& model, const std::vector<int32_t>& ids) {
  const SequenceMemorySpec spec = model.memory_spec();
  const int P = 16, pages = int((ids.size() + P - 1) / P);
  KvPool pool(spec, P, pages, spec.has_state() ? 1 : 0);
  std::vector<int32_t> table;
  for (int i = 0; i < pages; ++i) table.push_back(*pool.allocate());
  SequenceChunk chunk{ids, 0, table, false};
  if (spec.has_state()) chunk.state_slot = *pool.allocate_state();
  return model.forward(std::span<const SequenceChunk>(&chunk, 1), pool);
}

void write_f32(const std::string& path, const std::vector<float>& v) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
  if (!out) throw Error("cannot write " + path);
}

int run(const std::vector<std::string>& argv) {
  Args args(argv, with_draft_flags(with_model_flags({"prompt", "ids", "max-tokens", "temperature", "seed", "top-p",
                                                     "top-k", "min-p", "dump-logits", "system"})),
            {"chat", "json"});
  std::filesystem::path dir = model_dir_from_args(args);
  const std::string device = check_device(args);
  auto m = load_model(dir, {}, device, tensor_parallel_from_args(args));
  if (auto hub_name = hub_model_name(args); !hub_name.empty()) m->name = hub_name;
  SamplingParams sampling = sampling_from_args(args, m->generation);
  const int max_tokens = int(args.get_int("max-tokens", 256));
  EngineOptions eo = engine_options_from_args(args, 1);
  if (m->model->device_memory_free()) use_gpu_round_sizes(args, eo);
  if (!args.has("prompt") && !args.has("ids")) {
    apply_draft_options(args, *m, eo);
    return interactive_chat(*m, eo, sampling, max_tokens, args.get_or("system", ""));
  }

  std::vector<int32_t> prompt;
  if (args.has("ids")) {
    prompt = parse_id_list(*args.get("ids"));
  } else if (args.has("chat")) {
    if (!m->chat_template) throw Error(m->dir.string() + " has no chat template (drop --chat)");
    json messages = json::array({{{"role", "user"}, {"content", *args.get("prompt")}}});
    std::string text = m->chat_template->render(messages, nullptr, true);
    prompt = m->tokenizer->encode(text, false);
  } else {
    prompt = m->tokenizer->encode(*args.get("prompt"), true);
  }
  if (auto path = args.get("dump-logits")) write_f32(*path, last_logits(*m->model, prompt));

  eo.context = std::max<int>(eo.context, int(prompt.size()) + 1);
  apply_draft_options(args, *m, eo);
  Engine engine(*m->model, eo);
  const bool as_json = args.has("json");
  IncrementalDecoder decoder(*m->tokenizer);
  std::vector<int32_t> ids;
  std::promise<GenerationResult> done;
  GenerationRequest req;
  req.prompt = prompt;
  req.max_tokens = max_tokens;
  req.sampling = sampling;
  req.eos_ids = m->generation.eos_ids;
  req.on_token = [&](const SampledToken& t) {
    ids.push_back(t.id);
    if (!as_json) {
      std::fputs(decoder.push(t.id).c_str(), stdout);
      std::fflush(stdout);
    }
    return true;
  };
  req.on_done = [&](const GenerationResult& r) { done.set_value(r); };
  if (!engine.submit(std::move(req))) throw Error("the engine refused the request");
  GenerationResult result = done.get_future().get();
  if (result.reason == FinishReason::Error) throw Error(result.error);
  if (as_json) {
    json out = {{"prompt_ids", prompt}, {"ids", ids}, {"text", m->tokenizer->decode(ids, true)}};
    std::printf("%s\n", out.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
  } else {
    std::printf("%s\n", decoder.flush().c_str());
  }
  return 0;
}

FS_REGISTER_COMMAND("run", "generate from --prompt/--ids, or chat interactively", run);

}  // namespace
}  // namespace fs::cli
