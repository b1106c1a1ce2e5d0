// Image benchmark of a Qwen2.5-VL or Qwen3.5 checkpoint: vision tower time per image (the family's tower, built by
// the server's encoder factory), time to first token of a chat prompt with 1 and with 4 images (the server's
// pipeline of preprocessing and encodes, then prefill through the engine + first greedy token), pinned
// allocations and frees per image in steady state, and device memory, with the tower's weights on the device and
// in pinned host memory (--vision-host); greedy token_sha256 per mode so the modes can be compared. Prints
// figures; never a test.
// Usage: bench_vision (--model DIR | DIR) [--device auto|cpu|cuda] [--image-size WxH] [--images 1,4]
//          [--reply N] [--tower-images N] [--modes device,host] [--vision-host] [--prefill-chunk N] [--threads N]
//        bench_vision --make-like qwen2.5-vl-7b|qwen3.5-27b [--tokenizer-from DIR] [--layers N] [--hidden N]
//          [--intermediate N] [--vision-depth N] [--vision-hidden N] [--vision-heads N] [--vision-intermediate N]
//          DIR ...   (writes it first, the family's tiny fixture tokenizer by default)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "bench_main.h"
#include "cli/args.h"
#include "cli/model_options.h"
#include "core/error.h"
#include "core/files.h"
#include "core/sha256.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "models/checkpoint_maker.h"
#include "models/model.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"
#include "vision/image_pipeline.h"
#include "vision/image_processor.h"
#include "vision/multimodal_prompt.h"
#include "vision/vision_encoder.h"

namespace fs {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
double mib(size_t bytes) { return double(bytes) / double(1 << 20); }

// A deterministic RGB test picture: gradients, a checker and per-image stripes, different for every seed.
vision::RgbImage synthetic_image(int width, int height, int seed) {
  vision::RgbImage img{width, height, std::vector<uint8_t>(size_t(width) * size_t(height) * 3)};
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &img.pixels[(size_t(y) * size_t(width) + size_t(x)) * 3];
      const int checker = ((x / 32) ^ (y / 32)) & 1;
      p[0] = uint8_t((x * 255) / std::max(1, width - 1) ^ (seed * 37));
      p[1] = uint8_t((y * 255) / std::max(1, height - 1) + checker * 64);
      p[2] = uint8_t(((x + y * 3 + seed * 101) / (4 + seed % 5)) * 17);
    }
  return img;
}

// The text model and what builds its prompts.
struct TextSide {
  std::filesystem::path dir;
  ModelConfig config;
  json raw_config;
  std::shared_ptr<Checkpoint> checkpoint;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;      // null when the folder has none
  std::optional<ChatTemplate> chat_template;
  vision::VisionTokenIds vt;
};

// The prompt of `images` images: the chat template's rendering of one user message (image parts, then a question)
// when the folder has a tokenizer and template, else fixed text ids around vision_start/image_pad/vision_end.
vision::MultimodalPrompt build_prompt(const TextSide& t, const std::vector<vision::ImageGrid>& grids,
                                      std::vector<std::vector<float>> features) {
  if (t.tokenizer && t.chat_template) {
    nlohmann::json content = nlohmann::json::array();
    for (size_t i = 0; i < grids.size(); ++i)
      content.push_back({{"type", "image_url"}, {"image_url", {{"url", "bench:" + std::to_string(i)}}}});
    content.push_back({{"type", "text"}, {"text", "Describe these images in detail."}});
    nlohmann::json messages = nlohmann::json::array({{{"role", "user"}, {"content", content}}});
    std::string text = t.chat_template->render(messages, nlohmann::json(nullptr), true);
    return vision::build_multimodal_prompt(text, *t.tokenizer, grids, features, t.vt);
  }
  const int32_t start = t.raw_config.value("vision_start_token_id", -1);
  const int32_t end = t.raw_config.value("vision_end_token_id", -1);
  if (start < 0 || end < 0) throw Error("config.json names no vision_start/vision_end token ids and there is no tokenizer");
  std::vector<int32_t> ids;
  auto text_ids = [&](int n, int salt) {
    for (int k = 0; k < n; ++k) ids.push_back(int32_t((uint64_t(k) * 104729 + uint64_t(salt) * 7919 + 13) % 100000));
  };
  text_ids(20, 1);
  for (size_t i = 0; i < grids.size(); ++i) {
    ids.push_back(start);
    ids.push_back(t.vt.image_pad);
    ids.push_back(end);
  }
  text_ids(12, 2);
  vision::MultimodalPrompt p;
  p.ids = vision::expand_image_pads(ids, grids, t.vt);
  p.mrope_positions = vision::mrope_positions(p.ids, grids, t.vt, p.rope_delta);
  for (auto& f : features) p.image_embeddings.insert(p.image_embeddings.end(), f.begin(), f.end());
  return p;
}

struct TtftResult {
  double preprocess = 0, encode = 0, images = 0, prompt = 0, prefill_first = 0, total = 0;  // preprocess, encode: sums
  size_t prompt_tokens = 0;
  std::vector<int32_t> tokens;
};

// One request: preprocess and encode `count` images, build the prompt, run it through the engine greedily; the
// clock stops at the first generated token, the request runs on to `reply` tokens.
TtftResult time_to_first_token(const TextSide& t, Engine& engine, vision::VisionEncoder& encoder,
                               const vision::ImageProcessorConfig& processor, const std::vector<vision::RgbImage>& imgs,
                               int count, int reply) {
  TtftResult r;
  const auto t0 = Clock::now();
  std::vector<std::vector<float>> features(static_cast<size_t>(count));
  std::vector<vision::ImageGrid> grids(static_cast<size_t>(count));
  std::mutex times_mu;
  // The server's pipeline: image k + 1 prepared on a second thread while the tower encodes image k.
  vision::pipeline_images(
      size_t(count),
      [&](size_t k) {
        const auto p0 = Clock::now();
        vision::PreparedImage prepared = vision::prepare_image(imgs[k % imgs.size()], processor);
        std::lock_guard lock(times_mu);
        r.preprocess += seconds_since(p0);
        return prepared;
      },
      [&](size_t k, vision::PreparedImage& prepared) {
        const auto e0 = Clock::now();
        features[k] = encoder.encode(prepared.patches);
        grids[k] = prepared.patches.grid;
        std::lock_guard lock(times_mu);
        r.encode += seconds_since(e0);
      });
  r.images = seconds_since(t0);
  auto t2 = Clock::now();
  vision::MultimodalPrompt p = build_prompt(t, grids, std::move(features));
  r.prompt = seconds_since(t2);
  r.prompt_tokens = p.ids.size();

  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Clock::time_point first{};
  std::string error;
  GenerationRequest req;
  req.prompt = std::move(p.ids);
  req.mrope_positions = std::move(p.mrope_positions);
  req.rope_delta = p.rope_delta;
  req.image_embeddings = std::move(p.image_embeddings);
  req.max_tokens = reply;
  req.sampling.temperature = 0.0f;  // greedy; no eos ids, so every run has `reply` tokens
  req.on_token = [&](const SampledToken& tok) {
    std::lock_guard lock(mu);
    if (r.tokens.empty()) first = Clock::now();
    r.tokens.push_back(tok.id);
    return true;
  };
  req.on_done = [&](const GenerationResult& g) {
    std::lock_guard lock(mu);
    if (g.reason == FinishReason::Error) error = g.error;
    done = true;
    cv.notify_all();
  };
  auto t3 = Clock::now();
  if (!engine.submit(std::move(req))) throw Error("the engine queue refused the benchmark request");
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return done; });
  if (!error.empty()) throw Error("generation failed: " + error);
  if (r.tokens.empty()) throw Error("the engine generated no token");
  r.prefill_first = std::chrono::duration<double>(first - t3).count();
  r.total = std::chrono::duration<double>(first - t0).count();
  return r;
}

std::string sha_of(const std::vector<int32_t>& ids) {
  Sha256 h;
  h.update(ids.data(), ids.size() * sizeof(int32_t));
  return Sha256::hex(h.finish()).substr(0, 16);
}

std::string first_ids(const std::vector<int32_t>& ids, size_t n) {
  std::string s;
  for (size_t i = 0; i < std::min(n, ids.size()); ++i) {
    if (i) s += ',';
    s += std::to_string(ids[i]);
  }
  return s;
}

struct ModeResult {
  bool ran = false;
  std::vector<int32_t> all_tokens;  // every request's tokens, in order
  std::vector<float> first_features;
  vision::VisionEncoderStats stats;
};

struct Settings {
  int width = 2048, height = 1664, reply = 8, tower_images = 4, reps = 2;
  std::vector<int32_t> image_counts{1, 4};
};

ModeResult run_mode(const TextSide& t, Engine& engine, const vision::VisionTowerConfig& tower_config,
                    const vision::ImageProcessorConfig& processor, const Settings& s, bool on_host, int64_t max_patches) {
  ModeResult out;
  std::printf("\n== mode: %s ==\n", on_host ? "--vision-host (tower weights in pinned host memory)"
                                            : "tower weights resident where the tower runs");
  vision::VisionEncoderOptions eo;
  eo.device = t.model->device_name();
  eo.weights_on_host = on_host;
  eo.max_patches = max_patches;
  auto t0 = Clock::now();
  auto encoder = vision::create_vision_encoder(tower_config, t.checkpoint, eo);
  std::printf("encoder on %s built in %.2f s, %.1f MiB of weights\n", encoder->device_name(), seconds_since(t0),
              mib(encoder->weight_bytes()));
  for (const auto& line : encoder->budget_lines()) std::printf("  budget: %s\n", line.c_str());

  std::vector<vision::RgbImage> images;
  const int distinct = std::max({s.tower_images, 4, 1});
  for (int i = 0; i < distinct; ++i) images.push_back(synthetic_image(s.width, s.height, i + 1));

  // Warm-up image: the first encode may allocate what steady state reuses.
  auto warm = vision::preprocess_image(images[0], processor);
  out.first_features = encoder->encode(warm);
  const auto before = encoder->stats();
  std::vector<double> times;
  for (int i = 0; i < s.tower_images; ++i) {
    auto px = vision::preprocess_image(images[size_t(i) % images.size()], processor);
    auto e0 = Clock::now();
    encoder->encode(px);
    times.push_back(seconds_since(e0));
  }
  const auto after = encoder->stats();
  std::sort(times.begin(), times.end());
  const double images_run = double(std::max(1, s.tower_images));
  if (!times.empty())
    std::printf("tower: %.1f ms per %dx%d image (median of %d; min %.1f, max %.1f; encoder's last %.1f ms)\n",
                times[times.size() / 2] * 1e3, s.width, s.height, s.tower_images, times.front() * 1e3,
                times.back() * 1e3, after.last_encode_ms);
  std::printf("pinned per image in steady state: %.2f allocations, %.2f frees (after warm-up; totals %llu/%llu)\n",
              double(after.pinned_allocations - before.pinned_allocations) / images_run,
              double(after.pinned_frees - before.pinned_frees) / images_run,
              (unsigned long long)after.pinned_allocations, (unsigned long long)after.pinned_frees);

  for (int32_t count : s.image_counts) {
    TtftResult last;
    std::vector<double> totals;
    for (int rep = 0; rep < s.reps; ++rep) {
      last = time_to_first_token(t, engine, *encoder, processor, images, count, s.reply);
      totals.push_back(last.total);
      out.all_tokens.insert(out.all_tokens.end(), last.tokens.begin(), last.tokens.end());
    }
    std::printf("ttft %d image%s: %.3f s (last of %d: preprocess %.3f + encode %.3f overlapped in %.3f, prompt %.3f, "
                "prefill + first token %.3f; first run %.3f s)  prompt %zu tokens  first tokens %s  token_sha256 %s\n",
                count, count == 1 ? "" : "s", last.total, s.reps, last.preprocess, last.encode, last.images,
                last.prompt, last.prefill_first, totals.front(), last.prompt_tokens, first_ids(last.tokens, 8).c_str(),
                sha_of(last.tokens).c_str());
    std::fflush(stdout);
  }
  const auto end = encoder->stats();
  std::printf("pinned over the whole mode: %llu allocations, %llu frees for %llu images\n",
              (unsigned long long)end.pinned_allocations, (unsigned long long)end.pinned_frees,
              (unsigned long long)end.images);
  std::printf("memory: text weights %.1f MiB (%s); tower weights on device %.1f MiB, slot %.1f MiB, scratch %.1f "
              "MiB, pinned stage %.1f MiB, host weights %.1f MiB%s\n",
              mib(t.model->weight_bytes()), t.model->device_name(), mib(end.device_weight_bytes),
              mib(end.device_slot_bytes), mib(end.device_scratch_bytes), mib(end.pinned_stage_bytes),
              mib(end.host_weight_bytes), on_host ? " (pinned)" : "");
  std::printf("mode token_sha256 %s\n", sha_of(out.all_tokens).c_str());
  out.stats = end;
  out.ran = true;
  return out;
}

TextSide load_text(const std::filesystem::path& dir, const std::string& device) {
  TextSide t;
  t.dir = dir;
  t.config = load_model_config(dir);
  t.raw_config = read_json_file(dir / "config.json");
  if (t.config.vision.is_null()) throw Error(dir.string() + " has no vision_config: not a vision-language model");
  t.checkpoint = Checkpoint::open(dir);
  std::error_code ec;
  if (std::filesystem::exists(dir / "tokenizer.json", ec)) {
    t.tokenizer = Tokenizer::load(dir);
    t.chat_template = ChatTemplate::load(dir);
    t.vt = vision::VisionTokenIds::from(t.config, *t.tokenizer);
  } else {
    if (t.config.image_token_id < 0) throw Error("config.json has no image_token_id and the folder no tokenizer");
    t.vt.image_pad = t.config.image_token_id;
    t.vt.spatial_merge_size = t.config.vision.value("spatial_merge_size", 2);
  }
  auto start = Clock::now();
  t.model = create_model_on(device, t.config, t.checkpoint);
  std::printf("%s on %s loaded in %.1f s: %d layers, hidden %d, %.1f MiB of weights\n",
              t.config.architecture.c_str(), t.model->device_name(), seconds_since(start), t.config.num_layers,
              t.config.hidden_size, mib(t.model->weight_bytes()));
  return t;
}

// The preset's config with the size flags applied.
json sized_preset(const std::string& like, const cli::Args& args) {
  json config = preset_config(like);
  apply_overrides(config, cli::size_overrides_from_args(args));
  return config;
}

// The family's tiny fixture, whose tokenizer and chat template the written checkpoint takes; empty when absent.
std::filesystem::path fixture_tokenizer(const json& config) {
  const bool qwen3_5 = config.at("architectures").at(0) == "Qwen3_5ForConditionalGeneration";
  const auto dir = std::filesystem::path(FOLDSERVE_SOURCE_DIR) / "../shared/models" /
                   (qwen3_5 ? "tiny-qwen3.5-vl" : "tiny-qwen2.5-vl");
  std::error_code ec;
  return std::filesystem::exists(dir / "tokenizer.json", ec) ? dir : std::filesystem::path();
}

// The config's image, video and vision start/end ids become the ids the copied tokenizer gives those tokens, so the
// chat template's `<|image_pad|>` is the id the prompt code expands.
void take_tokenizer_ids(json& config, const std::filesystem::path& tokenizer_dir) {
  auto tok = Tokenizer::load(tokenizer_dir);
  for (auto [key, token] : {std::pair{"image_token_id", "<|image_pad|>"}, {"video_token_id", "<|video_pad|>"},
                            {"vision_start_token_id", "<|vision_start|>"}, {"vision_end_token_id", "<|vision_end|>"}})
    if (auto id = tok->token_to_id(token); id && config.contains(key)) config[key] = *id;
}

// Writes a random checkpoint of preset `like` (sized by the flags) into `dir`.
void make_like(const std::string& like, const cli::Args& args, const std::filesystem::path& dir) {
  json config = sized_preset(like, args);
  if (!config.contains("vision_config")) throw Error("--make-like " + like + ": the preset has no vision tower");
  MakeCheckpointOptions mo;
  mo.seed = uint64_t(args.get_int("seed", 1));
  mo.tokenizer_from = args.get_or("tokenizer-from", fixture_tokenizer(config).string());
  if (!mo.tokenizer_from.empty()) take_tokenizer_ids(config, mo.tokenizer_from);
  auto t = Clock::now();
  make_checkpoint(config, dir, mo);
  const json& text = config.contains("text_config") ? config["text_config"] : config;
  std::printf("checkpoint %s (like %s, %d layers, hidden %d, tower depth %d, tokenizer %s) written in %.1f s\n",
              dir.c_str(), like.c_str(), int(text["num_hidden_layers"]), int(text["hidden_size"]),
              int(config["vision_config"]["depth"]),
              mo.tokenizer_from.empty() ? "none: synthetic prompt ids" : mo.tokenizer_from.c_str(), seconds_since(t));
}

int bench(int argc, char** argv) {
  std::vector<std::string> argv_s(argv + 1, argv + argc);
  cli::Args args(argv_s,
                 {"model", "device", "image-size", "images", "reply", "tower-images", "reps", "modes", "make-like",
                  "tokenizer-from", "layers", "hidden", "intermediate", "vision-depth", "vision-hidden", "vision-heads",
                  "vision-intermediate", "prefill-chunk", "threads", "seed"},
                 {"vision-host"});
  if (auto th = args.get("threads")) setenv("FOLDSERVE_THREADS", th->c_str(), 1);
  std::filesystem::path dir = args.get_or("model", args.positionals().empty() ? "" : args.positionals()[0]);
  if (dir.empty()) throw Error("usage: bench_vision (--model DIR | [--make-like NAME] DIR) [options]");
  if (auto like = args.get("make-like")) make_like(*like, args, dir);
  Settings s;
  const std::string size = args.get_or("image-size", "2048x1664");
  if (std::sscanf(size.c_str(), "%dx%d", &s.width, &s.height) != 2 || s.width <= 0 || s.height <= 0)
    throw Error("--image-size must be WIDTHxHEIGHT (got '" + size + "')");
  s.reply = std::max(1, int(args.get_int("reply", 8)));
  s.tower_images = std::max(1, int(args.get_int("tower-images", 4)));
  s.reps = std::max(1, int(args.get_int("reps", 2)));
  s.image_counts = cli::parse_id_list(args.get_or("images", "1,4"));
  for (int32_t n : s.image_counts)
    if (n <= 0) throw Error("--images takes positive counts");
  std::string modes = args.has("vision-host") ? "host" : args.get_or("modes", "device,host");

  TextSide t = load_text(dir, args.get_or("device", "auto"));
  const auto tower_config = vision::VisionTowerConfig::from_json(t.config.vision, (dir / "config.json").string());
  const auto processor =
      vision::ImageProcessorConfig::load(dir, vision::family_image_backend(t.config.architecture));
  const vision::ImageGrid grid = vision::grid_for_size(s.width, s.height, processor);
  const int64_t tokens_per_image = grid.patches() / tower_config.merge_unit();
  // The encoder is sized as the server sizes it: for the largest image the processor admits.
  const int64_t max_patches = vision::max_image_patches(processor);
  std::printf("threads %d; image %dx%d -> grid %dx%dx%d: %lld patches, %lld image tokens; encoder sized for %lld "
              "patches (max_pixels %lld); prompt %s\n",
              ThreadPool::global().size(), s.width, s.height, grid.t, grid.h, grid.w, (long long)grid.patches(),
              (long long)tokens_per_image, (long long)max_patches, (long long)processor.max_pixels,
              t.chat_template ? "from the chat template" : "of synthetic text ids");

  const int most = *std::max_element(s.image_counts.begin(), s.image_counts.end());
  EngineOptions eo;
  eo.parallel = 1;
  eo.queue_limit = 1;
  eo.context = int(tokens_per_image * most) + 256 + s.reply;
  eo.prefill_chunk = int(args.get_int("prefill-chunk", 4096));
  eo.round_tokens = eo.prefill_chunk;
  Engine engine(*t.model, eo);
  std::printf("engine: context %d, prefill chunk %d, prompt cache off\n", eo.context, eo.prefill_chunk);

  ModeResult device_mode, host_mode;
  if (modes.find("device") != std::string::npos)
    device_mode = run_mode(t, engine, tower_config, processor, s, false, max_patches);
  if (modes.find("host") != std::string::npos) {
    if (std::string(t.model->device_name()) == "cpu")
      std::printf("\n== mode: --vision-host ==\nnot applicable: the tower runs on the CPU, its weights are already "
                  "in host memory\n");
    else
      host_mode = run_mode(t, engine, tower_config, processor, s, true, max_patches);
  }
  if (device_mode.ran && host_mode.ran) {
    double diff = 0;
    const bool same_size = device_mode.first_features.size() == host_mode.first_features.size();
    for (size_t i = 0; same_size && i < device_mode.first_features.size(); ++i)
      diff = std::max(diff, double(std::fabs(device_mode.first_features[i] - host_mode.first_features[i])));
    std::printf("\ncomparison: token_sha256 %s vs %s: %s; features of the warm-up image: %s, max |diff| %g; device "
                "memory saved by --vision-host %.1f MiB (weights %.1f MiB resident vs a %.1f MiB slot)\n",
                sha_of(device_mode.all_tokens).c_str(), sha_of(host_mode.all_tokens).c_str(),
                device_mode.all_tokens == host_mode.all_tokens ? "EQUAL" : "DIFFERENT",
                same_size ? "same size" : "SIZES DIFFER", diff,
                mib(device_mode.stats.device_weight_bytes) - mib(host_mode.stats.device_slot_bytes),
                mib(device_mode.stats.device_weight_bytes), mib(host_mode.stats.device_slot_bytes));
  }
  return 0;
}

}  // namespace
}  // namespace fs

int main(int argc, char** argv) { return fs::run_bench("bench_vision", fs::bench, argc, argv); }
