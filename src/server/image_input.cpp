#include "server/image_input.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "core/error.h"
#include "core/hash.h"
#include "engine/loaded_model.h"
#include "io/safetensors.h"
#include "server/api_error.h"
#include "vision/image_processor.h"
#include "vision/vision_encoder.h"
#include "vision/vision_tower_config.h"

namespace fs::server {
namespace {

// One tower encode at a time: each already fills the thread pool or the GPU, the CUDA tower's stage and scratch
// serve one image at a time, and this bounds the memory that concurrent image requests hold.
std::mutex& tower_mutex() {
  static std::mutex mu;
  return mu;
}

// Largest image the encoder must take, in patches: the processor's max_pixels when it resizes, else the decoder's
// pixel limit.
int64_t admitted_patches(const vision::ImageProcessorConfig& p, const VisionOptions& o) {
  if (p.do_resize) return vision::max_image_patches(p);
  return std::max<int64_t>(int64_t(o.decode.max_pixels / uint64_t(p.patch_size * p.patch_size)), 1);
}

}  // namespace

void attach_vision(LoadedModel& m, const VisionOptions& o) {
  if (m.config.vision.is_null() || m.vision_encoder) return;
  if (m.config.architecture != "Qwen2_5_VLForConditionalGeneration")
    throw Error("--vision: the vision tower of " + m.config.architecture +
                " is not supported (Qwen2_5_VLForConditionalGeneration is)");
  auto source = (m.dir / "config.json").string();
  auto tower_config = vision::VisionTowerConfig::from_json(m.config.vision, source);
  m.image_processor = std::make_shared<const vision::ImageProcessorConfig>(vision::ImageProcessorConfig::load(m.dir));
  if (tower_config.out_hidden_size != m.config.hidden_size)
    throw Error(source + ": vision_config.out_hidden_size " + std::to_string(tower_config.out_hidden_size) +
                " differs from the text model's hidden_size " + std::to_string(m.config.hidden_size));
  vision::VisionEncoderOptions eo;
  eo.device = m.model ? m.model->device_name() : "cpu";
  eo.weights_on_host = o.weights_on_host;
  eo.max_patches = admitted_patches(*m.image_processor, o);
  m.vision_encoder = vision::create_vision_encoder(tower_config, m.checkpoint, eo);
}

std::string image_refusal(const LoadedModel& m, const VisionOptions& o) {
  if (!o.enabled) return "image input is off on this server; start it with --vision";
  if (!m.vision_encoder) return "the model '" + m.name + "' has no vision tower; it takes text only";
  return "";
}

std::vector<std::string> reserved_image_text(const LoadedModel& m) {
  std::vector<std::string> out;
  if (m.config.image_token_id < 0 && m.config.vision.is_null()) return out;
  for (const char* name : {"<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>"})
    if (m.tokenizer->token_to_id(name)) out.push_back(name);
  if (m.config.image_token_id >= 0) {
    std::string pad = m.tokenizer->id_to_token(m.config.image_token_id);
    if (!pad.empty() && std::find(out.begin(), out.end(), pad) == out.end()) out.push_back(pad);
  }
  return out;
}

std::vector<EncodedImage> encode_images(const std::vector<ImageRef>& images, const LoadedModel& m,
                                        const VisionOptions& o) {
  std::vector<EncodedImage> out;
  out.reserve(images.size());
  for (const ImageRef& ref : images) {
    EncodedImage e;
    vision::PixelPatches patches;
    try {
      vision::MediaFetchOptions fetch = o.fetch;
      fetch.max_bytes = std::min(fetch.max_bytes, o.decode.max_bytes);
      vision::FetchedMedia media = vision::fetch_media(ref.url, fetch);
      vision::RgbImage image = vision::decode_image(media.bytes, o.decode);
      patches = vision::preprocess_image(image, *m.image_processor);
      e.grid = patches.grid;
      e.digest = vision::image_digest(image, e.grid);
    } catch (const Error& err) {
      throw ApiException{bad_request(ref.param, std::string("image '") + ref.param + "': " + err.what())};
    }
    try {
      std::lock_guard<std::mutex> lock(tower_mutex());
      e.features = m.vision_encoder->encode(patches);
    } catch (const Error& err) {
      throw ApiException{server_error(std::string("the vision tower failed: ") + err.what())};
    }
    out.push_back(std::move(e));
  }
  return out;
}

VisionPrompt build_vision_prompt(const std::string& text, const LoadedModel& m, std::vector<EncodedImage>& images) {
  auto vt = vision::VisionTokenIds::from(m.config, *m.tokenizer);
  std::vector<vision::ImageGrid> grids;
  std::vector<std::vector<float>> features;
  for (auto& img : images) {
    grids.push_back(img.grid);
    features.push_back(std::move(img.features));
  }
  VisionPrompt out;
  try {
    out.prompt = vision::build_multimodal_prompt(text, *m.tokenizer, grids, features, vt);
  } catch (const Error& err) {
    throw ApiException{bad_request("messages", std::string("the prompt does not fit its images: ") + err.what())};
  }
  out.cache_keys.reserve(out.prompt.ids.size());
  // Expansion leaves each image's pads as one contiguous run, images in order.
  size_t image = 0;
  uint64_t index = 0;
  const uint64_t merge = uint64_t(vt.spatial_merge_size) * uint64_t(vt.spatial_merge_size);
  for (int32_t id : out.prompt.ids) {
    if (id != vt.image_pad) {
      out.cache_keys.push_back(uint64_t(uint32_t(id)));
      continue;
    }
    if (index == uint64_t(images[image].grid.patches()) / merge) ++image, index = 0;
    out.cache_keys.push_back(image_pad_cache_key(images[image].digest, uint32_t(index++)));
  }
  return out;
}

uint64_t image_pad_cache_key(const vision::ImageDigest& digest, uint32_t index) {
  uint64_t h = splitmix64(index);
  for (size_t i = 0; i < digest.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, digest.data() + i, 8);
    h = splitmix64(h ^ word);
  }
  return (1ull << 63) | (h & ~(1ull << 63));
}

}  // namespace fs::server
