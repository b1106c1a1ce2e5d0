// Direct or bounce-buffered device → host copies.
#include "backends/cuda/host/downloader.h"

#include <algorithm>
#include <cstring>

#include "backends/cuda/host/check.h"
#include "core/error.h"

namespace fs::cuda {

Downloader::Downloader(const Device& device, PinnedBudget& budget, std::size_t bounce_bytes)
    : budget_(budget), staged_(device.integrated()), bounce_bytes_(bounce_bytes) {
  if (staged_ && bounce_bytes_ == 0) throw Error("download bounce buffer size must be positive");
}

void Downloader::download(void* dst, CUdeviceptr src, std::size_t bytes, CUstream stream) {
  if (bytes == 0) return;
  if (!staged_) {
    FS_CU(memcpy_dtoh_async, dst, src, bytes, stream);
    FS_CU(stream_synchronize, stream);
    return;
  }
  if (bounce_.empty()) bounce_ = PinnedBuffer(budget_, bounce_bytes_, "download bounce buffer");
  auto* to = static_cast<unsigned char*>(dst);
  for (std::size_t offset = 0; offset < bytes;) {
    std::size_t piece = std::min(bytes - offset, bounce_.size());
    FS_CU(memcpy_dtoh_async, bounce_.data(), src + offset, piece, stream);
    FS_CU(stream_synchronize, stream);
    std::memcpy(to + offset, bounce_.data(), piece);
    offset += piece;
  }
}

}  // namespace fs::cuda
