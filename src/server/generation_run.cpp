#include "server/generation_run.h"

#include <algorithm>

#include "core/error.h"
#include "server/api_error.h"
#include "text/stop_matcher.h"
#include "text/structured/token_constraint.h"
#include "text/tokenizer.h"

namespace fs::server {

struct GenerationRun::ChoiceState {
  ChoiceState(const Tokenizer& tok, std::vector<std::string> stops, const std::vector<int32_t>& eos, bool logprobs,
              bool as_ids)
      : tokenizer(tok), decoder(tok), stop(std::move(stops)), eos_ids(eos), want_logprobs(logprobs),
        tokens_as_ids(as_ids) {}
  std::string token_text(int32_t id) const {
    return tokens_as_ids ? "token_id:" + std::to_string(id) : tokenizer.decode({id}, false);
  }
  const Tokenizer& tokenizer;
  IncrementalDecoder decoder;
  StopMatcher stop;
  std::vector<int32_t> eos_ids;
  bool want_logprobs;
  bool tokens_as_ids;
  bool stopped = false;  // a stop string or eos ended it
  Clock::time_point last_token{};
  bool any_token = false;
};

std::shared_ptr<GenerationRun> GenerationRun::start(const Context& ctx, std::vector<ChoiceSpec> choices,
                                                    Clock::time_point received, const std::string& prompt_param) {
  std::shared_ptr<GenerationRun> run(new GenerationRun());
  run->metrics_ = ctx.metrics;
  run->received_ = received;
  for (const auto& c : choices) {
    run->states_.push_back(
        std::make_unique<ChoiceState>(ctx.tokenizer, c.stop, ctx.eos_ids, c.sampling.logprobs, c.tokens_as_ids));
  }
  run->running_ = int(choices.size());
  const int context = ctx.engine.options().context;
  for (size_t i = 0; i < choices.size(); ++i) {
    ChoiceSpec& c = choices[i];
    GenerationRequest req;
    int room = context - int(c.prompt.size());
    req.max_tokens = c.max_tokens > 0 ? std::min(c.max_tokens, std::max(room, 1)) : std::max(room, 1);
    req.sampling = c.sampling;
    req.allow_draft = c.allow_draft;
    if (c.constraint) req.constraint = std::make_shared<structured::TokenConstraint>(c.constraint);
    req.eos_ids = ctx.eos_ids;
    req.prompt = std::move(c.prompt);
    req.mrope_positions = std::move(c.extras.mrope_positions);
    req.rope_delta = c.extras.rope_delta;
    req.image_embeddings = std::move(c.extras.image_embeddings);
    req.cache_keys = std::move(c.extras.cache_keys);
    int index = int(i);
    req.on_token = [run, index](const SampledToken& t) { return run->on_token(index, t); };
    req.on_done = [run, index](const GenerationResult& r) { run->on_done(index, r); };
    std::shared_ptr<StreamHandle> handle;
    try {
      if (int(req.prompt.size()) >= context) {
        throw Error("the prompt has " + std::to_string(req.prompt.size()) +
                    " tokens; the context holds " + std::to_string(context) + " with room for the reply");
      }
      handle = ctx.engine.submit(std::move(req));
    } catch (const Error& e) {
      run->abandon(choices.size() - i);
      throw ApiException{bad_request(prompt_param, e.what())};
    }
    if (!handle) {
      run->abandon(choices.size() - i);
      throw ApiException{queue_full()};
    }
    std::lock_guard<std::mutex> lock(run->mu_);
    run->handles_.push_back(std::move(handle));
  }
  return run;
}

GenerationRun::~GenerationRun() = default;

bool GenerationRun::on_token(int choice, const SampledToken& token) {
  ChoiceState& s = *states_[size_t(choice)];
  auto now = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (first_token_.count() < 0) first_token_ = now - received_;
  }
  if (metrics_) {
    if (!s.any_token) metrics_->observe_ttft(std::chrono::duration<double>(now - received_).count());
    else metrics_->observe_token_latency(std::chrono::duration<double>(now - s.last_token).count());
  }
  s.any_token = true;
  s.last_token = now;
  if (s.stopped) return false;
  if (std::find(s.eos_ids.begin(), s.eos_ids.end(), token.id) != s.eos_ids.end()) {
    s.stopped = true;
    return false;
  }
  RunEvent ev;
  ev.choice = choice;
  ev.text = s.stop.push(s.decoder.push(token.id)).text;
  if (s.want_logprobs) {
    TokenLogprob lp{s.token_text(token.id), token.logprob, {}};
    for (const auto& [id, p] : token.top_logprobs) lp.top.emplace_back(s.token_text(id), p);
    ev.logprobs.push_back(std::move(lp));
  }
  s.stopped = s.stop.stopped();
  push(std::move(ev));
  return !s.stopped;
}

void GenerationRun::on_done(int choice, const GenerationResult& result) {
  ChoiceState& s = *states_[size_t(choice)];
  RunEvent ev;
  ev.choice = choice;
  if (!s.stopped) ev.text = s.stop.push(s.decoder.flush()).text;
  if (!s.stop.stopped()) ev.text += s.stop.flush();
  ev.done = true;
  ev.result = result;
  ev.finish_reason = s.stopped                                  ? "stop"
                     : result.reason == FinishReason::Length    ? "length"
                     : result.reason == FinishReason::Cancelled ? "abort"
                                                                : "stop";
  if (metrics_) metrics_->add_tokens(result.prompt_tokens, result.completion_tokens, result.cached_tokens);
  push(std::move(ev));
}

void GenerationRun::push(RunEvent event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (event.done) --running_;
    events_.push_back(std::move(event));
  }
  ready_.notify_all();
}

std::vector<RunEvent> GenerationRun::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  ready_.wait_for(lock, timeout, [&] { return !events_.empty(); });
  std::vector<RunEvent> out(std::make_move_iterator(events_.begin()), std::make_move_iterator(events_.end()));
  events_.clear();
  return out;
}

bool GenerationRun::finished() {
  std::lock_guard<std::mutex> lock(mu_);
  return running_ <= 0 && events_.empty();
}

void GenerationRun::abandon(size_t unsubmitted) {
  cancel();
  std::lock_guard<std::mutex> lock(mu_);
  running_ -= int(unsubmitted);
}

void GenerationRun::cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& h : handles_) h->cancel();
}

double GenerationRun::ttft_seconds() const {
  auto& self = const_cast<GenerationRun&>(*this);
  std::lock_guard<std::mutex> lock(self.mu_);
  return first_token_.count() < 0 ? -1.0 : std::chrono::duration<double>(first_token_).count();
}

}  // namespace fs::server
