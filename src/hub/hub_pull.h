#pragma once
// `foldserve pull`: downloads the files a server needs from a Hugging Face hub into the hub cache layout
// (blobs/ + snapshots/COMMIT/ links + refs/REVISION), resuming partial files and verifying every one.
#include <filesystem>
#include <string>
#include <vector>

#include "hub/pull_progress.h"

namespace fs::hub {

struct PullOptions {
  std::string repo_id;                // ORG/NAME
  std::string revision;               // a branch, tag or commit; "" → main
  std::string endpoint;               // "" → $HF_ENDPOINT, else https://huggingface.co
  std::string token;                  // "" → $HF_TOKEN, else the file `huggingface-cli login` writes
  std::filesystem::path cache_root;   // "" → hub_cache_root()
};

struct PullResult {
  std::filesystem::path snapshot;
  std::string commit;
  int downloaded = 0, cached = 0;
};

// Throws fs::Error naming the model or file at fault: not found, needs a token, disk full, no network, a
// download that fails verification (its bad blob is removed), a connection cut (the partial file is kept).
PullResult pull_model(const PullOptions& options, PullProgress& progress);

// Which of a repo's top-level files a server reads: weights, their index, config, tokenizer, templates.
bool is_needed_file(const std::string& name);
// The token sent to the hub: $HF_TOKEN, else $HF_TOKEN_PATH, else $HF_HOME/token (~/.cache/huggingface/token).
std::string hub_token();
// $HF_ENDPOINT without a trailing '/', else https://huggingface.co.
std::string hub_endpoint();

}  // namespace fs::hub
