#include "server/metrics.h"

#include <cstdio>
#include <sstream>

namespace fs::server {
namespace {

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

void header(std::ostringstream& out, const std::string& name, const std::string& help, const char* type) {
  out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
}

void scalar(std::ostringstream& out, const std::string& name, const std::string& help, const char* type,
            double value) {
  header(out, name, help, type);
  out << name << ' ' << number(value) << '\n';
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[i];
  sum_ += value;
  ++count_;
}

std::string Histogram::render(const std::string& name, const std::string& help) const {
  std::ostringstream out;
  header(out, name, help, "histogram");
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out << name << "_bucket{le=\"" << number(bounds_[i]) << "\"} " << cumulative << '\n';
  }
  out << name << "_bucket{le=\"+Inf\"} " << count_ << '\n';
  out << name << "_sum " << number(sum_) << '\n';
  out << name << "_count " << count_ << '\n';
  return out.str();
}

Metrics::Metrics()
    : ttft_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      token_latency_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}) {}

void Metrics::count_request(const std::string& route, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{route, status}];
}

void Metrics::add_tokens(int prompt, int completion, int cached) {
  prompt_tokens_.fetch_add(uint64_t(prompt > 0 ? prompt : 0));
  completion_tokens_.fetch_add(uint64_t(completion > 0 ? completion : 0));
  cached_tokens_.fetch_add(uint64_t(cached > 0 ? cached : 0));
}

std::string Metrics::render(const EngineStats* engine, const vision::VisionEncoderStats* vision) const {
  std::ostringstream out;
  header(out, "foldserve_requests_total", "HTTP requests answered, by route and status.", "counter");
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, n] : requests_)
      out << "foldserve_requests_total{route=\"" << key.first << "\",status=\"" << key.second << "\"} " << n << '\n';
  }
  scalar(out, "foldserve_prompt_tokens_total", "Prompt tokens of finished generations.", "counter",
         double(prompt_tokens_.load()));
  scalar(out, "foldserve_completion_tokens_total", "Generated tokens of finished generations.", "counter",
         double(completion_tokens_.load()));
  scalar(out, "foldserve_cached_prompt_tokens_total", "Prompt tokens served from the prompt cache.", "counter",
         double(cached_tokens_.load()));
  out << ttft_.render("foldserve_time_to_first_token_seconds", "Time from request to first generated token.");
  out << token_latency_.render("foldserve_inter_token_latency_seconds", "Time between generated tokens of a stream.");
  scalar(out, "foldserve_http_generations_active", "Generations the HTTP layer is waiting on.", "gauge",
         active_streams_.load());
  scalar(out, "foldserve_model_loaded", "1 once the model serves.", "gauge", engine ? 1 : 0);
  if (vision) {
    scalar(out, "foldserve_images_encoded_total", "Images run through the vision tower.", "counter",
           double(vision->images));
    scalar(out, "foldserve_image_encodes_cancelled_total",
           "Image encodes stopped because the client left or the server drained.", "counter",
           double(vision->cancelled));
  }
  if (engine) {
    scalar(out, "foldserve_active_streams", "Streams running in the engine.", "gauge", engine->active_streams);
    scalar(out, "foldserve_queue_depth", "Streams waiting for admission.", "gauge", engine->queued);
    scalar(out, "foldserve_kv_pages_used", "KV pool pages in use.", "gauge", engine->kv_pages_used);
    scalar(out, "foldserve_kv_pages_free", "KV pool pages free.", "gauge",
           engine->kv_pages_total - engine->kv_pages_used);
    scalar(out, "foldserve_rounds_total", "Scheduler rounds (forward passes).", "counter", double(engine->rounds));
    scalar(out, "foldserve_round_rows_total", "Rows summed over all rounds.", "counter", double(engine->rows));
    scalar(out, "foldserve_preemptions_total", "Streams sent back to the queue to free KV pages.", "counter",
           double(engine->preemptions));
    scalar(out, "foldserve_rows_per_round", "Mean rows per round.", "gauge",
           engine->rounds ? double(engine->rows) / double(engine->rounds) : 0.0);
    scalar(out, "foldserve_draft_windows_total", "Verify windows of drafted tokens (one per stream per round).",
           "counter", double(engine->draft_windows));
    scalar(out, "foldserve_draft_tokens_total", "Draft tokens verified by the target model.", "counter",
           double(engine->drafted_tokens));
    scalar(out, "foldserve_draft_accepted_tokens_total", "Draft tokens kept (equal to the target's own choice).",
           "counter", double(engine->accepted_tokens));
    scalar(out, "foldserve_draft_acceptance_rate", "Kept draft tokens per verified draft token.", "gauge",
           engine->drafted_tokens ? double(engine->accepted_tokens) / double(engine->drafted_tokens) : 0.0);
    scalar(out, "foldserve_draft_accepted_per_window", "Mean draft tokens kept per verify window.", "gauge",
           engine->draft_windows ? double(engine->accepted_tokens) / double(engine->draft_windows) : 0.0);
    const PromptCacheStats& pc = engine->prompt_cache;
    scalar(out, "foldserve_prompt_cache_lookups_total", "Prompt-cache lookups.", "counter", double(pc.lookups));
    scalar(out, "foldserve_prompt_cache_hits_total", "Lookups that adopted a cached prefix.", "counter",
           double(pc.hits));
    scalar(out, "foldserve_prompt_cache_cached_tokens_total", "Prompt positions adopted from the cache.", "counter",
           double(pc.cached_tokens));
    scalar(out, "foldserve_prompt_cache_evictions_total", "Pages evicted from the device.", "counter",
           double(pc.evictions));
    scalar(out, "foldserve_prompt_cache_host_restores_total", "Pages brought back from the host tier.", "counter",
           double(pc.host_restores));
    scalar(out, "foldserve_prompt_cache_pages", "KV pages held by the prompt cache.", "gauge", pc.device_pages);
    scalar(out, "foldserve_prompt_cache_host_pages", "Pages held in the host tier.", "gauge", pc.host_pages);
  }
  return out.str();
}

}  // namespace fs::server
