#include "cli/interactive_chat.h"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <future>
#include <iostream>

#include "core/error.h"
#include "core/files.h"

namespace fs::cli {
namespace {

std::atomic<bool> g_interrupted{false};

void on_sigint(int) { g_interrupted.store(true); }

// Installs the SIGINT handler without SA_RESTART so a blocked read returns.
void install_sigint() {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
}

}  // namespace

int interactive_chat(LoadedModel& m, const EngineOptions& options, const SamplingParams& sampling, int max_tokens,
                     const std::string& system_prompt) {
  if (!m.chat_template) throw Error(m.dir.string() + " has no chat template; use --prompt");
  install_sigint();
  Engine engine(*m.model, options);
  json history = json::array();
  if (!system_prompt.empty()) history.push_back({{"role", "system"}, {"content", system_prompt}});
  std::printf("foldserve chat with %s — Ctrl-C stops a reply, Ctrl-D or /exit quits.\n", m.name.c_str());
  for (;;) {
    std::printf("\n> ");
    std::fflush(stdout);
    std::string line;
    g_interrupted.store(false);
    if (!std::getline(std::cin, line)) {
      if (g_interrupted.load()) {  // Ctrl-C at the prompt: a fresh prompt, not the end
        std::cin.clear();
        clearerr(stdin);
        std::printf("\n");
        continue;
      }
      std::printf("\n");
      return 0;
    }
    if (line == "/exit" || line == "/quit") return 0;
    if (line.empty()) continue;
    history.push_back({{"role", "user"}, {"content", line}});
    std::vector<int32_t> prompt;
    try {
      prompt = m.tokenizer->encode(m.chat_template->render(history, nullptr, true), false);
    } catch (const std::exception& e) {
      std::printf("error: %s\n", e.what());
      history.erase(history.end() - 1);
      continue;
    }
    IncrementalDecoder decoder(*m.tokenizer);
    std::string reply;
    std::promise<GenerationResult> done;
    GenerationRequest req;
    req.prompt = std::move(prompt);
    req.max_tokens = max_tokens;
    req.sampling = sampling;
    req.eos_ids = m.generation.eos_ids;
    req.on_token = [&](const SampledToken& t) {
      std::string piece = decoder.push(t.id);
      reply += piece;
      std::fputs(piece.c_str(), stdout);
      std::fflush(stdout);
      return !g_interrupted.load();
    };
    req.on_done = [&](const GenerationResult& r) { done.set_value(r); };
    try {
      if (!engine.submit(std::move(req))) throw Error("the engine is busy");
    } catch (const std::exception& e) {
      std::printf("error: %s\n", e.what());
      history.erase(history.end() - 1);
      continue;
    }
    GenerationResult r = done.get_future().get();
    std::string tail = decoder.flush();
    reply += tail;
    std::printf("%s%s\n", tail.c_str(), g_interrupted.load() ? " [stopped]" : "");
    if (r.reason == FinishReason::Error) std::printf("error: %s\n", r.error.c_str());
    history.push_back({{"role", "assistant"}, {"content", reply}});
  }
}

}  // namespace fs::cli
