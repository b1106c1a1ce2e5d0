// One scheduler round: plan within the pool, one forward pass, then sample and deliver every finished row.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "core/error.h"
#include "core/recycled_floats.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "engine/row_sampling.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/stream.h"
#include "models/forward_rows.h"
#include "models/kv_pool.h"
#include "models/model.h"
#include "text/structured/token_constraint.h"

namespace fs {

// The chunk of positions [begin, begin + count) with its stream's M-RoPE positions and image features.
SequenceChunk Engine::chunk_for(const Stream& s, int begin, int count, bool samples) const {
  SequenceChunk c{std::span<const int32_t>(s.tokens.data() + begin, size_t(count)), begin, s.pages, false, samples};
  const auto& req = s.request;
  c.rope_delta = req.rope_delta;
  c.state_slot = s.state_slot;
  c.state_snapshots = s.snapshot_targets;
  c.prompt = begin + count <= s.prompt_len;
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
  if (!out.logprobs.empty() && out.logprobs.size() != rows.size())
    throw Error("the model returned logprobs for " + std::to_string(out.logprobs.size()) + " of " +
                std::to_string(rows.size()) + " rows");
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i].logprobs >= 0 && out.ids[i] >= 0 && (out.logprobs.empty() || !out.logprobs[i].asked))
      throw Error("the model picked a token without the logprobs its row asked for");
}

std::vector<std::optional<SampledToken>> Engine::sample_host_rows(const std::vector<RoundItem>& items,
                                                                  SampledForward& out) const {
  struct Job {
    size_t item;
    std::span<float> logits;
  };
  const size_t V = size_t(model_.config().vocab_size);
  std::vector<Job> jobs;
  size_t row = 0, logit_row = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const RoundItem& it = items[i];
    const size_t rows = it.drafted > 0 ? size_t(1 + it.drafted) : (it.samples ? 1 : 0);
    for (size_t j = 0; j < rows; ++j, ++row) {
      if (out.ids[row] >= 0) continue;
      std::span<float> l(out.logits.data() + logit_row++ * V, V);
      if (it.drafted == 0) jobs.push_back({i, l});
    }
  }
  std::vector<std::optional<SampledToken>> sampled(items.size());
  auto sample = [&](size_t begin, size_t end) {
    for (size_t j = begin; j < end; ++j) {
      const Stream& s = *items[jobs[j].item].stream;
      // A row its constraint leaves no token is left to accept_token, which ends the stream.
      if (s.request.constraint && s.request.constraint->mask(jobs[j].logits, s.request.eos_ids) == 0) continue;
      sampled[jobs[j].item] = sample_token(jobs[j].logits, s.request.sampling, s.counts, s.seed, s.tokens.size());
    }
  };
  if (jobs.size() > 1)
    ThreadPool::global().parallel_for(jobs.size(), sample);
  else
    sample(0, jobs.size());
  return sampled;
}

int32_t Engine::accept_token(Stream& s, int32_t picked, std::span<float> logits, const SampledToken* sampled) {
  SampledToken tok;
  if (sampled) {
    tok = *sampled;
  } else if (picked >= 0) {
    tok.id = picked;
  } else {
    if (s.request.constraint && s.request.constraint->mask(logits, s.request.eos_ids) == 0) {
      finish(s, FinishReason::Error, "the output constraint allows no token here");
      return -1;
    }
    tok = sample_token(logits, s.request.sampling, s.counts, s.seed, s.tokens.size());
  }
  ++s.generated;
  const auto& eos = s.request.eos_ids;
  if (std::find(eos.begin(), eos.end(), tok.id) != eos.end()) {
    finish(s, FinishReason::Stop);
    return tok.id;
  }
  s.tokens.push_back(tok.id);
  s.keys.push_back(uint64_t(uint32_t(tok.id)));
  ++s.counts.reply[tok.id];
  if (s.request.constraint) s.request.constraint->accept(tok.id);
  bool keep = true;
  try {
    keep = !s.request.on_token || s.request.on_token(tok);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "foldserve: on_token of stream %llu threw: %s\n", (unsigned long long)s.id, e.what());
    finish(s, FinishReason::Error, std::string("on_token threw: ") + e.what());
    return tok.id;
  }
  FinishReason reason = FinishReason::Stop;
  bool end = !keep;
  if (!end && (s.generated >= s.request.max_tokens || int(s.tokens.size()) >= stream_positions_)) {
    end = true;
    reason = FinishReason::Length;
  }
  if (end) finish(s, reason);
  return tok.id;
}

void Engine::round(Streams& active) {
  std::vector<Stream*> order;
  for (auto& s : active) {
    if (s->handle->cancelled()) finish(*s, FinishReason::Cancelled);
    else order.push_back(s.get());
  }
  // A round whose decode rows wait (prefill_first) has no windows to draft for.
  if (options_.prefill_first && prompt_work_left(order))
    for (Stream* s : order) s->drop_draft();
  else
    draft(order);
  auto items = plan_within_pool(order);
  std::vector<SequenceChunk> chunks;
  int rows = 0;
  RoundRecord record;
  for (const auto& it : items) {
    (it.drafted > 0 || decoding(*it.stream) ? record.decode_rows : record.prompt_rows) += it.count;
    Stream& s = *it.stream;
    if (it.drafted > 0) {
      // The pending token then the draft, one logit row each.
      s.window.assign(1, s.tokens.back());
      s.window.insert(s.window.end(), s.draft.begin(), s.draft.end());
      SequenceChunk c = chunk_for(s, it.begin, 1, true);
      c.tokens = s.window;
      c.all_logits = true;
      // A tree's rows carry their parents: the pending token's row 0 is the root.
      s.window_parents.clear();
      if (!s.draft_parents.empty()) {
        s.window_parents.assign(1, -1);
        for (int32_t p : s.draft_parents) s.window_parents.push_back(p + 1);
        c.row_parents = s.window_parents;
      }
      chunks.push_back(c);
    } else {
      chunks.push_back(chunk_for(s, it.begin, it.count, it.samples));
    }
    rows += it.count;
  }
  // One RowSampling per logit row; the route depends only on the request's own parameters, and row j of a verify
  // window draws with the key of the position it chooses, as the undrafted step there would.
  const bool model_samples = options_.device_sampling && model_.samples_on_device();
  std::vector<RowSampling> sampling;
  for (size_t i = 0; i < items.size(); ++i)
    if (items[i].samples) {
      const Stream& s = *items[i].stream;
      const bool on_device = model_samples && device_sampleable(s.request.sampling) && !s.request.constraint;
      // A window row at depth d (its index in a chain) chooses the token at position tokens.size() + d.
      const std::vector<int> depth = items[i].drafted > 0 ? row_depths(chunks[i]) : std::vector<int>{0};
      for (int d : depth)
        sampling.push_back(row_sampling_for(s.request.sampling, on_device, s.seed, s.tokens.size() + size_t(d)));
    }
  SampledForward out;
  std::string failure;
  if (!chunks.empty()) {
    const auto started = std::chrono::steady_clock::now();
    try {
      out = model_.forward_sampled(chunks, sampling, *pool_);
      check_sampled(out, sampling);
      record.forward_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    } catch (const std::exception& e) {
      failure = e.what();
      std::fprintf(stderr, "foldserve: forward pass failed, ending its %zu streams: %s\n", items.size(),
                   failure.c_str());
    }
  }
  if (options_.on_round && failure.empty() && !chunks.empty()) {  // before any of the round's tokens is delivered
    record.rows = rows;
    record.chunks = int(chunks.size());
    options_.on_round(record);
  }
  const size_t V = size_t(model_.config().vocab_size);
  const auto sampled = failure.empty() ? sample_host_rows(items, out) : std::vector<std::optional<SampledToken>>();
  size_t row = 0, logit_row = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const RoundItem& it = items[i];
    Stream& s = *it.stream;
    if (!failure.empty()) {
      finish(s, FinishReason::Error, failure);
      continue;
    }
    if (it.drafted > 0) {
      accept_window(s, it, out, row, logit_row);
      continue;
    }
    s.computed += it.count;
    if (!it.samples) continue;
    const auto device = picked_with_logprobs(out, row);
    const int32_t picked = out.ids[row++];
    std::span<float> l;
    if (picked < 0) l = std::span<float>(out.logits.data() + logit_row++ * V, V);
    accept_token(s, picked, l, sampled[i] ? &*sampled[i] : device ? &*device : nullptr);
  }
  recycle_floats(std::move(out.logits));
  retire(active);
  std::lock_guard lock(mu_);
  stats_.kv_pages_used = pool_->pages_used();
  if (!chunks.empty()) {
    ++stats_.rounds;
    stats_.rows += uint64_t(rows);
  }
}

}  // namespace fs
