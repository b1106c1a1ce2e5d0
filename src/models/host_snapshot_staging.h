#pragma once
// Snapshot targets that name pool pages, for a backend whose forward pass writes snapshots to host floats: the
// chunks it runs point those targets at host buffers, which then go into their pages.
#include <span>
#include <vector>

#include "models/model.h"

namespace fs {

class HostSnapshotStaging {
 public:
  HostSnapshotStaging(std::span<const SequenceChunk> chunks, size_t state_floats);

  // The chunks with every page target turned into a host one (the given chunks when none names pages).
  std::span<const SequenceChunk> chunks() const { return view_; }
  // After the pass: each staged state into its pages.
  void write(Model& model, KvPool& pool) const;

 private:
  std::span<const SequenceChunk> view_;
  std::vector<SequenceChunk> chunks_;
  std::vector<std::vector<StateSnapshotTarget>> targets_;
  std::vector<std::vector<float>> buffers_;
  std::vector<std::span<const int32_t>> pages_;
};

}  // namespace fs
