#include "models/vision_program.h"

#include "io/safetensors.h"

namespace fs {

VisionNormRef vision_norm(const std::string& prefix, int size, VisionNorm kind) {
  VisionNormRef n;
  n.weight = vector_ref(prefix, {vector_part(prefix + "weight", size)});
  if (kind == VisionNorm::LayerNorm) n.bias = vector_ref(prefix + " bias", {vector_part(prefix + "bias", size)});
  return n;
}

MatrixRef vision_matrix(const std::string& prefix, int rows, int cols) {
  return matrix_ref(prefix, {matrix_part(prefix + "weight", rows, cols)});
}

VectorRef vision_bias(const std::string& prefix, int size) {
  return vector_ref(prefix + " bias", {vector_part(prefix + "bias", size)});
}

void set_vision_attention(VisionBlockProgram& b, const std::string& p, int H) {
  b.qkv = vision_matrix(p + "attn.qkv.", 3 * H, H);
  b.qkv_bias = vision_bias(p + "attn.qkv.", 3 * H);
  b.proj = vision_matrix(p + "attn.proj.", H, H);
  b.proj_bias = vision_bias(p + "attn.proj.", H);
}

VisionProgram vision_program(const vision::VisionTowerConfig& config, const Checkpoint& checkpoint) {
  const std::string prefix = checkpoint.has("visual.patch_embed.proj.weight") ? "visual." : "model.visual.";
  return config.kind == vision::VisionTowerKind::Qwen3_5 ? qwen3_5_vision_program(config, prefix)
                                                         : qwen2_5_vl_vision_program(config, prefix);
}

}  // namespace fs
