#pragma once
// A causal language model's forward pass over a batch of sequence chunks that read and write a paged KV pool.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "io/hf_config.h"
#include "models/memory_spec.h"

namespace fs {

class KvPool;
class Checkpoint;

// Where a forward pass copies a stream's recurrent state as it stands after `position` positions (for the prompt
// cache): state_floats of the model's memory spec at `state`, or, when `pages` are given, into those snapshot pages
// of the pool as write_state_pages lays a state out (on the device for a device backend).
struct StateSnapshotTarget {
  int position = 0;
  float* state = nullptr;
  std::span<const int32_t> pages;
};

// New tokens of one stream in this forward pass: positions start_pos .. start_pos+tokens.size()-1.
struct SequenceChunk {
  std::span<const int32_t> tokens;
  int start_pos = 0;
  std::span<const int32_t> pages;  // the stream's page table, covering every position up to the chunk's end
  bool all_logits = false;         // logits for every token of the chunk
  bool last_logits = true;         // logits for the chunk's last token (ignored when all_logits)
  // M-RoPE (t, h, w) per token, [tokens * 3]; empty → every section uses start_pos + i + rope_delta.
  std::span<const int32_t> mrope_positions;
  int rope_delta = 0;
  // Rows replacing the embeddings of the chunk's image-pad tokens, in order: [pads in chunk, hidden].
  std::span<const float> image_embeddings;
  // The stream's recurrent-state slot in the pool (models with recurrent layers; -1 → none). A chunk starting at
  // position 0 begins from a cleared state; any other continues the slot's state, which holds start_pos positions.
  int32_t state_slot = -1;
  // Snapshots of that state at positions in (start_pos, start_pos + tokens.size()], in ascending order.
  std::span<const StateSnapshotTarget> state_snapshots;
  // A tree of rows (speculative decoding): each row's parent row in the chunk (earlier than the row; -1 → the row
  // follows the committed positions 0..start_pos-1 directly); empty → a chain. Row i keeps its K/V in slot
  // start_pos + i, takes rotary position start_pos + its depth, and attends to the committed positions then its
  // ancestors and itself, root first. Only models whose supports_row_parents() is true accept it.
  std::span<const int32_t> row_parents;
  bool prompt = false;  // every row is a prompt row (see Model::prompt_alignment)
};

// How the engine wants one logit row back: its logits (sampled on the host) or a token the model picks itself.
// Most top logprobs a row may report.
inline constexpr int kMaxTopLogprobs = 20;

struct RowSampling {
  enum class Mode : int32_t { Logits = 0, Greedy = 1, Draw = 2 };
  Mode mode = Mode::Logits;
  float temperature = 1.0f;  // Draw: probabilities ∝ exp((logit - max) / temperature)
  int top_k = 0;             // 0 → off
  float top_p = 1.0f;
  float min_p = 0.0f;
  double uniform = 0.0;  // Draw: the request's keyed draw in [0, 1)
  int logprobs = -1;     // Greedy or Draw, ≥ 0: also the chosen id's logprob and this many top ones
};

// A picked row's logprobs under its unmodified logits: the chosen id's, then the best ids' (ties by lowest id).
struct RowLogprobs {
  bool asked = false;  // the row's RowSampling asked for them
  float chosen = 0.0f;
  std::vector<std::pair<int32_t, float>> top;
};

// A forward pass's result with sampling: one id per logit row (-1 where the row comes back as logits), the logits of
// those rows only, in order, vocab_size floats each, and one RowLogprobs per logit row when any row asked for them.
struct SampledForward {
  std::vector<int32_t> ids;
  std::vector<float> logits;
  std::vector<RowLogprobs> logprobs;
};

// The largest round an engine runs over its pool, for a backend's estimate of the scratch it keeps for rounds.
struct RoundLimits {
  int rows = 0;              // rows of the largest round
  int logit_rows = 0;        // logit rows among them
  size_t page_entries = 0;   // page-table entries of the round's chunks together
  int pool_pages = 0;        // pages of the KV pool
  int page_tokens = 16;      // positions per page
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  // One forward pass over every chunk; K/V of the new tokens go into their pages. Returns logits, one row of
  // vocab_size floats per requested position, chunk by chunk.
  virtual std::vector<float> forward(std::span<const SequenceChunk> chunks, KvPool& pool) = 0;
  // Hidden states of one chunk run alone, for tests: [layers + 1, tokens, hidden] (embeddings, after each layer
  // with the final norm applied to the last).
  virtual std::vector<float> hidden_states(const SequenceChunk& chunk, KvPool& pool) = 0;
  // Whether forward_sampled can pick tokens itself (Greedy and Draw rows); false → every row comes back as logits.
  virtual bool samples_on_device() const { return false; }
  // Whether forward() honours SequenceChunk::row_parents (tree verification); false → the engine drafts chains.
  virtual bool supports_row_parents() const { return false; }
  // Rows a forward pass runs for little more than the price of one: speculative drafting fills rounds up to it.
  virtual int cheap_round_rows() const { return 1; }
  // Prompt chunks must end at multiples of this many positions (or at the prompt's end): the model gives prompt rows
  // an arithmetic of its own in chunks of this size, so whole and chunked prompts agree only on those ends.
  virtual int prompt_alignment() const { return 1; }
  // forward() with one RowSampling per logit row; the default returns every row's logits (ids all -1).
  virtual SampledForward forward_sampled(std::span<const SequenceChunk> chunks, std::span<const RowSampling> rows,
                                         KvPool& pool);
  virtual size_t weight_bytes() const = 0;
  // Bytes the weights keep in memory: weight_bytes plus any copy a backend makes in another layout.
  virtual size_t resident_weight_bytes() const { return weight_bytes(); }
  // Which layers keep K/V pages and what recurrent state one sequence carries.
  virtual SequenceMemorySpec memory_spec() const;
  // Whether K/V live in the pool's host storage (CPU) or in the backend's own memory, indexed by the same pages.
  virtual bool kv_on_host() const { return true; }
  // Called once by the engine with its pool, before the first forward (a device backend sizes its KV here). A model
  // serves one engine at a time: a device backend keeps the K/V of the pool it was last attached to.
  virtual void attach_pool(KvPool& pool) {}
  // Page data movement for the prompt cache; a device backend overrides these to act on its own K/V.
  virtual void copy_kv_positions(KvPool& pool, int32_t from, int32_t to, int positions);
  virtual void save_kv_page(KvPool& pool, int32_t page, float* dst);
  virtual void load_kv_page(KvPool& pool, int32_t page, const float* src);
  // Moves one position's K/V within a stream's pages, from position `from` to `to` (a kept tree row to its chain
  // position); a device backend overrides it to act on its own K/V.
  virtual void move_kv_row(KvPool& pool, std::span<const int32_t> pages, int from, int to);
  // A state slot's recurrent state to and from host floats (the spec's state_floats), for prompt-cache snapshots.
  virtual void save_state(KvPool& pool, int32_t slot, float* dst);
  virtual void load_state(KvPool& pool, int32_t slot, const float* src);
  // How many pool pages hold one recurrent-state snapshot bit for bit, and its copies into and out of such pages
  // (the prompt cache keeps snapshots in pages). The default goes through save/load_kv_page, exact for f32 pages.
  virtual int state_snapshot_pages(const KvPool& pool) const;
  virtual void write_state_pages(KvPool& pool, std::span<const int32_t> pages, const float* state);
  virtual void read_state_pages(KvPool& pool, std::span<const int32_t> pages, float* state);
  // A state slot's state straight into snapshot pages: save_state then write_state_pages, which a device backend
  // does as one copy on the device.
  virtual void state_to_pages(KvPool& pool, int32_t slot, std::span<const int32_t> pages);
  // And back: a snapshot's pages into a state slot (read_state_pages then load_state).
  virtual void pages_to_state(KvPool& pool, std::span<const int32_t> pages, int32_t slot);
  // Bytes one KV page of `page_tokens` positions takes where the model keeps K/V (the host pool: f32 per the spec).
  virtual size_t kv_page_bytes(int page_tokens) const;
  // Free memory of the model's device right now, its weights already resident; none for a model on the host.
  virtual std::optional<size_t> device_memory_free() const { return std::nullopt; }
  // Device memory kept beside the pool's pages for rounds up to `limits` (activations, logits, metadata, graph
  // buffers); 0 for a model on the host, whose scratch the CPU budget counts from the config.
  virtual size_t round_scratch_bytes(const RoundLimits& limits) const { return 0; }
  // "cpu" or "cuda".
  virtual const char* device_name() const { return "cpu"; }
  // Floats per position per layer for K plus V (what one KV position costs, times layers).
  int kv_floats_per_token_per_layer() const { return 2 * config().num_kv_heads * config().head_dim; }
};

// The sequence memory of the family config.architecture names (every layer keeps K/V unless the family says
// otherwise).
SequenceMemorySpec memory_spec_for(const ModelConfig& config);

// Builds the model named by config.architecture from the checkpoint; unknown architectures are refused by name.
std::unique_ptr<Model> create_model(const ModelConfig& config, std::shared_ptr<Checkpoint> checkpoint);

// Whether "auto" picks the GPU: the CUDA backend is compiled in and sees a device.
bool cuda_backend_available();
// GPUs the CUDA backend sees (0 without it).
int cuda_backend_devices();

// The same on a device: "cpu", "cuda" or "auto" (cuda when compiled in and a GPU is present, else cpu). With
// `tensor_parallel` > 1 the model is split over that many GPUs (CUDA only).
std::unique_ptr<Model> create_model_on(const std::string& device, const ModelConfig& config,
                                       std::shared_ptr<Checkpoint> checkpoint, int tensor_parallel = 1);

}  // namespace fs
