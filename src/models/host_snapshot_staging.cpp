#include "models/host_snapshot_staging.h"

namespace fs {

HostSnapshotStaging::HostSnapshotStaging(std::span<const SequenceChunk> chunks, size_t state_floats)
    : view_(chunks) {
  size_t staged = 0;
  for (const SequenceChunk& ch : chunks)
    for (const StateSnapshotTarget& t : ch.state_snapshots) staged += t.pages.empty() ? 0 : 1;
  if (staged == 0) return;
  chunks_.assign(chunks.begin(), chunks.end());
  view_ = chunks_;
  buffers_.reserve(staged);  // targets point into these buffers, which must not move
  targets_.resize(chunks_.size());
  for (size_t c = 0; c < chunks_.size(); ++c) {
    for (StateSnapshotTarget t : chunks_[c].state_snapshots) {
      if (!t.pages.empty()) {
        buffers_.emplace_back(state_floats);
        pages_.push_back(t.pages);
        t = {t.position, buffers_.back().data(), {}};
      }
      targets_[c].push_back(t);
    }
    chunks_[c].state_snapshots = targets_[c];
  }
}

void HostSnapshotStaging::write(Model& model, KvPool& pool) const {
  for (size_t i = 0; i < buffers_.size(); ++i) model.write_state_pages(pool, pages_[i], buffers_[i].data());
}

}  // namespace fs
