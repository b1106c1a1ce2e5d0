#pragma once
// The Hugging Face hub cache as the Python tools lay it out: ROOT/models--ORG--NAME/{blobs,refs,snapshots/REV}.
#include <filesystem>
#include <string>

namespace fs {

// $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub.
std::filesystem::path hub_cache_root();
// True for a hub model id of the form ORG/NAME (letters, digits, '-', '_', '.'; no "..", no leading '.').
bool looks_like_repo_id(const std::string& text);
// ROOT/models--ORG--NAME.
std::filesystem::path hub_repo_folder(const std::filesystem::path& root, const std::string& repo_id);
// True for a ref or commit name that stays inside refs/ and snapshots/ (no "..", no leading '/').
bool is_valid_revision(const std::string& revision);
// True for a full 40-hex-digit commit hash.
bool is_commit_hash(const std::string& text);
// The snapshot folder of `revision` ("" → main): refs/REVISION names the commit, else a commit folder under
// snapshots/. Throws fs::Error naming the searched path and suggesting `foldserve pull`.
std::filesystem::path hub_snapshot_dir(const std::filesystem::path& root, const std::string& repo_id,
                                       const std::string& revision);
// What a MODEL argument names: an existing folder as is, else an ORG/NAME in the hub cache, else the argument
// unchanged (the loader then reports the missing folder). `revision` applies to hub names only.
std::filesystem::path resolve_model_location(const std::string& model, const std::string& revision);

}  // namespace fs
