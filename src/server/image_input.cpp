#include "server/image_input.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "core/error.h"
#include "core/hash.h"
#include "core/thread_pool.h"
#include "engine/loaded_model.h"
#include "io/safetensors.h"
#include "models/vision_tower_config.h"
#include "server/api_error.h"
#include "vision/image_pipeline.h"
#include "vision/image_processor.h"
#include "vision/scheduled_encoder.h"
#include "vision/vision_encoder.h"

namespace fs::server {
namespace {

// One tower encode at a time for an encoder not behind a scheduler: each already fills the thread pool or the GPU.
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
  if (m.config.architecture != "Qwen2_5_VLForConditionalGeneration" &&
      m.config.architecture != "Qwen3_5ForConditionalGeneration")
    throw Error("--vision: the vision tower of " + m.config.architecture +
                " is not supported (Qwen2_5_VLForConditionalGeneration and Qwen3_5ForConditionalGeneration are)");
  auto source = (m.dir / "config.json").string();
  auto tower_config = vision::VisionTowerConfig::from_json(m.config.vision, source);
  m.image_processor = std::make_shared<const vision::ImageProcessorConfig>(
      vision::ImageProcessorConfig::load(m.dir, vision::family_image_backend(m.config.architecture)));
  if (tower_config.out_hidden_size != m.config.hidden_size)
    throw Error(source + ": vision_config.out_hidden_size " + std::to_string(tower_config.out_hidden_size) +
                " differs from the text model's hidden_size " + std::to_string(m.config.hidden_size));
  vision::VisionEncoderOptions eo;
  eo.device = m.model ? m.model->device_name() : "cpu";
  eo.weights_on_host = o.weights_on_host;
  eo.max_patches = admitted_patches(*m.image_processor, o);
  std::shared_ptr<vision::VisionEncoder> device = vision::create_vision_encoder(tower_config, m.checkpoint, eo);
  vision::ImageTimeBudget budget;
  budget.max_seconds = o.max_image_seconds;
  budget.cap_patches = eo.max_patches;
  budget.threads = ThreadPool::global().size();
  m.vision_encoder = std::make_shared<vision::ScheduledVisionEncoder>(std::move(device), budget);
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

namespace {

// Refuses (400 naming the part) an image whose resized size is over what the server admits.
void check_admitted(const ImageRef& ref, const vision::RgbImage& image, const vision::ImageGrid& grid,
                    const vision::ScheduledVisionEncoder* scheduled, const vision::ImageProcessorConfig& p,
                    const EncodeControl& control) {
  const int64_t side = p.patch_size;
  const std::string size = std::to_string(image.width) + "x" + std::to_string(image.height) + " image is resized to " +
                           std::to_string(int64_t(grid.w) * side) + "x" + std::to_string(int64_t(grid.h) * side) +
                           " = " + std::to_string(grid.patches() * side * side) + " pixels";
  if (scheduled && grid.patches() > scheduled->admitted_patches())
    throw ApiException{bad_request(ref.param, "image '" + ref.param + "': the " + size + "; this server admits " +
                                                  scheduled->admitted_reason() + "; send a smaller image")};
  const int64_t tokens = grid.patches() / (int64_t(p.merge_size) * p.merge_size);
  if (control.max_image_tokens > 0 && tokens > control.max_image_tokens)
    throw ApiException{bad_request(ref.param, "image '" + ref.param + "': the " + size + ", " +
                                                  std::to_string(tokens) + " image tokens; the context holds " +
                                                  std::to_string(control.max_image_tokens))};
}

}  // namespace

std::vector<EncodedImage> encode_images(const std::vector<ImageRef>& images, const LoadedModel& m,
                                        const VisionOptions& o, const EncodeControl& control) {
  auto* scheduled = dynamic_cast<vision::ScheduledVisionEncoder*>(m.vision_encoder.get());
  // Every image is fetched on the request thread first, so a refused fetch answers before any image work starts.
  std::vector<vision::FetchedMedia> media(images.size());
  for (size_t k = 0; k < images.size(); ++k) {
    try {
      vision::MediaFetchOptions fetch = o.fetch;
      fetch.max_bytes = std::min(fetch.max_bytes, o.decode.max_bytes);
      media[k] = vision::fetch_media(images[k].url, fetch);
    } catch (const Error& err) {
      const std::string& param = images[k].param;
      throw ApiException{bad_request(param, std::string("image '") + param + "': " + err.what())};
    }
  }
  std::vector<EncodedImage> out(images.size());
  // Decode, preprocess and encode as one job: on the tower's scheduler when there is one, checking `cancel` between
  // steps; the next image is decoded and preprocessed while the tower encodes the current one.
  auto work = [&](const vision::CancelFlag& cancel) {
    auto prepare = [&](size_t k) {
      const ImageRef& ref = images[k];
      try {
        vision::throw_if_cancelled(&cancel);
        vision::RgbImage image = vision::decode_image(media[k].bytes, o.decode);
        media[k].bytes = {};
        check_admitted(ref, image, vision::grid_for_size(image.width, image.height, *m.image_processor), scheduled,
                       *m.image_processor, control);
        vision::throw_if_cancelled(&cancel);
        return vision::prepare_image(image, *m.image_processor);
      } catch (const vision::EncodeCancelled&) {
        throw;
      } catch (const Error& err) {
        throw ApiException{bad_request(ref.param, std::string("image '") + ref.param + "': " + err.what())};
      }
    };
    auto encode = [&](size_t k, vision::PreparedImage& prepared) {
      try {
        vision::VisionEncoder& encoder = scheduled ? scheduled->device() : *m.vision_encoder;
        out[k].features = encoder.encode_cancellable(prepared.patches, cancel);
      } catch (const vision::EncodeCancelled&) {
        throw;
      } catch (const Error& err) {
        throw ApiException{server_error(std::string("the vision tower failed: ") + err.what())};
      }
      out[k].grid = prepared.patches.grid;
      out[k].digest = prepared.digest;
      prepared = {};
    };
    vision::pipeline_images(images.size(), prepare, encode);
  };
  try {
    if (scheduled) {
      scheduled->run(work, control.should_stop);
    } else {
      std::lock_guard<std::mutex> lock(tower_mutex());
      vision::CancelFlag never{false};
      work(never);
    }
  } catch (const vision::EncodeCancelled&) {
    throw ApiException{ApiError{503, "the image encode was cancelled: the client left or the server is shutting down",
                                "server_error", "", "cancelled"}};
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
