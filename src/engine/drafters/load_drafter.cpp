#include "engine/drafters/load_drafter.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "engine/drafters/model_drafter.h"
#include "engine/drafters/ngram_drafter.h"
#include "engine/memory_budget.h"

namespace fs {

namespace {

std::string ids_text(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
  return s + "]";
}

}  // namespace

void check_same_tokenizer(const LoadedModel& target, const LoadedModel& drafter) {
  const std::string who = "drafter " + drafter.name + " does not share the tokenizer of " + target.name + ": ";
  const Tokenizer& a = *target.tokenizer;
  const Tokenizer& b = *drafter.tokenizer;
  if (a.vocab_size() != b.vocab_size())
    throw Error(who + "tokenizer vocabulary of " + std::to_string(b.vocab_size()) + " vs " +
                std::to_string(a.vocab_size()) + " tokens");
  // The embeddings may be padded differently (Qwen2.5-0.5B has 151936 rows, Qwen2.5-7B 152064, one tokenizer); every
  // token must have a row in the drafter.
  if (drafter.config.vocab_size < b.vocab_size())
    throw Error("drafter " + drafter.name + " has " + std::to_string(drafter.config.vocab_size) +
                " embedding rows for a tokenizer of " + std::to_string(b.vocab_size()) + " tokens");
  for (int32_t id = 0; id < a.vocab_size(); ++id) {
    if (a.id_to_token(id) != b.id_to_token(id) || a.is_special(id) != b.is_special(id))
      throw Error(who + "token " + std::to_string(id) + " is '" + b.id_to_token(id) + "' vs '" + a.id_to_token(id) +
                  "'");
  }
  if (a.bos_token() != b.bos_token() || a.eos_token() != b.eos_token())
    throw Error(who + "special tokens bos/eos '" + b.bos_token() + "'/'" + b.eos_token() + "' vs '" + a.bos_token() +
                "'/'" + a.eos_token() + "'");
  if (drafter.config.eos_ids != target.config.eos_ids)
    throw Error(who + "eos ids " + ids_text(drafter.config.eos_ids) + " vs " + ids_text(target.config.eos_ids));
  if (drafter.config.bos_id != target.config.bos_id) throw Error(who + "different bos id");
}

int whole_context_pages(int streams, int context) { return streams * ((context + 15) / 16) + streams; }

int drafter_pool_pages(size_t drafter_page_bytes, size_t target_page_bytes, int streams, int context,
                       size_t free_bytes) {
  streams = std::max(streams, 1);
  const long long full = whole_context_pages(streams, context);
  const double share = double(drafter_page_bytes) / double(std::max<size_t>(drafter_page_bytes + target_page_bytes, 1));
  const long long fits = (long long)(share * double(free_bytes) / double(std::max<size_t>(drafter_page_bytes, 1)));
  return int(std::clamp<long long>(std::min(full, fits), streams, 1ll << 30));
}

std::shared_ptr<Drafter> load_drafter(const std::string& spec, const LoadedModel& target, int streams, int context) {
  if (spec == "ngram") return std::make_shared<NgramDrafter>();
  const std::string device = target.model->device_name();
  const auto free_before = target.model->device_memory_free();
  auto draft = load_model(spec, {}, device);
  check_same_tokenizer(target, *draft);
  const size_t page_bytes = draft->model->kv_page_bytes(16);
  const auto free = target.model->device_memory_free();
  const int full = whole_context_pages(streams, context);
  const int pages = drafter_pool_pages(page_bytes, target.model->kv_page_bytes(16), streams, context,
                                       free ? *free : available_ram_bytes());
  const std::string capped = pages < full ? ", its share of the memory left; every stream's whole context would take " +
                                                std::to_string(full) + " pages"
                                          : "";
  std::fprintf(stderr, "drafter: %s on the %s (%.1f MiB of weights, %d K/V pages, %.1f MiB%s)\n", draft->name.c_str(),
               device.c_str(), double(draft->model->weight_bytes()) / double(1 << 20), pages,
               double(size_t(pages) * page_bytes) / double(1 << 20), capped.c_str());
  std::string name = draft->name;
  auto drafter = std::make_shared<ModelDrafter>(std::move(draft->model), name, pages);
  if (!drafter->model().kv_on_host()) {
    drafter->reserve(streams);
    const auto free_after = target.model->device_memory_free();
    if (free_before && free_after && *free_before > *free_after) drafter->set_device_bytes(*free_before - *free_after);
  }
  return drafter;
}

}  // namespace fs
