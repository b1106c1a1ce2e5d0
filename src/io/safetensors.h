#pragma once
// safetensors files: a validated header over a read-only mmap, and checkpoints of one or many shards.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace fs {

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets inside the data section
  uint64_t end = 0;
  int64_t numel() const;
};

struct SafetensorsHeader {
  uint64_t data_offset = 0;  // 8 + header length
  std::vector<TensorInfo> tensors;
};

// Largest header accepted, in bytes.
inline constexpr uint64_t kMaxSafetensorsHeader = 100ull << 20;

// Validates the header of a file of `size` bytes starting at `data`: length field, JSON, known dtypes,
// shape × dtype = span, spans inside the file and not overlapping. Throws fs::Error naming `source`.
SafetensorsHeader parse_safetensors_header(const uint8_t* data, size_t size, const std::string& source);

class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

struct TensorView {
  const TensorInfo* info = nullptr;
  const void* data = nullptr;
  DType dtype() const { return info->dtype; }
  const std::vector<int64_t>& shape() const { return info->shape; }
};

// Every tensor of a checkpoint folder: model.safetensors, or the shards named by model.safetensors.index.json.
class Checkpoint {
 public:
  static std::shared_ptr<Checkpoint> open(const std::filesystem::path& dir);
  bool has(const std::string& name) const { return tensors_.count(name) > 0; }
  // Throws fs::Error "missing tensor NAME in DIR" when absent.
  TensorView get(const std::string& name) const;
  std::vector<std::string> names() const;
  size_t total_bytes() const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  struct Shard {
    std::unique_ptr<MappedFile> file;
    SafetensorsHeader header;
  };
  std::filesystem::path dir_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::map<std::string, std::pair<const Shard*, const TensorInfo*>> tensors_;
};

}  // namespace fs
