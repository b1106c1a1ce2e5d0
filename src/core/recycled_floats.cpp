#include "core/recycled_floats.h"

#include <algorithm>
#include <mutex>

namespace fs {

namespace {

constexpr size_t kWorthKeeping = size_t{1} << 18;  // floats (1 MiB): smaller buffers come from malloc's own bins
constexpr size_t kKept = 2;                         // buffers kept: a round's logits and the next's

std::mutex& keep_mutex() {
  static std::mutex mu;
  return mu;
}

std::vector<std::vector<float>>& kept() {
  static std::vector<std::vector<float>> buffers;
  return buffers;
}

}  // namespace

std::vector<float> take_floats(size_t n) {
  std::vector<float> v;
  if (n >= kWorthKeeping) {
    std::lock_guard lock(keep_mutex());
    auto& k = kept();
    auto fit = std::find_if(k.begin(), k.end(), [n](const std::vector<float>& b) { return b.capacity() >= n; });
    if (fit != k.end()) {
      v = std::move(*fit);
      k.erase(fit);
    }
  }
  v.resize(n);
  return v;
}

void recycle_floats(std::vector<float>&& v) {
  if (v.capacity() < kWorthKeeping) return;
  std::lock_guard lock(keep_mutex());
  auto& k = kept();
  k.push_back(std::move(v));
  std::sort(k.begin(), k.end(), [](const auto& a, const auto& b) { return a.capacity() > b.capacity(); });
  if (k.size() > kKept) k.resize(kKept);
}

}  // namespace fs
