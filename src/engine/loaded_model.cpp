#include "engine/loaded_model.h"

#include "core/error.h"
#include "core/files.h"
#include "io/safetensors.h"

namespace fs {

std::unique_ptr<LoadedModel> load_model(const std::filesystem::path& dir_in, const LoadProgress& progress,
                                        const std::string& device, int tensor_parallel) {
  auto m = std::make_unique<LoadedModel>();
  m->dir = dir_in.empty() ? builtin_model_dir() : dir_in;
  std::error_code ec;
  if (!std::filesystem::is_directory(m->dir, ec)) throw Error("model folder " + m->dir.string() + " does not exist");
  m->dir = std::filesystem::canonical(m->dir, ec);
  m->name = m->dir.filename().string();
  const size_t steps = 4;
  auto tick = [&](size_t done) {
    if (progress) progress(done, steps);
  };
  tick(0);
  m->config = load_model_config(m->dir);
  m->generation = load_generation_config(m->dir, m->config);
  tick(1);
  m->tokenizer = Tokenizer::load(m->dir);
  m->chat_template = ChatTemplate::load(m->dir);
  tick(2);
  m->checkpoint = Checkpoint::open(m->dir);
  tick(3);
  m->model = create_model_on(device, m->config, m->checkpoint, tensor_parallel);
  tick(4);
  return m;
}

}  // namespace fs
