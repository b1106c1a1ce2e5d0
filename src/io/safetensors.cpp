#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fcntl.h>
#include <set>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/files.h"

namespace fs {

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

static TensorInfo parse_entry(const std::string& name, const nlohmann::json& v, const std::string& source) {
  auto bad = [&](const std::string& why) { return Error(source + ": tensor '" + name + "': " + why); };
  if (!v.is_object()) throw bad("entry is not an object");
  TensorInfo t;
  t.name = name;
  auto dt = v.find("dtype");
  if (dt == v.end() || !dt->is_string()) throw bad("missing dtype");
  if (!parse_dtype(dt->get<std::string>(), &t.dtype)) throw bad("unsupported dtype " + dt->get<std::string>());
  auto shape = v.find("shape");
  if (shape == v.end() || !shape->is_array()) throw bad("missing shape");
  if (shape->size() > 8) throw bad("too many dimensions");
  uint64_t numel = 1;
  for (const auto& d : *shape) {
    if (!d.is_number_unsigned()) throw bad("shape has a non-integer or negative dimension");
    uint64_t dim = d.get<uint64_t>();
    if (dim > (1ull << 40) || (dim && numel > (1ull << 48) / dim)) throw bad("shape too large");
    numel *= dim;
    t.shape.push_back(int64_t(dim));
  }
  auto offs = v.find("data_offsets");
  if (offs == v.end() || !offs->is_array() || offs->size() != 2 || !(*offs)[0].is_number_unsigned() ||
      !(*offs)[1].is_number_unsigned())
    throw bad("data_offsets must be two non-negative integers");
  t.begin = (*offs)[0].get<uint64_t>();
  t.end = (*offs)[1].get<uint64_t>();
  if (t.end < t.begin) throw bad("data_offsets end before they begin");
  if (t.end - t.begin != numel * dtype_size(t.dtype))
    throw bad("byte span " + std::to_string(t.end - t.begin) + " does not match shape × dtype (" +
              std::to_string(numel * dtype_size(t.dtype)) + ")");
  return t;
}

SafetensorsHeader parse_safetensors_header(const uint8_t* data, size_t size, const std::string& source) {
  if (size < 8) throw Error(source + ": truncated safetensors file (no header length)");
  uint64_t len = 0;
  std::memcpy(&len, data, 8);
  if (len > kMaxSafetensorsHeader) throw Error(source + ": safetensors header length " + std::to_string(len) +
                                               " exceeds the limit");
  if (len > size - 8) throw Error(source + ": truncated safetensors file (header runs past the end)");
  auto j = nlohmann::json::parse(data + 8, data + 8 + len, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw Error(source + ": malformed safetensors header JSON");
  SafetensorsHeader h;
  h.data_offset = 8 + len;
  uint64_t data_size = size - h.data_offset;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    TensorInfo t = parse_entry(it.key(), it.value(), source);
    if (t.end > data_size)
      throw Error(source + ": tensor '" + t.name + "' lies outside the file (ends at " + std::to_string(t.end) +
                  ", data section is " + std::to_string(data_size) + " bytes)");
    h.tensors.push_back(std::move(t));
  }
  std::vector<const TensorInfo*> order;
  for (const auto& t : h.tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < order.size(); ++i)
    if (order[i]->begin < order[i - 1]->end && order[i]->begin != order[i]->end)
      throw Error(source + ": tensors '" + order[i - 1]->name + "' and '" + order[i]->name + "' overlap");
  return h;
}

MappedFile::MappedFile(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open " + path.string());
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    throw Error("cannot stat " + path.string());
  }
  size_ = size_t(st.st_size);
  if (size_ > 0) {
    void* p = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      throw Error("cannot map " + path.string());
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) munmap(const_cast<uint8_t*>(data_), size_);
}

std::shared_ptr<Checkpoint> Checkpoint::open(const std::filesystem::path& dir) {
  auto ck = std::shared_ptr<Checkpoint>(new Checkpoint());
  ck->dir_ = dir;
  std::vector<std::string> files;
  std::error_code ec;
  auto index = dir / "model.safetensors.index.json";
  if (std::filesystem::exists(index, ec)) {
    json j = read_json_file(index);
    auto map = j.find("weight_map");
    if (map == j.end() || !map->is_object()) throw Error(index.string() + ": missing weight_map");
    std::set<std::string> seen;
    for (const auto& [name, file] : map->items()) {
      if (!file.is_string()) throw Error(index.string() + ": weight_map entry '" + name + "' is not a file name");
      auto f = file.get<std::string>();
      if (f.find('/') != std::string::npos || f.find("..") != std::string::npos)
        throw Error(index.string() + ": shard name '" + f + "' leaves the folder");
      if (seen.insert(f).second) files.push_back(f);
    }
  } else if (std::filesystem::exists(dir / "model.safetensors", ec)) {
    files.push_back("model.safetensors");
  } else {
    throw Error("no model.safetensors or model.safetensors.index.json in " + dir.string());
  }
  for (const auto& f : files) {
    auto shard = std::make_unique<Shard>();
    auto path = dir / f;
    shard->file = std::make_unique<MappedFile>(path);
    shard->header = parse_safetensors_header(shard->file->data(), shard->file->size(), path.string());
    for (const auto& t : shard->header.tensors) {
      if (!ck->tensors_.emplace(t.name, std::make_pair(shard.get(), &t)).second)
        throw Error(path.string() + ": tensor '" + t.name + "' appears in more than one shard");
    }
    ck->shards_.push_back(std::move(shard));
  }
  return ck;
}

TensorView Checkpoint::get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw Error("missing tensor " + name + " in " + dir_.string());
  const auto& [shard, info] = it->second;
  return TensorView{info, shard->file->data() + shard->header.data_offset + info->begin};
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  for (const auto& [name, _] : tensors_) out.push_back(name);
  return out;
}

size_t Checkpoint::total_bytes() const {
  size_t n = 0;
  for (const auto& [_, v] : tensors_) n += v.second->end - v.second->begin;
  return n;
}

}  // namespace fs
