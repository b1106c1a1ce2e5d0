#include "models/model.h"

#include "models/kv_pool.h"

namespace fs {

void Model::copy_kv_positions(KvPool& pool, int32_t from, int32_t to, int positions) {
  pool.copy_positions(from, to, positions);
}

void Model::save_kv_page(KvPool& pool, int32_t page, float* dst) { pool.save_page(page, dst); }

void Model::load_kv_page(KvPool& pool, int32_t page, const float* src) { pool.load_page(page, src); }

}  // namespace fs
