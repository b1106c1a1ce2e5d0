#pragma once
// The engine side of one HTTP request: its choices submitted as engine streams, generated ids turned into text on
// the engine thread (incremental UTF-8-safe decoding, stop strings), and events handed to the HTTP thread through
// a queue.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/metrics.h"

namespace fs {
class Tokenizer;
namespace structured {
class CompiledConstraint;
}
}

namespace fs::server {

// What a prompt with images carries besides its ids (GenerationRequest fields of the same names).
struct PromptExtras {
  std::vector<int32_t> mrope_positions;
  int rope_delta = 0;
  std::vector<float> image_embeddings;
  std::vector<uint64_t> cache_keys;
};

// One choice: its prompt and settings.
struct ChoiceSpec {
  std::vector<int32_t> prompt;
  PromptExtras extras;
  SamplingParams sampling;
  int max_tokens = 0;  // 0 → up to the context
  std::vector<std::string> stop;
  bool allow_draft = true;
  bool tokens_as_ids = false;  // logprob tokens as "token_id:N"
  std::shared_ptr<structured::CompiledConstraint> constraint;  // each choice keeps its own state in it
};

struct TokenLogprob {
  std::string token;
  float logprob = 0.0f;
  std::vector<std::pair<std::string, float>> top;
};

struct RunEvent {
  int choice = 0;
  std::string text;  // newly complete text, stop strings removed
  std::vector<TokenLogprob> logprobs;
  bool done = false;
  GenerationResult result;     // when done
  std::string finish_reason;   // "stop", "length" or "abort" (cancelled) when done
};

using Clock = std::chrono::steady_clock;

class GenerationRun {
 public:
  struct Context {
    Engine& engine;
    const Tokenizer& tokenizer;
    std::vector<int32_t> eos_ids;
    Metrics* metrics = nullptr;
  };
  // Submits every choice. Throws ApiException: 400 when a prompt cannot fit the context, 429 when the queue is
  // full (choices already submitted are cancelled).
  // prompt_param names the request field a too-long prompt came from.
  static std::shared_ptr<GenerationRun> start(const Context& ctx, std::vector<ChoiceSpec> choices,
                                              Clock::time_point received, const std::string& prompt_param);
  ~GenerationRun();

  // Events that arrived, waiting up to `timeout` for the first; empty on timeout.
  std::vector<RunEvent> wait(std::chrono::milliseconds timeout);
  // Every choice has ended and every event was taken.
  bool finished();
  void cancel();
  int choices() const { return int(states_.size()); }
  // Seconds from the request to its first generated token (negative when none came).
  double ttft_seconds() const;

 private:
  struct ChoiceState;
  GenerationRun() = default;
  bool on_token(int choice, const SampledToken& token);
  void on_done(int choice, const GenerationResult& result);
  void push(RunEvent event);
  // Cancels what was submitted and stops waiting for the `unsubmitted` choices that never reached the engine.
  void abandon(size_t unsubmitted);

  Metrics* metrics_ = nullptr;
  Clock::time_point received_;
  std::vector<std::unique_ptr<ChoiceState>> states_;
  std::vector<std::shared_ptr<StreamHandle>> handles_;
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<RunEvent> events_;
  int running_ = 0;
  std::chrono::nanoseconds first_token_{-1};
};

}  // namespace fs::server
