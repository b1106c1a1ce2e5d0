// Stream capture into an instantiated graph.
#include "backends/cuda/host/graph.h"

#include <utility>

#include "backends/cuda/host/check.h"

namespace fs::cuda {

CapturedGraph::CapturedGraph(CUstream stream, const std::function<void()>& enqueue) {
  FS_CU(stream_begin_capture, stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  try {
    enqueue();
  } catch (...) {
    CUgraph partial = nullptr;
    if (driver().stream_end_capture(stream, &partial) == CUDA_SUCCESS && partial) driver().graph_destroy(partial);
    throw;
  }
  FS_CU(stream_end_capture, stream, &graph_);
  try {
    FS_CU(graph_instantiate, &exec_, graph_, 0);
  } catch (...) {
    destroy();
    throw;
  }
}

CapturedGraph::~CapturedGraph() { destroy(); }

CapturedGraph::CapturedGraph(CapturedGraph&& other) noexcept
    : graph_(std::exchange(other.graph_, nullptr)), exec_(std::exchange(other.exec_, nullptr)) {}

CapturedGraph& CapturedGraph::operator=(CapturedGraph&& other) noexcept {
  if (this != &other) {
    destroy();
    graph_ = std::exchange(other.graph_, nullptr);
    exec_ = std::exchange(other.exec_, nullptr);
  }
  return *this;
}

void CapturedGraph::launch(CUstream stream) const { FS_CU(graph_launch, exec_, stream); }

void CapturedGraph::destroy() noexcept {
  if (exec_) driver().graph_exec_destroy(exec_);
  if (graph_) driver().graph_destroy(graph_);
  exec_ = nullptr;
  graph_ = nullptr;
}

}  // namespace fs::cuda
