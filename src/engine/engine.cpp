#include "engine/engine.h"

#include <algorithm>
#include <random>

#include "core/error.h"
#include "engine/row_sampling.h"
#include "engine/scheduler.h"
#include "engine/stream.h"
#include "models/kv_pool.h"
#include "models/model.h"

namespace fs {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Error: return "error";
  }
  return "error";
}

static uint64_t fresh_seed() {
  static std::mutex mu;
  static std::random_device rd;
  std::lock_guard lock(mu);
  return (uint64_t(rd()) << 32) ^ rd();
}

Engine::Engine(Model& model, EngineOptions options) : model_(model), options_(options) {
  if (options_.parallel < 1) throw Error("--parallel must be at least 1");
  if (options_.context < 2) throw Error("--context must be at least 2");
  if (options_.prefill_chunk < 1 || options_.round_tokens < 1) throw Error("chunk sizes must be positive");
  const auto& c = model_.config();
  const int P = options_.kv_page_tokens;
  const int pages = options_.parallel * ((options_.context + P - 1) / P) + std::max(0, options_.prompt_cache_pages);
  pool_ = std::make_unique<KvPool>(c.num_layers, c.num_kv_heads, c.head_dim, P, pages, model_.kv_on_host());
  model_.attach_pool(*pool_);
  if (options_.prompt_cache_pages > 0)
    cache_ = std::make_unique<PromptCache>(*pool_, model_, options_.prompt_cache_pages,
                                           std::max(0, options_.prompt_cache_host_pages));
  stats_.kv_pages_total = pages;
  thread_ = std::thread([this] { run(); });
}

Engine::~Engine() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  cache_.reset();
}

std::shared_ptr<StreamHandle> Engine::submit(GenerationRequest request) {
  const int n = int(request.prompt.size());
  if (n == 0) throw Error("the prompt is empty");
  if (n >= options_.context)
    throw Error("the prompt has " + std::to_string(n) + " tokens; the context holds " +
                std::to_string(options_.context) + " positions (prompt and reply)");
  for (int32_t id : request.prompt)
    if (id < 0 || id >= model_.config().vocab_size)
      throw Error("token id " + std::to_string(id) + " is outside the vocabulary of " +
                  std::to_string(model_.config().vocab_size));
  if (request.max_tokens < 1) throw Error("max_tokens must be at least 1");
  if (!request.mrope_positions.empty() && request.mrope_positions.size() != size_t(n) * 3)
    throw Error("M-RoPE positions must hold three entries per prompt token");
  if (!request.cache_keys.empty() && request.cache_keys.size() != size_t(n))
    throw Error("prompt-cache keys must cover the prompt");
  auto s = std::make_unique<Stream>();
  s->tokens = request.prompt;
  s->prompt_len = n;
  if (request.cache_keys.empty()) s->keys.assign(request.prompt.begin(), request.prompt.end());
  else s->keys = request.cache_keys;
  s->seed = request.sampling.seed ? *request.sampling.seed : fresh_seed();
  for (int32_t id : request.prompt) ++s->counts.prompt[id];
  s->request = std::move(request);
  s->handle = std::make_shared<StreamHandle>();
  auto handle = s->handle;
  {
    std::lock_guard lock(mu_);
    if (int(queue_.size()) >= options_.queue_limit) return nullptr;
    s->id = next_id_++;
    queue_.push_back(std::move(s));
    stats_.queued = int(queue_.size());
  }
  wake_.notify_one();
  return handle;
}

EngineStats Engine::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Engine::run() {
  std::vector<std::unique_ptr<Stream>> active;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return stop_ || !queue_.empty() || !active.empty(); });
      if (stop_) break;
    }
    admit(active);
    round(active);
  }
  for (auto& s : active) finish(*s, FinishReason::Cancelled);
  std::deque<std::unique_ptr<Stream>> waiting;
  {
    std::lock_guard lock(mu_);
    waiting.swap(queue_);
  }
  for (auto& s : waiting) finish(*s, FinishReason::Cancelled);
}

void Engine::admit(std::vector<std::unique_ptr<Stream>>& active) {
  std::vector<Stream*> admitted;
  {
    std::lock_guard lock(mu_);
    while (!queue_.empty() && int(active.size()) < options_.parallel) {
      active.push_back(std::move(queue_.front()));
      admitted.push_back(active.back().get());
      queue_.pop_front();
    }
    stats_.queued = int(queue_.size());
    stats_.active_streams = int(active.size());
  }
  if (!cache_) return;
  // The last prompt token is always computed, so the stream gets logits to sample from.
  for (Stream* s : admitted) {
    CacheHit hit = cache_->lookup(s->keys, s->prompt_len - 1);
    s->pages = std::move(hit.pages);
    s->computed = s->cached = hit.positions;
  }
  publish_cache_stats();
}

void Engine::publish_cache_stats() {
  std::lock_guard lock(mu_);
  if (cache_) stats_.prompt_cache = cache_->stats();
  stats_.kv_pages_used = pool_->pages_used();
}

bool Engine::grow_pages(Stream& s, int positions) {
  const int P = pool_->page_tokens();
  while (int(s.pages.size()) * P < positions) {
    auto page = pool_->allocate();
    while (!page && cache_ && cache_->evict_one()) page = pool_->allocate();
    if (!page) return false;
    s.pages.push_back(*page);
  }
  return true;
}

void Engine::finish(Stream& s, FinishReason reason, const std::string& error) {
  if (s.finished) return;
  s.finished = true;
  if (cache_ && reason != FinishReason::Error) cache_->insert(s.keys, s.computed, s.pages);
  for (int32_t p : s.pages) pool_->release(p);
  s.pages.clear();
  publish_cache_stats();
  GenerationResult r;
  r.reason = reason;
  r.prompt_tokens = s.prompt_len;
  r.cached_tokens = s.cached;
  r.completion_tokens = s.generated;
  r.error = error;
  if (s.request.on_done) s.request.on_done(r);
  s.request.on_done = nullptr;
}

// The chunk of positions [begin, begin + count) with its stream's M-RoPE positions and image features.
SequenceChunk Engine::chunk_for(const Stream& s, int begin, int count, bool samples) const {
  SequenceChunk c{std::span<const int32_t>(s.tokens.data() + begin, size_t(count)), begin, s.pages, false, samples};
  const auto& req = s.request;
  c.rope_delta = req.rope_delta;
  if (!req.mrope_positions.empty() && begin < s.prompt_len) {
    if (begin + count > s.prompt_len) throw Error("a chunk spans the end of a multimodal prompt");
    c.mrope_positions = std::span<const int32_t>(req.mrope_positions.data() + size_t(begin) * 3, size_t(count) * 3);
  }
  if (!req.image_embeddings.empty() && begin < s.prompt_len) {
    const int32_t pad = model_.config().image_token_id;
    size_t before = size_t(std::count(s.tokens.begin(), s.tokens.begin() + begin, pad));
    size_t hidden = size_t(model_.config().hidden_size);
    c.image_embeddings = std::span<const float>(req.image_embeddings).subspan(
        std::min(before * hidden, req.image_embeddings.size()));
  }
  return c;
}

// A model's answer must hold one id per sampling row, ids in the vocabulary only where asked for, and the logits of
// every other row.
void Engine::check_sampled(const SampledForward& out, std::span<const RowSampling> rows) const {
  const int32_t V = model_.config().vocab_size;
  if (out.ids.size() != rows.size())
    throw Error("the model returned " + std::to_string(out.ids.size()) + " rows for " + std::to_string(rows.size()) +
                " sampling rows");
  size_t host_rows = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const int32_t id = out.ids[i];
    if (id >= V || (id >= 0 && rows[i].mode == RowSampling::Mode::Logits))
      throw Error("the model returned token id " + std::to_string(id) + " for a row it was not asked to sample");
    host_rows += id < 0 ? 1 : 0;
  }
  if (out.logits.size() != host_rows * size_t(V)) throw Error("the model returned the wrong number of logit rows");
}

void Engine::round(std::vector<std::unique_ptr<Stream>>& active) {
  std::vector<Stream*> order;
  for (auto& s : active) {
    if (s->handle->cancelled()) finish(*s, FinishReason::Cancelled);
    else order.push_back(s.get());
  }
  auto items = plan_round(order, options_.prefill_chunk, options_.round_tokens);
  std::vector<SequenceChunk> chunks;
  int rows = 0;
  for (const auto& it : items) {
    if (!grow_pages(*it.stream, it.begin + it.count)) throw Error("KV pool exhausted");
    chunks.push_back(chunk_for(*it.stream, it.begin, it.count, it.samples));
    rows += it.count;
  }
  // One RowSampling per sampling row; the route depends only on the request's own parameters.
  const bool model_samples = options_.device_sampling && model_.samples_on_device();
  std::vector<RowSampling> sampling;
  for (const auto& it : items)
    if (it.samples) {
      const Stream& s = *it.stream;
      sampling.push_back(row_sampling_for(s.request.sampling, model_samples && device_sampleable(s.request.sampling),
                                          s.seed, s.tokens.size()));
    }
  SampledForward out;
  std::string failure;
  if (!chunks.empty()) {
    try {
      out = model_.forward_sampled(chunks, sampling, *pool_);
      check_sampled(out, sampling);
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  const size_t V = size_t(model_.config().vocab_size);
  size_t row = 0, logit_row = 0;
  for (const auto& it : items) {
    Stream& s = *it.stream;
    if (!failure.empty()) {
      finish(s, FinishReason::Error, failure);
      continue;
    }
    s.computed += it.count;
    if (!it.samples) continue;
    const int32_t picked = out.ids[row++];
    SampledToken tok;
    if (picked >= 0) {
      tok.id = picked;
    } else {
      std::span<float> l(out.logits.data() + logit_row++ * V, V);
      tok = sample_token(l, s.request.sampling, s.counts, s.seed, s.tokens.size());
    }
    ++s.generated;
    const auto& eos = s.request.eos_ids;
    if (std::find(eos.begin(), eos.end(), tok.id) != eos.end()) {
      finish(s, FinishReason::Stop);
      continue;
    }
    s.tokens.push_back(tok.id);
    s.keys.push_back(uint64_t(uint32_t(tok.id)));
    ++s.counts.reply[tok.id];
    bool keep = !s.request.on_token || s.request.on_token(tok);
    FinishReason reason = FinishReason::Stop;
    bool end = !keep;
    if (!end && (s.generated >= s.request.max_tokens || int(s.tokens.size()) >= options_.context)) {
      end = true;
      reason = FinishReason::Length;
    }
    if (end) finish(s, reason);
  }
  std::erase_if(active, [](const std::unique_ptr<Stream>& s) { return s->finished; });
  std::lock_guard lock(mu_);
  stats_.active_streams = int(active.size());
  stats_.kv_pages_used = pool_->pages_used();
  if (!chunks.empty()) {
    ++stats_.rounds;
    stats_.rows += uint64_t(rows);
  }
}

}  // namespace fs
