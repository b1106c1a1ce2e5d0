#include "vision/multimodal_prompt.h"

#include <algorithm>

#include "core/error.h"
#include "io/hf_config.h"
#include "text/tokenizer.h"

namespace fs::vision {

namespace {

int64_t pads_for(const ImageGrid& g, int merge) {
  if (g.t <= 0 || g.h <= 0 || g.w <= 0 || g.h % merge || g.w % merge)
    throw Error("image grid " + std::to_string(g.t) + "x" + std::to_string(g.h) + "x" + std::to_string(g.w) +
                " does not fit the merge size");
  return g.patches() / (int64_t(merge) * merge);
}

}  // namespace

VisionTokenIds VisionTokenIds::from(const ModelConfig& config, const Tokenizer& tok) {
  VisionTokenIds vt;
  vt.image_pad = config.image_token_id;
  if (vt.image_pad < 0) vt.image_pad = tok.token_to_id("<|image_pad|>").value_or(-1);
  vt.vision_start = tok.token_to_id("<|vision_start|>").value_or(-1);
  if (config.vision.is_object()) vt.spatial_merge_size = config.vision.value("spatial_merge_size", 2);
  if (vt.image_pad < 0) throw Error("the model has no image-pad token");
  return vt;
}

std::vector<int32_t> expand_image_pads(std::span<const int32_t> ids, std::span<const ImageGrid> grids,
                                       const VisionTokenIds& vt) {
  std::vector<int32_t> out;
  out.reserve(ids.size());
  size_t image = 0;
  for (int32_t id : ids) {
    if (id != vt.image_pad) {
      out.push_back(id);
      continue;
    }
    if (image >= grids.size())
      throw Error("the prompt has more image placeholders than images (" + std::to_string(grids.size()) + ")");
    out.insert(out.end(), size_t(pads_for(grids[image++], vt.spatial_merge_size)), vt.image_pad);
  }
  if (image != grids.size())
    throw Error("the prompt has " + std::to_string(image) + " image placeholders for " + std::to_string(grids.size()) +
                " images");
  return out;
}

std::vector<int32_t> mrope_positions(std::span<const int32_t> ids, std::span<const ImageGrid> grids,
                                     const VisionTokenIds& vt, int& rope_delta) {
  const int m = vt.spatial_merge_size;
  std::vector<int32_t> pos;
  pos.reserve(ids.size() * 3);
  int64_t next = 0;  // one past the largest position so far
  size_t i = 0, image = 0;
  while (i < ids.size()) {
    if (ids[i] != vt.image_pad) {
      pos.insert(pos.end(), 3, int32_t(next++));
      ++i;
      continue;
    }
    if (image >= grids.size()) throw Error("more image-pad runs than images");
    const ImageGrid& g = grids[image++];
    const int64_t n = pads_for(g, m);
    const int gh = g.h / m, gw = g.w / m;
    if (i + size_t(n) > ids.size() || std::any_of(ids.begin() + i, ids.begin() + i + size_t(n), [&](int32_t id) {
          return id != vt.image_pad;
        }))
      throw Error("an image's pad run is shorter than its grid");
    // Still images have one temporal slot, so t stays at the image's base position.
    for (int64_t k = 0; k < n; ++k) {
      const int64_t r = (k / gw) % gh, c = k % gw;
      pos.push_back(int32_t(next));
      pos.push_back(int32_t(next + r));
      pos.push_back(int32_t(next + c));
    }
    next += std::max<int64_t>(gh, gw);
    i += size_t(n);
  }
  if (image != grids.size()) throw Error("fewer image-pad runs than images");
  rope_delta = int(next - int64_t(ids.size()));
  return pos;
}

MultimodalPrompt build_multimodal_prompt(const std::string& text, const Tokenizer& tok, std::span<const ImageGrid> grids,
                                         std::span<const std::vector<float>> features, const VisionTokenIds& vt) {
  if (features.size() != grids.size()) throw Error("one feature block per image is required");
  MultimodalPrompt p;
  std::vector<int32_t> ids = tok.encode(text, false);
  p.ids = expand_image_pads(ids, grids, vt);
  p.mrope_positions = mrope_positions(p.ids, grids, vt, p.rope_delta);
  size_t total = 0;
  for (const auto& f : features) total += f.size();
  p.image_embeddings.reserve(total);
  for (size_t k = 0; k < grids.size(); ++k) {
    const size_t pads = size_t(pads_for(grids[k], vt.spatial_merge_size));
    if (pads == 0 || features[k].size() % pads) throw Error("image features do not match the image's pad count");
    p.image_embeddings.insert(p.image_embeddings.end(), features[k].begin(), features[k].end());
  }
  return p;
}

}  // namespace fs::vision
