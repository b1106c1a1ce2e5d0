#pragma once
// Server counters and latency histograms, rendered as Prometheus text together with the engine's gauges.
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "vision/vision_encoder.h"

namespace fs::server {

// A Prometheus histogram with fixed upper bounds (seconds).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // The histogram's lines for metric NAME.
  std::string render(const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  void count_request(const std::string& route, int status);
  void add_tokens(int prompt, int completion, int cached);
  void observe_ttft(double seconds) { ttft_.observe(seconds); }
  void observe_token_latency(double seconds) { token_latency_.observe(seconds); }
  void stream_started() { active_streams_.fetch_add(1); }
  void stream_ended() { active_streams_.fetch_sub(1); }
  int active_streams() const { return active_streams_.load(); }

  // The whole exposition; `engine` is null while the model loads, `vision` without an image tower.
  std::string render(const EngineStats* engine, const vision::VisionEncoderStats* vision = nullptr) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::atomic<uint64_t> prompt_tokens_{0}, completion_tokens_{0}, cached_tokens_{0};
  std::atomic<int> active_streams_{0};
  Histogram ttft_;
  Histogram token_latency_;
};

}  // namespace fs::server
