#pragma once
// What the CPU vision towers share: the tower's program, the checkpoint its weights come from, the patch embedding's
// matrix, and encode() as patch embedding, blocks and merger over the image's pass. `Tower` (CRTP) supplies
// patch_embed, block and merge.
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/weight.h"
#include "core/error.h"
#include "models/encode_cancel.h"
#include "models/vision_program.h"
#include "models/vision_program_pass.h"
#include "models/vision_tower_config.h"
#include "vision/image_processor.h"
#include "vision/program_weights.h"
#include "vision/tower_ops.h"

namespace fs {
class Checkpoint;
}

namespace fs::vision {

template <class Tower>
class CpuTowerBase {
 public:
  const VisionTowerConfig& config() const { return program_.config; }
  const VisionProgram& program() const { return program_; }
  int units() const { return program_.config.depth + 2; }  // patch embedding, blocks, merger

  // Merged image features [patches / merge_unit, out_hidden_size] in raster order of merged units. Once `cancel`
  // is set, stops between units or inside a block's attention with EncodeCancelled.
  std::vector<float> encode(const PixelPatches& patches, const CancelFlag* cancel = nullptr) const {
    const Tower& tower = static_cast<const Tower&>(*this);
    const VisionPass pass = vision_pass(program_, patches.grid);
    std::vector<float> hidden = tower.patch_embed(patches, pass);
    run_blocks(program_.config.depth, cancel, [&](int i) { tower.block(i, pass, hidden, cancel); });
    return tower.merge(pass, hidden);
  }

 protected:
  // Checks that `c` describes a tower of `kind` (`name` in the error), then reads its program and patch embedding.
  CpuTowerBase(const VisionTowerConfig& c, std::shared_ptr<Checkpoint> ck, VisionTowerKind kind, const char* name)
      : ck_(std::move(ck)) {
    if (c.kind != kind) throw Error(std::string("the vision_config does not describe a ") + name + " tower");
    program_ = vision_program(c, *ck_);
    patch_embed_ = load_patch_embed(*ck_, program_.patch_embed);
  }

  VisionProgram program_;
  std::shared_ptr<Checkpoint> ck_;
  WeightMatrix patch_embed_;
};

}  // namespace fs::vision
