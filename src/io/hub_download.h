// Downloads a model from the Hugging Face Hub (or the server $HF_ENDPOINT names) into
// huggingface_hub's cache layout (io/hub_cache.h), with libcurl. The files meshtrain reads are
// fetched, nothing else: config.json, generation_config.json, the tokenizer's files, the chat
// template and model*.safetensors with their index; never .bin, .pt, .gguf or .h5 weights.
//
// Each file: a HEAD of <endpoint>/<id>/resolve/<commit>/<file> gives its etag (X-Linked-Etag or
// ETag) and size (X-Linked-Size or Content-Length) as huggingface_hub reads them; its bytes go to
// blobs/<etag>.incomplete, resumed with a Range request after a dropped connection (here and in a
// later run), are checked (size, and the SHA-256 of a large file against the Hub's) and only then
// renamed into blobs/<etag>. The snapshot's symlinks and refs/<revision> are written after every
// file is in, so a failed download never leaves a snapshot that looks complete.
// $HF_TOKEN (or the token file huggingface-cli login writes) is sent as a bearer token: gated
// and private models need one.
#pragma once
#include <filesystem>
#include <string>

namespace mt::hub {

// False when meshtrain was built without libcurl: resolution from the cache still works.
bool download_compiled_in();

// Downloads `id` at `revision` (a branch, tag or commit) into `repo` (hub_cache.h's repo_dir);
// `config_only`: config.json alone (what the planner reads). Returns the commit.
// mt::Error, one line, naming the id, for every failure (unreachable server, gated model, no
// such model or revision, a corrupted transfer).
std::string download_snapshot(const std::string& id, const std::string& revision,
                              const std::filesystem::path& repo, bool config_only);

}  // namespace mt::hub
