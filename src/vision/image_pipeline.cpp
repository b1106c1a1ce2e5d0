#include "vision/image_pipeline.h"

#include <future>

#include "core/thread_pool.h"

namespace fs::vision {

PreparedImage prepare_image(const RgbImage& image, const ImageProcessorConfig& config) {
  PreparedImage out;
  out.patches = preprocess_image(image, config);
  out.digest = image_digest(image, out.patches.grid);
  return out;
}

void pipeline_images(size_t count, const std::function<PreparedImage(size_t)>& prepare,
                     const std::function<void(size_t, PreparedImage&)>& encode) {
  if (count == 0) return;
  ThreadPool& pool = ThreadPool::global();
  PreparedImage current = prepare(0);
  for (size_t k = 0; k < count; ++k) {
    std::future<PreparedImage> next;
    if (k + 1 < count)
      next = std::async(std::launch::async, [&pool, &prepare, k] {
        ThreadPool::Use use(pool);
        return prepare(k + 1);
      });
    encode(k, current);  // a throw here leaves through next's destructor, which waits for prepare(k + 1)
    if (next.valid()) current = next.get();
  }
}

}  // namespace fs::vision
