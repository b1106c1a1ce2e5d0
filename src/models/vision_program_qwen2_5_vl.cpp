// The Qwen2.5-VL tower: conv patch embedding without bias, 2-D rotary, RMSNorm, SwiGLU blocks attending inside
// windows except the full-attention blocks, RMSNorm merger.
#include "models/vision_program.h"

namespace fs {

VisionProgram qwen2_5_vl_vision_program(const vision::VisionTowerConfig& c, const std::string& p) {
  const int H = c.hidden_size, F = c.intermediate_size, M = H * c.merge_unit();
  VisionProgram v;
  v.family = "qwen2.5-vl";
  v.prefix = p;
  v.config = c;
  v.patch_embed = {p + "patch_embed.proj.weight", {H, c.in_channels, c.temporal_patch_size, c.patch_size, c.patch_size}};
  v.norm = VisionNorm::Rms;
  v.eps = c.rms_norm_eps;
  v.mlp = VisionMlp::SwiGlu;
  v.windows = true;
  for (int i = 0; i < c.depth; ++i) {
    const std::string b = p + "blocks." + std::to_string(i) + ".";
    VisionBlockProgram blk;
    blk.norm1 = vision_norm(b + "norm1.", H, v.norm);
    blk.norm2 = vision_norm(b + "norm2.", H, v.norm);
    set_vision_attention(blk, b, H);
    blk.mlp_in = matrix_ref(b + "mlp gate|up", {matrix_part(b + "mlp.gate_proj.weight", F, H),
                                                matrix_part(b + "mlp.up_proj.weight", F, H)});
    blk.mlp_in_bias = vector_ref(b + "mlp gate|up bias", {vector_part(b + "mlp.gate_proj.bias", F),
                                                          vector_part(b + "mlp.up_proj.bias", F)});
    blk.mlp_out = vision_matrix(b + "mlp.down_proj.", H, F);
    blk.mlp_out_bias = vision_bias(b + "mlp.down_proj.", H);
    blk.full_attention = c.full_attention(i);
    v.blocks.push_back(std::move(blk));
  }
  v.merger.norm = vision_norm(p + "merger.ln_q.", H, v.norm);
  v.merger.fc1 = vision_matrix(p + "merger.mlp.0.", M, M);
  v.merger.fc1_bias = vision_bias(p + "merger.mlp.0.", M);
  v.merger.fc2 = vision_matrix(p + "merger.mlp.2.", c.out_hidden_size, M);
  v.merger.fc2_bias = vision_bias(p + "merger.mlp.2.", c.out_hidden_size);
  return v;
}

}  // namespace fs
