// POST /v1/chat/completions and /v1/completions: parse, encode images, render the template, tokenize, submit, then
// answer one JSON object or stream server-sent events.
#include <algorithm>
#include <memory>

#include "core/error.h"
#include "server/api_request.h"
#include "server/image_input.h"
#include "server/openai_format.h"
#include "server/output_constraint.h"
#include "server/reply_splitter.h"
#include "server/request_trace.h"
#include "server/server_state.h"
#include "server/sse.h"

namespace fs::server {
namespace {

using json = nlohmann::json;

// What one request produces, gathered from its run's events (both for JSON answers and for streams).
struct Reply {
  bool chat = true;
  std::string id, model;
  long long created = 0;
  int n = 1;  // choices per prompt
  std::vector<int> prompt_sizes;  // per choice
  bool include_usage = false;
  bool want_logprobs = false;
  bool reasoning_prompt = false;
  bool parse_tools = false;
  std::shared_ptr<GenerationRun> run;

  struct Choice {
    std::string text;
    std::vector<TokenLogprob> logprobs;
    std::unique_ptr<ReplySplitter> splitter;
    size_t text_offset = 0;
    bool done = false;
    GenerationResult result;
    std::string finish_reason;
  };
  std::vector<Choice> choices;
  std::string error;  // an engine failure

  json usage() const {
    int prompt = 0, completion = 0, cached = 0;
    for (size_t i = 0; i < choices.size(); ++i) {
      if (int(i) % n == 0) {
        prompt += prompt_sizes[i];
        cached += choices[i].result.cached_tokens;
      }
      completion += choices[i].result.completion_tokens;
    }
    return usage_json(prompt, completion, cached);
  }

  void trace(RequestTrace& t) const {
    json u = usage();
    t.id = id;
    t.details["prompt_tokens"] = u["prompt_tokens"];
    t.details["completion_tokens"] = u["completion_tokens"];
    t.details["cached_tokens"] = u["prompt_tokens_details"]["cached_tokens"];
    if (double ttft = run->ttft_seconds(); ttft >= 0) t.details["ttft_ms"] = ttft * 1000.0;
    json reasons = json::array();
    for (const auto& c : choices) reasons.push_back(c.finish_reason);
    t.details["finish_reasons"] = reasons;
    int drafted = 0, accepted = 0;
    for (const auto& c : choices) {
      drafted += c.result.drafted_tokens;
      accepted += c.result.accepted_tokens;
    }
    if (drafted > 0) t.details["draft"] = {{"drafted_tokens", drafted}, {"accepted_tokens", accepted}};
  }

  json chunk(json choice_list) const {
    return {{"id", id},
            {"object", chat ? "chat.completion.chunk" : "text_completion"},
            {"created", created},
            {"model", model},
            {"choices", std::move(choice_list)}};
  }

  // The SSE text for one event.
  std::string stream_event(const RunEvent& ev) {
    Choice& c = choices[size_t(ev.choice)];
    if (ev.done) {
      c.done = true;
      c.result = ev.result;
      c.finish_reason = ev.finish_reason;
      if (ev.result.reason == FinishReason::Error) error = ev.result.error;
    }
    std::string out;
    if (!chat) {
      json lp = want_logprobs ? completion_logprobs_json(ev.logprobs, c.text_offset) : json(nullptr);
      c.text_offset += ev.text.size();
      if (!ev.text.empty() || ev.done || want_logprobs) {
        out += sse_event(chunk(json::array({{{"index", ev.choice},
                                              {"text", ev.text},
                                              {"logprobs", lp},
                                              {"finish_reason", ev.done ? json(c.finish_reason) : json(nullptr)}}})));
      }
      return out;
    }
    ReplyDelta d = c.splitter->push(ev.text);
    if (ev.done) {
      ReplyDelta rest = c.splitter->finish();
      d.reasoning += rest.reasoning;
      d.content += rest.content;
    }
    json delta = json::object();
    if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
    if (!d.content.empty()) delta["content"] = d.content;
    const auto& calls = c.splitter->tool_calls();
    if (d.first_new_tool_call < calls.size()) delta["tool_calls"] = tool_calls_json(calls, d.first_new_tool_call, true);
    if (!delta.empty() || (want_logprobs && !ev.logprobs.empty())) {
      out += sse_event(chunk(json::array({{{"index", ev.choice},
                                            {"delta", delta},
                                            {"logprobs", want_logprobs ? chat_logprobs_json(ev.logprobs) : json(nullptr)},
                                            {"finish_reason", nullptr}}})));
    }
    if (ev.done) {
      out += sse_event(chunk(json::array(
          {{{"index", ev.choice}, {"delta", json::object()}, {"logprobs", nullptr}, {"finish_reason", finish(c)}}})));
    }
    return out;
  }

  std::string finish(const Choice& c) const {
    if (c.splitter && !c.splitter->tool_calls().empty() && c.finish_reason != "length") return "tool_calls";
    return c.finish_reason;
  }

  void gather(const RunEvent& ev) {
    Choice& c = choices[size_t(ev.choice)];
    c.text += ev.text;
    for (const auto& lp : ev.logprobs) c.logprobs.push_back(lp);
    if (ev.done) {
      c.done = true;
      c.result = ev.result;
      c.finish_reason = ev.finish_reason;
      if (ev.result.reason == FinishReason::Error) error = ev.result.error;
    }
  }

  json whole() {
    json list = json::array();
    for (size_t i = 0; i < choices.size(); ++i) {
      Choice& c = choices[i];
      json item = {{"index", i}};
      if (chat) {
        ReplyDelta d = c.splitter->push(c.text);
        ReplyDelta rest = c.splitter->finish();
        std::string content = d.content + rest.content, reasoning = d.reasoning + rest.reasoning;
        const auto& calls = c.splitter->tool_calls();
        json msg = {{"role", "assistant"}};
        if (!calls.empty()) {
          size_t a = content.find_first_not_of(" \n\t\r"), b = content.find_last_not_of(" \n\t\r");
          content = a == std::string::npos ? "" : content.substr(a, b - a + 1);
        }
        msg["content"] = content.empty() && !calls.empty() ? json(nullptr) : json(content);
        msg["refusal"] = nullptr;
        if (!reasoning.empty()) msg["reasoning_content"] = reasoning;
        if (!calls.empty()) msg["tool_calls"] = tool_calls_json(calls, 0, false);
        item["message"] = msg;
        item["logprobs"] = want_logprobs ? chat_logprobs_json(c.logprobs) : json(nullptr);
      } else {
        item["text"] = c.text;
        item["logprobs"] = want_logprobs ? completion_logprobs_json(c.logprobs, 0) : json(nullptr);
      }
      item["finish_reason"] = finish(c);
      list.push_back(std::move(item));
    }
    return {{"id", id},
            {"object", chat ? "chat.completion" : "text_completion"},
            {"created", created},
            {"model", model},
            {"choices", list},
            {"usage", usage()}};
  }
};

// Streams the reply's events as SSE; the run is cancelled as soon as a write fails (the client left).
void stream_reply(Server::State& s, http::Response& res, std::shared_ptr<Reply> reply) {
  s.metrics.stream_started();
  struct Progress {
    bool started = false, complete = false;
    Clock::time_point last_write = Clock::now();
  };
  auto progress = std::make_shared<Progress>();
  res.set_header("cache-control", "no-cache");
  res.set_header("x-accel-buffering", "no");
  res.set_stream(
      "text/event-stream",
      [&s, reply, progress](http::ChunkSink& sink) {
        if (s.abort_streams.load()) reply->run->cancel();
        std::string out;
        if (!progress->started) {
          progress->started = true;
          if (reply->chat) {
            json roles = json::array();
            for (size_t i = 0; i < reply->choices.size(); ++i)
              roles.push_back({{"index", i},
                               {"delta", {{"role", "assistant"}, {"content", ""}, {"refusal", nullptr}}},
                               {"logprobs", nullptr},
                               {"finish_reason", nullptr}});
            out += sse_event(reply->chunk(roles));
          }
        }
        for (const RunEvent& ev : reply->run->wait(std::chrono::milliseconds(250))) out += reply->stream_event(ev);
        if (reply->run->finished()) {
          if (!reply->error.empty())
            out += sse_event(server_error("generation failed: " + reply->error).to_json());
          if (reply->include_usage) {
            json last = reply->chunk(json::array());
            last["usage"] = reply->usage();
            out += sse_event(last);
          }
          out += sse_done();
          progress->complete = true;
          reply->trace(current_trace());
        }
        if (out.empty() && Clock::now() - progress->last_write > std::chrono::seconds(1)) out = sse_heartbeat();
        if (!out.empty()) {
          if (!sink.write(out)) {
            reply->run->cancel();
            reply->trace(current_trace());
            current_trace().details["client_gone"] = true;
            return false;
          }
          progress->last_write = Clock::now();
        }
        if (progress->complete) sink.done();
        return true;
      },
      [&s, reply](bool) {
        reply->run->cancel();
        s.metrics.stream_ended();
      });
}

// Builds the choices (n per prompt; choice i of a seeded request gets seed + i) and runs them.
void generate(Server::State& s, const http::Request& req, http::Response& res, std::shared_ptr<Reply> reply,
              const std::vector<std::vector<int32_t>>& prompts, const GenerationFields& gen,
              const std::string& prompt_param, const PromptExtras& extras = {}) {
  LoadedModel& m = *s.model;
  std::shared_ptr<structured::CompiledConstraint> constraint;
  if (gen.constraint) constraint = compile_constraint(*m.tokenizer, *gen.constraint);
  std::vector<ChoiceSpec> specs;
  for (const auto& prompt : prompts) {
    for (int j = 0; j < gen.n; ++j) {
      ChoiceSpec c;
      c.prompt = prompt;
      c.extras = extras;
      c.sampling = resolve_sampling(gen, m.generation);
      if (c.sampling.seed && j > 0) c.sampling.seed = *c.sampling.seed + uint64_t(j);
      c.max_tokens = gen.max_tokens.value_or(0);
      c.stop = gen.stop;
      c.allow_draft = gen.allow_draft;
      c.tokens_as_ids = gen.tokens_as_ids;
      c.constraint = constraint;
      reply->prompt_sizes.push_back(int(prompt.size()));
      specs.push_back(std::move(c));
    }
  }
  reply->n = gen.n;
  reply->want_logprobs = gen.logprobs;
  reply->include_usage = gen.include_usage;
  reply->model = s.served_name;
  reply->created = unix_seconds();
  reply->choices.resize(specs.size());
  for (auto& c : reply->choices) c.splitter = std::make_unique<ReplySplitter>(reply->reasoning_prompt, reply->parse_tools);
  std::vector<int32_t> eos = m.generation.eos_ids;
  eos.insert(eos.end(), m.config.eos_ids.begin(), m.config.eos_ids.end());
  GenerationRun::Context ctx{*s.engine, *m.tokenizer, eos, &s.metrics};
  reply->run = GenerationRun::start(ctx, std::move(specs), current_trace().start, prompt_param);
  current_trace().id = reply->id;
  if (gen.stream) return stream_reply(s, res, reply);

  s.metrics.stream_started();
  while (!reply->run->finished()) {
    if (s.abort_streams.load()) reply->run->cancel();
    for (const RunEvent& ev : reply->run->wait(std::chrono::milliseconds(250))) reply->gather(ev);
  }
  s.metrics.stream_ended();
  reply->trace(current_trace());
  if (!reply->error.empty()) return s.answer_error(res, server_error("generation failed: " + reply->error));
  s.answer_json(res, reply->whole());
}

// An image-pad id without its image would be embedded as a plain token; such prompts are refused.
bool holds_image_pad(const LoadedModel& m, const std::vector<int32_t>& ids) {
  const int32_t pad = m.config.image_token_id;
  return pad >= 0 && std::find(ids.begin(), ids.end(), pad) != ids.end();
}

ParseLimits limits_for(const Server::State& s) {
  ParseLimits l;
  l.served_model = s.served_name;
  l.max_n = s.options.max_n;
  l.vocab_size = s.model->tokenizer->vocab_size();
  l.image_refusal = image_refusal(*s.model, s.options.vision);
  l.max_images = s.options.vision.max_images;
  l.reserved_text = reserved_image_text(*s.model);
  return l;
}

void chat_completions(Server::State& s, const http::Request& req, http::Response& res) {
  auto parsed = parse_chat_request(req.body, limits_for(s));
  if (auto* e = std::get_if<ApiError>(&parsed)) return s.answer_error(res, *e);
  ChatRequest& r = std::get<ChatRequest>(parsed);
  LoadedModel& m = *s.model;
  if (!m.chat_template)
    return s.answer_error(res, bad_request("messages", "this model has no chat template; use /v1/completions"));
  if (r.gen.constraint && r.gen.constraint->param == "tool_choice" &&
      m.chat_template->source().find("<tool_call>") == std::string::npos)
    return s.answer_error(res, bad_request("tool_choice", "this model's chat template has no tool-call syntax to force"));
  std::string prompt;
  const bool literal = r.literal_content.value_or(s.options.literal_content) && r.images.empty();
  std::vector<std::pair<size_t, size_t>> content_ranges;
  try {
    if (literal) {
      ChatTemplate::Marked marked = m.chat_template->render_marked(r.messages, r.tools, true, r.template_kwargs);
      prompt = std::move(marked.text);
      content_ranges = std::move(marked.content);
    } else {
      prompt = m.chat_template->render(r.messages, r.tools, true, r.template_kwargs);
    }
  } catch (const Error& e) {
    return s.answer_error(res, bad_request("messages", std::string("the chat template failed: ") + e.what()));
  }
  // Each image is fetched, decoded and encoded once, after the cheaper checks, on the tower's scheduler; it stops
  // when the client leaves or the drain time is over.
  std::vector<EncodedImage> images;
  if (!r.images.empty()) {
    EncodeControl control;
    control.should_stop = [&s, &req] { return s.abort_streams.load() || (req.client_gone && req.client_gone()); };
    control.max_image_tokens = s.options.engine.context;
    images = encode_images(r.images, m, s.options.vision, control);
    current_trace().details["images"] = images.size();
  }
  auto reply = std::make_shared<Reply>();
  reply->chat = true;
  reply->id = random_id("chatcmpl-");
  reply->reasoning_prompt = prompt_opens_reasoning(prompt);
  reply->parse_tools = !r.tools.is_null();
  PromptExtras extras;
  std::vector<std::vector<int32_t>> prompts;
  if (images.empty()) {
    prompts.push_back(literal ? m.tokenizer->encode_literal(prompt, content_ranges, false)
                              : m.tokenizer->encode(prompt, false));
    if (holds_image_pad(m, prompts[0]))
      return s.answer_error(res, bad_request("messages", "the prompt holds an image placeholder token but no image"));
  } else {
    VisionPrompt vp = build_vision_prompt(prompt, m, images);
    prompts.push_back(std::move(vp.prompt.ids));
    extras.mrope_positions = std::move(vp.prompt.mrope_positions);
    extras.rope_delta = vp.prompt.rope_delta;
    extras.image_embeddings = std::move(vp.prompt.image_embeddings);
    extras.cache_keys = std::move(vp.cache_keys);
  }
  generate(s, req, res, reply, prompts, r.gen, "messages", extras);
}

void completions(Server::State& s, const http::Request& req, http::Response& res) {
  auto parsed = parse_completion_request(req.body, limits_for(s));
  if (auto* e = std::get_if<ApiError>(&parsed)) return s.answer_error(res, *e);
  CompletionRequest& r = std::get<CompletionRequest>(parsed);
  LoadedModel& m = *s.model;
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& p : r.prompts) {
    prompts.push_back(p.text ? m.tokenizer->encode(*p.text, true) : p.ids);
    if (prompts.back().empty()) return s.answer_error(res, bad_request("prompt", "the prompt has no tokens"));
    if (holds_image_pad(m, prompts.back()))
      return s.answer_error(res, bad_request("prompt", "the prompt holds an image placeholder token; images go "
                                                       "through /v1/chat/completions image parts"));
  }
  auto reply = std::make_shared<Reply>();
  reply->chat = false;
  reply->id = random_id("cmpl-");
  generate(s, req, res, reply, prompts, r.gen, "prompt");
}

// Wraps a generation route: its metric label, and ApiExceptions answered.
http::Handler route(Server::State& s, const char* label,
                    void (*fn)(Server::State&, const http::Request&, http::Response&)) {
  return [&s, label, fn](const http::Request& req, http::Response& res) {
    current_trace().route = label;
    try {
      fn(s, req, res);
    } catch (const ApiException& e) {
      s.answer_error(res, e.error);
    }
  };
}

}  // namespace

void add_completion_routes(Server::State& s) {
  s.http.route("POST", "/v1/chat/completions", route(s, "/v1/chat/completions", chat_completions));
  s.http.route("POST", "/v1/completions", route(s, "/v1/completions", completions));
}

}  // namespace fs::server
