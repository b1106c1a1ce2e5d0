// The Qwen3.5 tower: conv patch embedding with bias plus the learned position grid resampled to the image, 2-D
// rotary, LayerNorm, GELU blocks attending over the whole frame, LayerNorm merger.
#include "models/vision_program.h"

namespace fs {

VisionProgram qwen3_5_vision_program(const vision::VisionTowerConfig& c, const std::string& p) {
  const int H = c.hidden_size, F = c.intermediate_size, M = H * c.merge_unit();
  VisionProgram v;
  v.family = "qwen3.5";
  v.prefix = p;
  v.config = c;
  v.patch_embed = {p + "patch_embed.proj.weight", {H, c.in_channels, c.temporal_patch_size, c.patch_size, c.patch_size}};
  v.patch_bias = vision_bias(p + "patch_embed.proj.", H);
  v.positions = VisionPositions::LearnedGridAndRotary;
  v.position_grid = vector_ref(p + "pos_embed", {{p + "pos_embed.weight", {c.num_position_embeddings, H}}});
  v.norm = VisionNorm::LayerNorm;
  v.eps = 1e-6f;
  v.mlp = c.tanh_gelu ? VisionMlp::GeluTanh : VisionMlp::GeluErf;
  v.windows = false;
  for (int i = 0; i < c.depth; ++i) {
    const std::string b = p + "blocks." + std::to_string(i) + ".";
    VisionBlockProgram blk;
    blk.norm1 = vision_norm(b + "norm1.", H, v.norm);
    blk.norm2 = vision_norm(b + "norm2.", H, v.norm);
    set_vision_attention(blk, b, H);
    blk.mlp_in = vision_matrix(b + "mlp.linear_fc1.", F, H);
    blk.mlp_in_bias = vision_bias(b + "mlp.linear_fc1.", F);
    blk.mlp_out = vision_matrix(b + "mlp.linear_fc2.", H, F);
    blk.mlp_out_bias = vision_bias(b + "mlp.linear_fc2.", H);
    blk.full_attention = true;
    v.blocks.push_back(std::move(blk));
  }
  v.merger.norm = vision_norm(p + "merger.norm.", H, v.norm);
  v.merger.fc1 = vision_matrix(p + "merger.linear_fc1.", M, M);
  v.merger.fc1_bias = vision_bias(p + "merger.linear_fc1.", M);
  v.merger.fc2 = vision_matrix(p + "merger.linear_fc2.", c.out_hidden_size, M);
  v.merger.fc2_bias = vision_bias(p + "merger.linear_fc2.", c.out_hidden_size);
  return v;
}

}  // namespace fs
