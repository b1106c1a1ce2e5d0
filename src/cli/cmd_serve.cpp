// foldserve serve: the OpenAI-compatible HTTP server over one model (the built-in fortune-demo by default).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <thread>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/draft_options.h"
#include "cli/model_options.h"
#include "core/error.h"
#include "engine/device_budget.h"
#include "engine/drafters/drafter.h"
#include "engine/loaded_model.h"
#include "engine/memory_budget.h"
#include "server/auth.h"
#include "server/server.h"
#include "server/image_input.h"
#include "vision/vision_encoder.h"

namespace fs::cli {
namespace {

// Progress on a terminal while weights load: one line redrawn in place.
LoadProgress terminal_progress() {
  if (!::isatty(STDERR_FILENO)) return {};
  return [](size_t done, size_t total) {
    int pct = total ? int(100 * done / total) : 100;
    std::fprintf(stderr, "\rloading model: %3d%% (%zu/%zu)%s", pct, done, total, done >= total ? "\n" : "");
    std::fflush(stderr);
  };
}

// --vision and the media limits: what an image part may fetch and decode.
server::VisionOptions vision_options(const Args& args) {
  server::VisionOptions v;
  v.enabled = args.has("vision");
  v.weights_on_host = args.has("vision-host");
  v.fetch.allow_local = args.has("media-allow-local");
  if (auto domains = args.get("media-domains")) {
    size_t start = 0;
    while (start <= domains->size()) {
      size_t comma = domains->find(',', start);
      if (comma == std::string::npos) comma = domains->size();
      std::string d = domains->substr(start, comma - start);
      if (d.empty()) throw Error("--media-domains: empty domain in '" + *domains + "'");
      v.fetch.allowed_domains.push_back(d);
      start = comma + 1;
    }
  }
  long long bytes = args.get_int("max-image-bytes", (long long)v.decode.max_bytes);
  if (bytes < 1024) throw Error("--max-image-bytes must be at least 1024");
  v.decode.max_bytes = v.fetch.max_bytes = size_t(bytes);
  long long pixels = args.get_int("max-image-pixels", (long long)v.decode.max_pixels);
  if (pixels < 1) throw Error("--max-image-pixels must be at least 1");
  v.decode.max_pixels = uint64_t(pixels);
  v.max_images = int(args.get_int("max-images", v.max_images));
  if (v.max_images < 1 || v.max_images > 256) throw Error("--max-images must be between 1 and 256");
  long long timeout = args.get_int("media-timeout-ms", (long long)v.fetch.timeout.count());
  if (timeout < 1) throw Error("--media-timeout-ms must be at least 1");
  v.fetch.timeout = std::chrono::milliseconds(timeout);
  v.max_image_seconds = args.get_double("max-image-seconds", v.max_image_seconds);
  if (!(v.max_image_seconds >= 0 && v.max_image_seconds <= 3600))
    throw Error("--max-image-seconds must be between 0 (no time bound) and 3600");
  return v;
}

void print_pool(const EngineOptions& eo) {
  std::fprintf(stderr, "KV pool: %d pages of %d positions; up to %d streams at once, each up to %d positions "
                       "(streams are admitted by the pages they use and preempted when the pool runs dry)\n",
               eo.kv_pages, eo.kv_page_tokens, eo.parallel, std::min(eo.context, eo.kv_pages * eo.kv_page_tokens));
}

void print_vision_lines(const LoadedModel& m) {
  if (m.vision_encoder)
    for (const std::string& line : m.vision_encoder->budget_lines()) std::fprintf(stderr, "  %s\n", line.c_str());
}

// A model on the host: the KV pool sized from RAM (eo.kv_pages 0) and everything checked against `available`.
void budget_ram(const LoadedModel& m, EngineOptions& eo, size_t available) {
  size_t weights = m.model->resident_weight_bytes();
  if (m.vision_encoder) {
    const vision::VisionEncoderStats vs = m.vision_encoder->stats();
    weights += vs.host_weight_bytes + vs.pinned_stage_bytes;
  }
  // A draft model's K/V pages are touched only as streams draft: the target's pool is sized beside them.
  const size_t drafter = eo.drafter ? eo.drafter->memory().host_to_come : 0;
  if (eo.kv_pages == 0)
    eo.kv_pages = kv_pool_pages_for_serving(m.config, weights, eo, available > drafter ? available - drafter : 0);
  print_pool(eo);
  MemoryBudget budget = cpu_budget(m.config, weights, eo, available);
  if (drafter) budget.lines.push_back({"drafter " + std::string(eo.drafter->name()) + "'s K/V pages", drafter});
  std::fprintf(stderr, "%s", budget.report().c_str());
  print_vision_lines(m);
  budget.require();
}

// A model on a device: the KV pool sized from the device memory free beside the resident weights (eo.kv_pages 0),
// checked there; the host RAM the engine keeps beside it (prompt cache host tier, vision weights) checked apart.
void budget_device_memory(const LoadedModel& m, EngineOptions& eo, double cache_gib, size_t free_bytes) {
  size_prompt_cache_on_device(eo, *m.model, cache_gib);
  if (eo.kv_pages == 0) eo.kv_pages = device_kv_pool_pages_for_serving(*m.model, eo, free_bytes);
  print_pool(eo);
  MemoryBudget budget = device_budget(*m.model, eo, free_bytes);
  std::vector<BudgetLine> host_lines;
  if (eo.drafter) {
    const DrafterMemory d = eo.drafter->memory();
    const std::string name = "drafter " + std::string(eo.drafter->name());
    // Measured around its loading, which also holds the process's first kernel launches (code loaded, stacks).
    if (d.device_resident > 0)
      budget.resident.push_back({name + " (weights, K/V pages, scratch, first launches)", d.device_resident});
    if (d.host_to_come > 0) host_lines.push_back({name + "'s K/V pages", d.host_to_come});
  }
  if (m.vision_encoder) {
    const vision::VisionEncoderStats vs = m.vision_encoder->stats();
    const size_t on_device = vs.device_weight_bytes + vs.device_slot_bytes + vs.device_scratch_bytes;
    if (on_device > 0) budget.resident.push_back({"vision tower", on_device});
    host_lines.push_back({"vision tower weights and image stage", vs.host_weight_bytes + vs.pinned_stage_bytes});
  }
  std::fprintf(stderr, "%s", budget.report().c_str());
  print_vision_lines(m);
  MemoryBudget host = host_budget_beside_device(*m.model, eo, std::move(host_lines), available_ram_bytes());
  if (!host.lines.empty()) std::fprintf(stderr, "%s", host.report().c_str());
  budget.require();
  host.require();
}

int serve(const std::vector<std::string>& argv) {
  Args args(argv,
            with_draft_flags(with_model_flags({"host", "port", "api-key", "api-key-file", "request-log",
                              "served-model-name", "max-body-bytes", "queue-limit", "max-n", "prompt-cache-gib",
                              "prompt-cache-state-stride",
                              "kv-pages",
                              "prompt-cache-host-gib", "memory-gib", "media-domains", "max-image-bytes",
                              "max-image-pixels", "max-image-seconds", "max-images", "media-timeout-ms", "drain-seconds",
                              "max-connections", "max-connections-per-client", "header-timeout-ms",
                              "body-timeout-ms"})),
            {"vision", "vision-host", "media-allow-local", "literal-content", "prefill-first"});
  std::filesystem::path dir = model_dir_from_args(args);
  std::string device = check_device(args);
  const int tensor_parallel = tensor_parallel_from_args(args);
  if (args.has("vision-host") && !args.has("vision")) throw Error("--vision-host needs --vision");
  if (args.has("vision-host") && device == "cpu")
    throw Error("--vision-host keeps a GPU vision tower's weights in pinned host memory; --device cpu has no GPU tower");

  server::ServerOptions o;
  o.host = args.get_or("host", "127.0.0.1");
  long long port = args.get_int("port", 8888);
  if (port < 0 || port > 65535) throw Error("--port must be between 0 and 65535");
  o.port = int(port);
  o.engine = engine_options_from_args(args, 16);
  o.engine.queue_limit = int(args.get_int("queue-limit", o.engine.queue_limit));
  if (o.engine.queue_limit < 0) throw Error("--queue-limit must be ≥ 0");
  long long body = args.get_int("max-body-bytes", (long long)o.max_body_bytes);
  if (body < 1024) throw Error("--max-body-bytes must be at least 1024");
  o.max_body_bytes = size_t(body);
  o.literal_content = args.has("literal-content");
  o.drain_seconds = int(args.get_int("drain-seconds", o.drain_seconds));
  if (o.drain_seconds < 0) throw Error("--drain-seconds must be ≥ 0");
  o.max_connections = int(args.get_int("max-connections", o.max_connections));
  o.max_connections_per_client = int(args.get_int("max-connections-per-client", o.max_connections_per_client));
  if (o.max_connections < 16 || o.max_connections_per_client < 1)
    throw Error("--max-connections must be at least 16 and --max-connections-per-client at least 1");
  const long long header_ms = args.get_int("header-timeout-ms", o.header_timeout.count());
  const long long body_ms = args.get_int("body-timeout-ms", o.body_timeout.count());
  if (header_ms < 100 || body_ms < 100) throw Error("--header-timeout-ms and --body-timeout-ms must be at least 100");
  o.header_timeout = std::chrono::milliseconds(header_ms);
  o.body_timeout = std::chrono::milliseconds(body_ms);
  o.max_n = int(args.get_int("max-n", o.max_n));
  if (o.max_n < 1) throw Error("--max-n must be at least 1");
  o.api_keys = args.all("api-key");
  for (const auto& k : o.api_keys)
    if (k.empty()) throw Error("--api-key must not be empty");
  if (auto file = args.get("api-key-file")) {
    auto keys = server::load_api_key_file(*file);
    o.api_keys.insert(o.api_keys.end(), keys.begin(), keys.end());
  }
  o.request_log = args.get_or("request-log", "");
  o.vision = vision_options(args);
  const double cache_gib = args.get_double("prompt-cache-gib", 1.0);
  const double host_gib = args.get_double("prompt-cache-host-gib", 0.0);
  const double memory_gib = args.get_double("memory-gib", 0.0);
  const long long state_stride = args.get_int("prompt-cache-state-stride", 0);
  const int page = EngineOptions{}.kv_page_tokens;
  if (state_stride < 0 || state_stride > (1 << 20) || state_stride % page != 0)
    throw Error("--prompt-cache-state-stride must be a multiple of " + std::to_string(page) +
                " positions (a KV page), or 0 for the model's own");
  const long long kv_pages = args.get_int("kv-pages", 0);
  if (kv_pages < 0 || kv_pages > (1 << 30)) throw Error("--kv-pages must be between 0 (sized to memory) and 2^30");
  o.prepare_engine = [cache_gib, host_gib, memory_gib, kv_pages, state_stride, args](const LoadedModel& m,
                                                                                     EngineOptions& eo) {
    if (m.model->device_memory_free()) use_gpu_round_sizes(args, eo);
    eo.prompt_cache_state_stride = int(state_stride);
    apply_draft_options(args, m, eo);
    size_prompt_cache(eo, m.config, cache_gib, host_gib);
    eo.kv_pages = int(kv_pages);
    if (const auto free_bytes = m.model->device_memory_free())
      budget_device_memory(m, eo, cache_gib, memory_gib > 0 ? size_t(memory_gib * double(1ull << 30)) : *free_bytes);
    else
      budget_ram(m, eo, memory_gib > 0 ? size_t(memory_gib * double(1ull << 30)) : available_ram_bytes());
  };
  o.served_model_name = args.get_or("served-model-name", hub_model_name(args));

  // SIGINT/SIGTERM are taken by a waiting thread (not a handler), which drains the server; a second one stops it
  // at once.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  server::Server srv(o);
  srv.bind();
  static std::atomic<int> draining{0};  // 1 while a drain runs, 2 once it is done
  std::thread waiter([&srv, signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    draining = 1;
    std::fprintf(stderr, "foldserve: draining (a second signal stops at once)\n");
    std::thread([&srv, signals] {
      int again = 0;
      sigwait(&signals, &again);
      if (draining.load() == 1) srv.stop();
    }).detach();
    srv.drain();
    draining = 2;
  });
  waiter.detach();
  auto progress = terminal_progress();
  // The vision encoder is attached here, with the image options, before the server's own attach (which then
  // finds it in place).
  const server::VisionOptions vision = o.vision;
  srv.serve([dir, progress, device, tensor_parallel, vision] {
              auto m = load_model(dir, progress, device, tensor_parallel);
              if (vision.enabled) server::attach_vision(*m, vision);
              return m;
            },
            [&srv, keyed = !o.api_keys.empty()](const std::string& url) {
              std::printf("foldserve: serving on %s (OpenAI API at %s/v1, chat page at %s/)\n", url.c_str(),
                          url.c_str(), url.c_str());
              std::printf("try: curl -s %s/v1/chat/completions -H 'content-type: application/json'%s -d "
                          "'{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"Tell me something "
                          "about computers.\"}]}'\n",
                          url.c_str(), keyed ? " -H 'Authorization: Bearer YOUR_KEY'" : "",
                          srv.served_model().c_str());
              std::fflush(stdout);
            });
  while (draining.load() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return 0;
}

FS_REGISTER_COMMAND("serve", "serve a model over an OpenAI-compatible HTTP API", serve);

}  // namespace
}  // namespace fs::cli
