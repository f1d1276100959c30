// Where huggingface_hub keeps a model, so that meshtrain finds what `huggingface-cli download` (or
// transformers) put there, and puts what it downloads where they look:
//   <cache>/models--ORG--NAME/refs/<revision>        the commit the revision named, as text
//   <cache>/models--ORG--NAME/snapshots/<commit>/<file>  a relative symlink to ../../blobs/<etag>
//   <cache>/models--ORG--NAME/blobs/<etag>           the bytes; <etag>.incomplete while downloading
// <etag> is the SHA-256 of a large (LFS) file, the git blob id of a small one.
#pragma once
#include <filesystem>
#include <optional>
#include <string>

namespace mt::hub {

// ORG/NAME with the Hub's characters (letters, digits, '-', '_', '.'), neither part a dot
// directory: what users of transformers pass as a model name.
bool is_hub_id(const std::string& s);

// 40 lowercase hex digits: a revision that is already a commit.
bool is_commit_hash(const std::string& s);

// The cache directory by huggingface_hub's rules: $HF_HUB_CACHE (or the older
// $HUGGINGFACE_HUB_CACHE), else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub. A leading "~/" is the home directory, as Python's expanduser reads it.
std::filesystem::path cache_dir();

// <cache>/models--ORG--NAME
std::filesystem::path repo_dir(const std::filesystem::path& cache, const std::string& id);

// The commit `revision` names in `repo`: refs/<revision>'s text, or the revision itself when it is a
// commit hash; nullopt when neither is there.
std::optional<std::string> cached_commit(const std::filesystem::path& repo, const std::string& revision);

// HF_HUB_OFFLINE set to 1, true, yes or on (any case), as huggingface_hub reads it.
bool offline();

}  // namespace mt::hub
