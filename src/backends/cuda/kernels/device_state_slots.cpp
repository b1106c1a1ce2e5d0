#include "backends/cuda/kernels/device_state_slots.h"

#include <cstring>
#include <string>

#include "backends/cuda/host/check.h"
#include "core/error.h"

namespace fs::cuda {

namespace k = kernels;

void StateRows::add_chunk(const SequenceChunk& ch, int first_row, int64_t slot_floats, size_t state_floats,
                          size_t target_offset, bool chunked) {
  k::DeltaNetSeq s;
  s.first_row = first_row;
  s.rows = int(ch.tokens.size());
  s.state = slot_floats;
  s.fresh = ch.start_pos == 0 ? 1 : 0;
  s.first_tap = int(taps.size());
  s.tap_count = int(ch.state_snapshots.size());
  s.chunked = chunked ? 1 : 0;
  this->chunked += s.chunked;
  for (const StateSnapshotTarget& t : ch.state_snapshots) {
    taps.push_back({t.position - ch.start_pos, int64_t(taps.size()) * int64_t(state_floats)});
    tap_targets.push_back(t.pages.empty() ? t.state + target_offset : nullptr);
    tap_pages.push_back(t.pages);
  }
  seqs.push_back(s);
}

void StateRows::add_padding(int first_row, int count, int64_t padding_floats) {
  for (int r = 0; r < count; ++r) seqs.push_back({first_row + r, 1, padding_floats, 1, 0, 0});
}

size_t StateRows::taps_offset(int rows) {
  return (size_t(rows) * sizeof(k::DeltaNetSeq) + 15) / 16 * 16;
}

size_t StateRows::descriptor_bytes(int rows) {
  return taps_offset(rows) + size_t(rows) * sizeof(k::DeltaNetSnapshot);
}

std::vector<unsigned char> StateRows::descriptors(int rows) const {
  if (seqs.size() > size_t(rows) || taps.size() > size_t(rows))
    throw Error("more DeltaNet sequences or snapshots than rows in a pass");
  std::vector<unsigned char> block(descriptor_bytes(rows), 0);
  if (!seqs.empty()) std::memcpy(block.data(), seqs.data(), seqs.size() * sizeof(k::DeltaNetSeq));
  if (!taps.empty()) std::memcpy(block.data() + taps_offset(rows), taps.data(), taps.size() * sizeof(k::DeltaNetSnapshot));
  return block;
}

void DeviceStateSlots::attach(int slots) {
  const size_t bytes = size_t(slots + 1) * state_floats_ * sizeof(float);
  if (!states_ || states_->capacity() < bytes) {
    states_.reset();
    states_ = std::make_unique<DeviceArena>(bytes, "recurrent state slots");
    states_base_ = states_->allocate(bytes, "recurrent states").ptr;
  }
  slots_ = slots;
}

int64_t DeviceStateSlots::slot_floats(int32_t slot) const {
  if (slot < 0 || slot >= slots_) throw Error("state slot " + std::to_string(slot) + " outside the device's slots");
  return int64_t(slot) * int64_t(state_floats_);
}

float* DeviceStateSlots::base() const { return reinterpret_cast<float*>(static_cast<uintptr_t>(states_base_)); }

float* DeviceStateSlots::snapshot_buffer(size_t taps, CUstream stream) {
  if (taps == 0) return nullptr;
  const size_t bytes = taps * state_floats_ * sizeof(float);
  if (!snapshots_ || snapshots_->capacity() < bytes) {
    FS_CU(stream_synchronize, stream);
    snapshots_.reset();
    snapshots_ = std::make_unique<DeviceArena>(bytes, "recurrent state snapshots");
    snapshots_base_ = snapshots_->allocate(bytes, "snapshots").ptr;
  }
  return reinterpret_cast<float*>(static_cast<uintptr_t>(snapshots_base_));
}

const int32_t* DeviceStateSlots::page_list(std::span<const int32_t> pages, PinnedStage& stage, CUstream stream) {
  const size_t bytes = std::max<size_t>(pages.size(), 1) * sizeof(int32_t);
  if (!page_list_ || page_list_->capacity() < bytes) {
    FS_CU(stream_synchronize, stream);
    page_list_.reset();
    page_list_ = std::make_unique<DeviceArena>(bytes, "snapshot page lists");
    page_list_base_ = page_list_->allocate(bytes, "snapshot pages").ptr;
  }
  if (!pages.empty()) stage.upload(page_list_base_, pages.data(), pages.size() * sizeof(int32_t), stream);
  return reinterpret_cast<const int32_t*>(static_cast<uintptr_t>(page_list_base_));
}

void DeviceStateSlots::deliver_snapshots(const StateRows& rows, Downloader& down, CUstream stream) {
  const size_t bytes = state_floats_ * sizeof(float);
  for (size_t t = 0; t < rows.tap_targets.size(); ++t)
    if (rows.tap_targets[t]) down.download(rows.tap_targets[t], snapshots_base_ + t * bytes, bytes, stream);
}

void DeviceStateSlots::save(int32_t slot, float* dst, Downloader& down, CUstream stream) {
  down.download(dst, states_base_ + size_t(slot_floats(slot)) * sizeof(float), state_floats_ * sizeof(float), stream);
}

void DeviceStateSlots::load(int32_t slot, const float* src, PinnedStage& stage, CUstream stream) {
  stage.upload(states_base_ + size_t(slot_floats(slot)) * sizeof(float), src, state_floats_ * sizeof(float), stream);
}

}  // namespace fs::cuda
