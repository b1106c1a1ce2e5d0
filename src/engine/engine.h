#pragma once
// The serving engine: streams admitted into a bounded queue, run together in scheduler rounds (one forward pass
// per round carrying every decoding row plus prefill chunks), over a paged KV pool.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "engine/chunk_rule.h"
#include "engine/prompt_cache.h"
#include "engine/sampling_params.h"

namespace fs {

class Model;
class KvPool;
class Drafter;
struct DraftTree;
struct Stream;
struct SequenceChunk;
struct SampledForward;
struct RowSampling;
struct RoundItem;
namespace structured {
class TokenConstraint;
}

enum class FinishReason { Stop, Length, Cancelled, Error };
const char* finish_reason_name(FinishReason r);

struct GenerationResult {
  FinishReason reason = FinishReason::Stop;
  int prompt_tokens = 0;
  int cached_tokens = 0;
  int completion_tokens = 0;
  int drafted_tokens = 0;   // draft tokens the target verified for this stream
  int accepted_tokens = 0;  // of them, those equal to the target's own choice (kept)
  std::string error;
};

struct GenerationRequest {
  std::vector<int32_t> prompt;
  int max_tokens = 256;
  SamplingParams sampling;
  std::vector<int32_t> eos_ids;  // a sampled eos ends the stream (reason Stop) and is not passed to on_token
  // Vision-language prompts: M-RoPE (t, h, w) per prompt token [prompt * 3], the offset later positions take, and
  // the tower's features for the prompt's image-pad tokens in order [pads, hidden].
  std::vector<int32_t> mrope_positions;
  int rope_delta = 0;
  std::vector<float> image_embeddings;
  // Prompt-cache keys per prompt token (empty → the ids); image-pad tokens carry their image's digest here so two
  // images never share a prefix.
  std::vector<uint64_t> cache_keys;
  bool allow_draft = true;
  // Limits every sampled token to those this grammar state allows (the stream is then sampled on the host);
  // advanced by each token the stream accepts, so a preempted stream resumes where it was.
  std::shared_ptr<structured::TokenConstraint> constraint;
  // Runs on the engine thread for every generated token except a final eos; false ends the stream (reason Stop).
  std::function<bool(const SampledToken&)> on_token;
  // Runs once, on the engine thread, when the stream ends for any reason.
  std::function<void(const GenerationResult&)> on_done;
};

// Rows a round takes on a GPU unless --round-tokens says otherwise: enough to keep the tensor cores busy in
// prefill. A prompt may fill a whole round there (the CPU defaults are EngineOptions' own).
inline constexpr int kGpuRoundTokens = 2048;

// One scheduler round as run: its rows, split into decode rows (a decoding stream's next row or verify window) and
// prompt rows (prefill, or positions recomputed after a preemption), the chunks it held, and the seconds the model's
// forward pass took (sampling on the device included).
struct RoundRecord {
  int rows = 0, decode_rows = 0, prompt_rows = 0, chunks = 0;
  double forward_seconds = 0;
};

struct EngineOptions {
  int parallel = 4;            // most streams active at once
  int context = 4096;          // positions per stream (prompt + reply)
  int prefill_chunk = 256;     // most prompt tokens of one stream per round
  int round_tokens = 512;      // most rows (decode + prefill) per round
  // While any admitted stream has prompt positions to compute, rounds hold only those (decoding streams wait), so a
  // burst of prompts is prefilled before anyone decodes and the streams then decode in full rounds: more tokens per
  // second for batch work, at the price of the running streams' inter-token latency while prompts arrive.
  bool prefill_first = false;
  int queue_limit = 64;        // waiting streams beyond `parallel`; more → rejected
  int kv_page_tokens = 16;     // positions per KV page
  int kv_pages = 0;            // pages of the KV pool, prompt cache included (0 → parallel × context + cache pages)
  int prompt_cache_pages = 0;  // pool pages the prompt cache may hold (0 → no prompt cache)
  int prompt_cache_host_pages = 0;  // pages the cache may keep in host memory after eviction
  // Models with recurrent state: positions between the state snapshots a computing stream gives the prompt cache
  // (a multiple of kv_page_tokens; 0 → as many pages as one snapshot takes, see engine/state_snapshots.h).
  int prompt_cache_state_stride = 0;
  bool device_sampling = true;      // let a model that can pick tokens do so for requests without penalties/logprobs
  // Speculative decoding: the drafter proposes up to `draft_tokens` tokens per round for each decoding stream and the
  // target verifies them in one window of rows; null → none. Replies are the same bits either way.
  std::shared_ptr<Drafter> drafter;
  int draft_tokens = 3;
  // Tree verification: the drafter's W choices per depth (Drafter::propose_trees), verified as one tree of rows
  // whose longest accepted path is kept; 1 → chains. Models without row parents draft chains.
  int draft_tree = 1;
  // Most rows a round may hold once drafted rows are added: streams draft in order while the round stays within it,
  // so drafting fills only rows that cost little beside the round's own (0 → no cap).
  int draft_round_rows = 0;
  // Runs on the engine thread after every round's forward pass, before its tokens are delivered (for benchmarks and
  // traces; must not throw); null → none.
  std::function<void(const RoundRecord&)> on_round;
};

// Pages of the KV pool `options` asks for.
int kv_pool_pages(const EngineOptions& options);
// Positions one stream may reach (prompt and reply): the context, or fewer when the whole pool holds fewer.
int stream_positions(const EngineOptions& options);

struct EngineStats {
  int active_streams = 0;
  int queued = 0;
  int kv_pages_total = 0;
  int kv_pages_used = 0;
  uint64_t rounds = 0;
  uint64_t rows = 0;  // rows summed over all rounds
  uint64_t preemptions = 0;  // streams sent back to the queue to free pages
  uint64_t draft_windows = 0;    // verify windows run (one per drafting stream per round)
  uint64_t drafted_tokens = 0;   // draft tokens verified
  uint64_t accepted_tokens = 0;  // draft tokens kept
  PromptCacheStats prompt_cache;
};

// A handle on a submitted stream; cancel() frees it at the next round.
class StreamHandle {
 public:
  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

 private:
  std::atomic<bool> cancelled_{false};
};

class Engine {
 public:
  Engine(Model& model, EngineOptions options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a stream. Returns nullptr when the queue is full (the caller answers 429). A prompt that cannot fit the
  // context or the whole KV pool (prompt.size() >= stream_positions) is refused with fs::Error before queueing.
  std::shared_ptr<StreamHandle> submit(GenerationRequest request);
  EngineStats stats() const;
  const EngineOptions& options() const { return options_; }

 private:
  using Streams = std::vector<std::unique_ptr<Stream>>;
  void run();
  void round(Streams& active);
  void admit(Streams& active);
  // Every active stream ends with FinishReason::Error and `error`; the engine serves on.
  void fail_round(Streams& active, const std::string& error);
  void finish(Stream& s, FinishReason reason, const std::string& error = "");
  void finish_cancelled_in_queue();
  bool grow_pages(Stream& s, int positions);
  // Recurrent-state slots: one per admitted stream of a model that carries state; never throw.
  void take_state_slot(Stream& s);
  void release_state_slot(Stream& s);
  // Pages free now plus pages only the prompt cache holds.
  int room() const;
  void adopt_cached_prefix(Stream& s);
  // Plans the round and grows every planned stream's pages, preempting the youngest stream until they fit.
  std::vector<RoundItem> plan_within_pool(std::vector<Stream*>& order);
  // Releases the stream's pages (its computed prefix goes to the prompt cache when `keep_prefix`) and resets it to
  // nothing computed, to resume from the queue.
  void reset_to_queued(Stream& s, bool keep_prefix);
  // Moves preempted streams of `active` back to the front of the queue, oldest first, and drops finished ones.
  void retire(Streams& active);
  SequenceChunk chunk_for(const Stream& s, int begin, int count, bool samples) const;
  // Samples (or takes the model's pick) the stream's next token and delivers it: eos, on_token, max_tokens and the
  // context end the stream here. Returns the token chosen (-1 when none could be).
  // `sampled`: the row's token when sample_host_rows already picked it, or the model's pick with its logprobs.
  int32_t accept_token(Stream& s, int32_t picked, std::span<float> logits, const SampledToken* sampled = nullptr);
  // Picks, on the thread pool, the tokens of the round's host-sampled rows outside draft windows: each from its own
  // logits, masked by its own constraint, and its stream's own counts, as accept_token would. Other rows stay empty.
  std::vector<std::optional<SampledToken>> sample_host_rows(const std::vector<RoundItem>& items,
                                                            SampledForward& out) const;
  // Asks the drafter for every eligible decoding stream's draft (Stream::draft), within draft_round_rows.
  void draft(const std::vector<Stream*>& order);
  // Rows the round would hold without drafts: each stream's next chunk as the planner cuts it.
  int undrafted_round_rows(const std::vector<Stream*>& order) const;
  // Draft tokens the stream may verify this round: none when it may not draft, else at most what its max_tokens and
  // positions leave after the pending row.
  int draft_allowance(const Stream& s) const;
  // Cuts a proposed tree to a valid one of at most `depth` levels and `nodes` nodes (a prefix of its node order).
  static void fit_tree(DraftTree& tree, int32_t vocab, int depth, int nodes);
  // Moves a kept tree row's K/V from its slot to its chain position.
  void move_tree_row(Stream& s, int from, int to);
  // Accepts a verify window's tokens one by one from `row` on (ids) and `logit_row` on (host logits), stopping at the
  // first mismatch with the draft or the stream's end; advances both past the window's rows.
  void accept_window(Stream& s, const RoundItem& it, SampledForward& out, size_t& row, size_t& logit_row);
  // Recurrent-state snapshots (engine_snapshots.cpp): where this round's chunks take them (stride positions for the
  // prompt cache, every row of a verify window to roll back to), handing them to the cache, keeping a stream's
  // computed prefix (with its state) in the cache, rolling a window back, and restoring an adopted state.
  // Whether the prompt cache may keep a stream's state at `position`: any position, or for a model with aligned prompt
  // chunks one inside the prompt at a chunk end (other states came from arithmetic a fresh prompt does not run).
  bool cacheable_state(const Stream& s, int position) const;
  void plan_state_snapshots(const std::vector<RoundItem>& items);
  void keep_state_snapshots(Stream& s);
  // Free pool pages for one snapshot a forward pass writes into; none when the pool lacks them.
  std::vector<int32_t> take_snapshot_pages();
  // Forgets the stream's snapshots of this round, giving back the pages they hold.
  void drop_state_snapshots(Stream& s);
  // The window's snapshot at the stream's `computed` when its slot ran past rejected rows, else null.
  const float* kept_window_state(const Stream& s) const;
  // The stream's state at `computed`: that window snapshot (copied into `copy`, as the stream's snapshots may be
  // cleared before it is kept), else the slot as it stands.
  StateSource state_at_computed(const Stream& s, std::vector<float>& copy) const;
  // Puts the state of the window's last kept row into the stream's slot when rejected rows ran after it.
  void roll_back_state(Stream& s);
  void keep_in_cache(Stream& s);
  // keep_in_cache for a preempted stream, releasing its pages before its state is kept.
  void park_in_cache(Stream& s);
  void restore_cached_state(Stream& s);
  // Gives back the snapshot pages a stream adopted and has not restored.
  void release_resume_state(Stream& s);
  void publish_cache_stats();
  void check_sampled(const SampledForward& out, std::span<const RowSampling> rows) const;

  Model& model_;
  EngineOptions options_;
  std::unique_ptr<KvPool> pool_;
  std::unique_ptr<PromptCache> cache_;
  bool state_slots_ = false;  // the model carries recurrent state: one slot per admitted stream
  int state_stride_ = 0;      // positions between the state snapshots streams take for the prompt cache (0 → none)
  ChunkRule chunks_{1};       // --prefill-chunk, aligned to Model::prompt_alignment
  int stream_positions_ = 0;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Stream>> queue_;
  EngineStats stats_;
  uint64_t next_id_ = 1;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace fs
