#pragma once
// A request's images through preparation (decode, preprocess, digest) and the tower, in order, the CPU's preparation
// of the next image overlapping the tower's encode of the current one.
#include <cstddef>
#include <functional>

#include "models/vision_patches.h"
#include "vision/image.h"
#include "vision/image_digest.h"
#include "vision/image_processor.h"

namespace fs::vision {

// An image ready for the tower: its patches and the prompt-cache digest of its pixels.
struct PreparedImage {
  PixelPatches patches;
  ImageDigest digest{};
};

// preprocess_image and image_digest, both over the calling thread's pool.
PreparedImage prepare_image(const RgbImage& image, const ImageProcessorConfig& config);

// Runs prepare(k) then encode(k, prepared) for k = 0 .. count − 1. prepare(k + 1) runs on a second thread, with this
// thread's pool (ThreadPool::global()) as its pool, while encode(k) runs here. Exceptions come in image order: one
// from prepare(k + 1) is rethrown only after encode(k) returned; when encode(k) throws, prepare(k + 1) is waited for
// and its result or exception dropped.
void pipeline_images(size_t count, const std::function<PreparedImage(size_t)>& prepare,
                     const std::function<void(size_t, PreparedImage&)>& encode);

}  // namespace fs::vision
