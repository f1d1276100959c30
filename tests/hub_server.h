// A stand-in for the Hugging Face Hub, for the tests of `--model ORG/NAME` (io/hub_model.h): an
// HTTP/1.1 server on 127.0.0.1 at an ephemeral port, in a thread of the test process, answering as
// the Hub does for what meshtrain (and huggingface_hub) ask of it:
//   GET  /api/models/ORG/NAME/revision/REV[?blobs=true]  {"sha", "siblings": [{"rfilename", "size",
//        "blobId", "lfs": {"sha256", "size"}}]}; 404 with X-Error-Code RepoNotFound or RevisionNotFound
//   HEAD|GET /ORG/NAME/resolve/REV/FILE  a small file: 200, ETag "<blob id>", X-Repo-Commit; a
//        .safetensors (LFS) file: 302 to /cdn/<sha256> with X-Linked-Etag "<sha256>" and X-Linked-Size
//   GET  /cdn/<sha256>  the bytes, with Range requests (206)
// A gated repository answers its files 401 (X-Error-Code GatedRepo) without "Authorization: Bearer
// <token>"; a file can be served corrupted (one byte changed, the Hub's SHA-256 unchanged) or have
// its first download cut off halfway (the connection closed). Switches for the rest of what a
// client meets: a repository renamed (its old id answers a relative redirect, as the Hub does),
// revisions besides main (refs/pr/1), 503 answers, a HEAD answering for another commit than the
// API listed, a slow CDN, and an API answer padded or replaced. Each connection is answered on a
// thread of its own, so that two clients can download at once. Nothing leaves the loopback.
#pragma once
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace mt::testing {

class FakeHub {
 public:
  struct Repo {
    std::string id;      // ORG/NAME
    std::string commit;  // 40 hex digits; "main" names it
    std::map<std::string, std::string> files;  // name -> bytes
    std::string token;                         // non-empty: gated, this bearer token opens it
    std::set<std::string> corrupt;             // served with one byte changed
    std::set<std::string> cut_once;            // the first full download stops halfway
    std::string renamed_from;                  // an old ORG/NAME answered with 307 to this id
    std::map<std::string, std::string> refs;   // other revisions (a branch, "refs/pr/1") -> commit
    int unavailable = 0;                       // this many requests answered 503 first
    std::set<std::string> other_commit;        // files whose HEAD names another X-Repo-Commit
    std::set<std::string> slow;                // served from the CDN in pieces over ~2 s
    size_t api_padding = 0;                    // bytes of padding added to the API's answer
    std::string api_body;                      // non-empty: the API's answer, as it is
  };

  FakeHub();
  ~FakeHub();
  FakeHub(const FakeHub&) = delete;
  FakeHub& operator=(const FakeHub&) = delete;

  void add(const Repo& repo);
  // http://127.0.0.1:PORT
  std::string endpoint() const;
  // "METHOD TARGET[ range=R]" of every request so far, in order.
  std::vector<std::string> requests() const;
  // "METHOD TARGET" of the requests that carried an Authorization header.
  std::vector<std::string> authorized() const;

  // The Hub's names for a file: a small one's git-style blob id, a large one's SHA-256.
  static std::string sha256(const std::string& bytes);
  static std::string blob_id(const std::string& bytes);
  static bool is_lfs(const std::string& name);

 private:
  void serve();
  void answer(int fd);
  // The repository ORG/NAME at the start of `rest` (by its id or an old one), and what follows it.
  Repo* repo_of(const std::string& rest, std::string* tail, bool* renamed);

  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex mutex_;
  std::map<std::string, Repo> repos_;
  std::map<std::string, std::pair<std::string, std::string>> cdn_;  // sha256 -> (repo id, file)
  std::set<std::string> cut_done_;
  std::vector<std::thread> connections_;  // touched by the serving thread alone
  std::vector<std::string> log_, authorized_;
};

}  // namespace mt::testing
