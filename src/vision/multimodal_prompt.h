#pragma once
// A Qwen2.5-VL prompt with images: each `<|image_pad|>` of the rendered chat text becomes one pad per merged
// patch, the M-RoPE (t, h, w) positions of every token follow transformers' get_rope_index, and the tower's
// features line up with the pads.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "vision/image_processor.h"

namespace fs {
class Tokenizer;
struct ModelConfig;
}  // namespace fs

namespace fs::vision {

struct VisionTokenIds {
  int32_t image_pad = -1;
  int32_t vision_start = -1;
  int spatial_merge_size = 2;
  // From the model's config (image_token_id, vision_start_token_id, vision_config.spatial_merge_size), falling
  // back to the tokenizer's `<|image_pad|>` / `<|vision_start|>`.
  static VisionTokenIds from(const ModelConfig& config, const Tokenizer& tok);
};

struct MultimodalPrompt {
  std::vector<int32_t> ids;             // with the pads expanded
  std::vector<int32_t> mrope_positions; // (t, h, w) per token, [ids.size() * 3]
  int rope_delta = 0;                   // later positions are plain position + rope_delta
  std::vector<float> image_embeddings;  // the images' features in prompt order, [pads, hidden]
};

// Replaces the k-th image-pad id with grids[k].patches() / merge² copies; the count of image-pad ids must equal
// the number of grids.
std::vector<int32_t> expand_image_pads(std::span<const int32_t> ids, std::span<const ImageGrid> grids,
                                       const VisionTokenIds& vt);

// M-RoPE positions of expanded ids: text advances t, h and w together; an image's pads take (0, row, col) of its
// merged grid offset by the next free position. Returns (t, h, w) per token and sets rope_delta.
std::vector<int32_t> mrope_positions(std::span<const int32_t> ids, std::span<const ImageGrid> grids,
                                     const VisionTokenIds& vt, int& rope_delta);

// Tokenizes `text` (special tokens as written, none added), expands the pads, computes positions and concatenates
// `features` (one [pads, hidden] block per image, in prompt order).
MultimodalPrompt build_multimodal_prompt(const std::string& text, const Tokenizer& tok, std::span<const ImageGrid> grids,
                                         std::span<const std::vector<float>> features, const VisionTokenIds& vt);

}  // namespace fs::vision
