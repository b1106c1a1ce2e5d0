#pragma once
// A CUDA graph captured from the work queued on a stream, instantiated once and replayed with launch().
#include <functional>

#include "backends/cuda/host/driver_types.h"

namespace fs::cuda {

class CapturedGraph {
 public:
  // Runs `enqueue` with `stream` in capture mode and instantiates what it queued. If `enqueue` or the driver
  // fails, capture is ended, anything made is destroyed and the error propagates.
  CapturedGraph(CUstream stream, const std::function<void()>& enqueue);
  ~CapturedGraph();
  CapturedGraph(CapturedGraph&& other) noexcept;
  CapturedGraph& operator=(CapturedGraph&& other) noexcept;
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  // Queues one replay of the captured work on `stream`.
  void launch(CUstream stream) const;

 private:
  void destroy() noexcept;

  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

}  // namespace fs::cuda
