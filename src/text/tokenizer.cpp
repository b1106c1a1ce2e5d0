#include "text/tokenizer.h"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/files.h"
#include "text/tokenizer_hf.h"
#include "text/tokenizer_json.h"
#include "text/utf8.h"

namespace fs {
namespace text {
namespace {

std::optional<std::string> optional_string(const nlohmann::json& obj, const char* key) {
  if (!obj.contains(key) || obj.at(key).is_null()) return std::nullopt;
  return obj.at(key).get<std::string>();
}

std::unique_ptr<BpeModel> build_model(TokenizerFile& file) {
  const auto& spec = file.fields.at("model");
  std::string type = spec.value("type", "BPE");
  if (type != "BPE") throw Error("unsupported tokenizer model type '" + type + "' (only BPE)");
  if (!file.has_vocab) throw Error("model.vocab is missing or not an object");
  if (spec.contains("dropout") && !spec.at("dropout").is_null() && spec.at("dropout").get<double>() != 0.0)
    throw Error("BPE dropout is not supported for inference");
  BpeOptions options;
  options.unk_token = optional_string(spec, "unk_token");
  options.continuing_subword_prefix = optional_string(spec, "continuing_subword_prefix").value_or("");
  options.end_of_word_suffix = optional_string(spec, "end_of_word_suffix").value_or("");
  options.fuse_unk = spec.value("fuse_unk", false);
  options.byte_fallback = spec.value("byte_fallback", false);
  options.ignore_merges = spec.value("ignore_merges", false);
  auto model = std::make_unique<BpeModel>(std::move(options));
  model->vocab() = std::move(file.vocab);
  model->reserve_merges(file.merges.size());
  for (const auto& m : file.merges) model->add_merge(file.left(m), file.right(m));
  model->finish();
  return model;
}

// Reads a whole file into a string sized once.
std::string read_whole_file(const std::filesystem::path& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw Error("cannot open " + path.string());
  std::string data;
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  if (!ec) data.resize(size);
  size_t got = ec ? 0 : std::fread(data.data(), 1, data.size(), f);
  bool bad = std::ferror(f) || got != data.size();
  std::fclose(f);
  if (bad || ec) throw Error("cannot read " + path.string());
  return data;
}

}  // namespace

HfTokenizer::HfTokenizer(std::string_view tokenizer_json, const std::string& origin) {
  TokenizerFile file = parse_tokenizer_json(tokenizer_json, origin);
  try {
    if (!file.fields.contains("model")) throw Error("no model");
    model_ = build_model(file);
    const auto& f = file.fields;
    normalizer_ = make_normalizer(f.value("normalizer", nlohmann::json()));
    pre_tokenizer_ = make_pre_tokenizer(f.value("pre_tokenizer", nlohmann::json()));
    post_processor_ = make_post_processor(f.value("post_processor", nlohmann::json()));
    decoder_ = make_decoder(f.value("decoder", nlohmann::json()));
    vocab_size_ = model_->vocab().id_bound();
    if (f.contains("added_tokens") && !f.at("added_tokens").is_null()) {
      for (const auto& t : f.at("added_tokens")) {
        AddedToken tok;
        tok.content = t.at("content").get<std::string>();
        tok.id = t.at("id").get<int32_t>();
        tok.special = t.value("special", false);
        tok.single_word = t.value("single_word", false);
        tok.lstrip = t.value("lstrip", false);
        tok.rstrip = t.value("rstrip", false);
        tok.normalized = t.value("normalized", !tok.special);
        vocab_size_ = std::max(vocab_size_, tok.id + 1);
        added_.add(std::move(tok));
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(origin + ": " + e.what());
  } catch (const Error& e) {
    throw Error(origin + ": " + e.what());
  }
}

std::vector<int32_t> HfTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  return encode_literal(text, {}, add_special_tokens);
}

std::vector<int32_t> HfTokenizer::encode_literal(std::string_view text,
                                                 const std::vector<std::pair<size_t, size_t>>& literal,
                                                 bool add_special_tokens) const {
  std::vector<Piece> pieces;
  Piece whole{repair_utf8(text), -1, true};
  // Byte offsets hold only when repairing changed nothing; a repaired text keeps no literal ranges.
  if (literal.empty() || whole.text.size() != text.size()) {
    pieces.push_back(std::move(whole));
    added_.split(pieces, false);
  } else {
    added_.split_outside(whole, literal, pieces);
  }
  if (normalizer_)
    for (auto& p : pieces)
      if (p.id < 0) normalizer_->normalize(p.text);
  if (added_.has_normalized()) added_.split(pieces, true);
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  PieceSink to_model = [&](Piece&& p) { model_->tokenize(p.text, ids); };
  for (auto& p : pieces) {
    if (p.id >= 0) ids.push_back(p.id);
    else if (p.text.empty()) continue;
    else if (pre_tokenizer_) pre_tokenizer_->split(std::move(p), to_model);
    else model_->tokenize(p.text, ids);
  }
  if (add_special_tokens && post_processor_) post_processor_->process(ids);
  return ids;
}

std::string HfTokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (const AddedToken* added = added_.by_id(id)) {
      if (!(skip_special_tokens && added->special)) tokens.push_back(added->content);
    } else if (auto t = model_->vocab().text(id)) {
      tokens.emplace_back(*t);
    }
  }
  if (!decoder_) {
    std::string out;
    for (size_t k = 0; k < tokens.size(); ++k) {
      if (k) out += ' ';
      out += tokens[k];
    }
    return out;
  }
  decoder_->decode_chain(tokens);
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

std::optional<int32_t> HfTokenizer::token_to_id(std::string_view token) const {
  if (const AddedToken* added = added_.by_content(token)) return added->id;
  return model_->vocab().find(token);
}

std::string HfTokenizer::id_to_token(int32_t id) const {
  if (const AddedToken* added = added_.by_id(id)) return added->content;
  if (auto t = model_->vocab().text(id)) return std::string(*t);
  return "";
}

bool HfTokenizer::is_special(int32_t id) const {
  const AddedToken* added = added_.by_id(id);
  return added && added->special;
}

}  // namespace text

namespace {

// A token string in tokenizer_config.json: a string, an AddedToken object, or null.
std::string config_token(const json& config, const char* key) {
  if (!config.contains(key)) return "";
  const auto& v = config.at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v.at("content").is_string()) return v.at("content").get<std::string>();
  return "";
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::load(const std::filesystem::path& dir) {
  auto path = dir / "tokenizer.json";
  if (!std::filesystem::exists(path)) throw Error("no tokenizer.json in " + dir.string());
  std::string text = text::read_whole_file(path);
  auto tok = std::make_unique<text::HfTokenizer>(text, path.string());
  auto config_path = dir / "tokenizer_config.json";
  if (std::filesystem::exists(config_path)) {
    json config = read_json_file(config_path);
    if (config.is_object()) tok->set_bos_eos(config_token(config, "bos_token"), config_token(config, "eos_token"));
  }
  return tok;
}

}  // namespace fs
