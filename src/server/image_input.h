#pragma once
// Image parts of a chat request turned into engine inputs: each image fetched on the request thread, then decoded,
// preprocessed and run through the vision tower once on the tower's scheduler (off the engine's round loop),
// then the multimodal prompt (pads expanded, M-RoPE
// positions, features) with prompt-cache keys that tie every image-pad token to its image's digest.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "server/api_request.h"
#include "vision/image.h"
#include "vision/image_digest.h"
#include "vision/media_fetch.h"
#include "vision/multimodal_prompt.h"

namespace fs {
struct LoadedModel;
}

namespace fs::server {

struct VisionOptions {
  bool enabled = false;              // --vision
  vision::MediaFetchOptions fetch;   // --media-allow-local, --media-domains, --max-image-bytes
  vision::DecodeLimits decode;       // --max-image-bytes, --max-image-pixels
  int max_images = 16;               // per request
  bool weights_on_host = false;      // --vision-host: a GPU tower's weights in pinned host memory, staged per unit
  double max_image_seconds = 5;      // --max-image-seconds: largest image = what the tower encodes in this time
};

// Loads the vision encoder (on the text model's device, sized for the largest image the processor admits, run
// through a low-priority scheduler, its admitted image size measured) and the preprocessor config into `m` when
// its checkpoint has a vision_config; a model without one is left text-only,
// and a model whose encoder is already attached is left as it is. Throws fs::Error for a vision model whose tower
// is not supported or does not fit.
void attach_vision(LoadedModel& m, const VisionOptions& o);

// Why image parts are refused for this model and options ("" when they are accepted).
std::string image_refusal(const LoadedModel& m, const VisionOptions& o);

// The strings message text may not contain on this model (its image placeholder tokens).
std::vector<std::string> reserved_image_text(const LoadedModel& m);

struct EncodedImage {
  vision::ImageGrid grid;
  vision::ImageDigest digest{};
  std::vector<float> features;  // [grid.patches() / merge², hidden]
};

struct EncodeControl {
  std::function<bool()> should_stop;  // polled while an image waits or encodes: the client left, the server drains
  int64_t max_image_tokens = 0;       // an image's pad tokens must fit this (the context; 0: no check)
};

// Fetches every image, then decode → preprocess → tower for each, in order, as one job (the next image prepared
// while the tower encodes the current one). Throws ApiException: 400 naming the part for refused fetches, broken or
// unsupported images and images over the admitted size; 503 when should_stop ended it.
std::vector<EncodedImage> encode_images(const std::vector<ImageRef>& images, const LoadedModel& m,
                                        const VisionOptions& o, const EncodeControl& control = {});

struct VisionPrompt {
  vision::MultimodalPrompt prompt;
  std::vector<uint64_t> cache_keys;  // per prompt token
};

// The rendered chat text with its images. Throws ApiException (400) when the text's image placeholders do not
// match the images.
VisionPrompt build_vision_prompt(const std::string& text, const LoadedModel& m, std::vector<EncodedImage>& images);

// The prompt-cache key of pad `index` of an image: the top bit set (token ids never have it) over a hash of the
// digest and the index.
uint64_t image_pad_cache_key(const vision::ImageDigest& digest, uint32_t index);

}  // namespace fs::server
