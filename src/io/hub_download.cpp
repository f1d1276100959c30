#include "io/hub_download.h"

#include "core/error.h"

#ifndef MESHTRAIN_HAVE_CURL

namespace mt::hub {

bool download_compiled_in() { return false; }

std::string download_snapshot(const std::string& id, const std::string&, const std::filesystem::path&, bool) {
  fail("'" + id + "' is not in the Hugging Face cache, and this meshtrain was built without libcurl, so it "
       "cannot download it: install libcurl4-openssl-dev and rebuild, or download it with `huggingface-cli "
       "download " + id + "`");
}

}  // namespace mt::hub

#else

#include <curl/curl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include "core/atomic_file.h"
#include "core/bounded_json.h"
#include "core/file_lock.h"
#include "io/hub_cache.h"
#include "io/hub_sha256.h"

namespace mt::hub {

namespace fs = std::filesystem;

bool download_compiled_in() { return true; }

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string endpoint() {
  std::string e = env("HF_ENDPOINT").empty() ? "https://huggingface.co" : env("HF_ENDPOINT");
  while (!e.empty() && e.back() == '/') e.pop_back();
  return e;
}

// $HF_TOKEN, else the file `huggingface-cli login` writes ($HF_TOKEN_PATH, else <HF_HOME>/token).
std::string token() {
  if (!env("HF_TOKEN").empty()) return env("HF_TOKEN");
  if (!env("HUGGING_FACE_HUB_TOKEN").empty()) return env("HUGGING_FACE_HUB_TOKEN");
  fs::path file = env("HF_TOKEN_PATH");
  if (file.empty()) {
    const fs::path home = !env("HF_HOME").empty() ? fs::path(env("HF_HOME"))
                          : !env("XDG_CACHE_HOME").empty()
                              ? fs::path(env("XDG_CACHE_HOME")) / "huggingface"
                              : fs::path(env("HOME")) / ".cache" / "huggingface";
    file = home / "token";
  }
  std::ifstream in(file);
  std::string t;
  std::getline(in, t);
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  return t;
}

// Percent-encoding of everything but RFC 3986's unreserved characters (and '/' where it separates
// a file's directories): a revision "refs/pr/1" is one path segment of the API's URL.
std::string quoted(const std::string& s, bool keep_slash) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) out += char(c);
    else out += '%', out += hex[c >> 4], out += hex[c & 15];
  }
  return out;
}

// "W/\"abc\"" -> "abc": the etag as huggingface_hub names the blob.
std::string bare_etag(std::string e) {
  if (e.rfind("W/", 0) == 0) e = e.substr(2);
  e.erase(std::remove(e.begin(), e.end(), '"'), e.end());
  return e;
}

struct Response {
  long status = 0;
  std::map<std::string, std::string> headers;  // the last response's, names lowercase
  std::string body;                            // a page's text, or an error's
  CURLcode code = CURLE_OK;
  std::string error;                           // curl's words when `code` is not OK
  bool too_large = false;                      // the page passed max_page() and was cut off
};

// One request. `file`: where a 2xx body goes (else into `body`), `offset` bytes of it already there.
struct Request {
  std::string url;
  bool head = false;
  bool follow = true;
  FILE* file = nullptr;
  int64_t offset = 0;
  // Progress: the file's name and total size for the bar (empty: no bar).
  std::string label;
  int64_t total = 0;
};

struct Transfer {
  const Request* req;
  Response* resp;
  CURL* curl;
  bool truncated = false;  // a 200 answered a range request: the whole file comes again
  std::chrono::steady_clock::time_point last_bar{};
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) t->resp->headers.clear();  // a redirect's headers make way
  const size_t colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon), value = line.substr(colon + 1);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    while (!value.empty() && std::isspace(static_cast<unsigned char>(value.front()))) value.erase(0, 1);
    while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) value.pop_back();
    t->resp->headers[name] = value;
  }
  return size * n;
}

// An API answer or an error page is held in memory up to the Hub API's JSON limit (a model's
// files go to disk); a longer one is cut off there and refused, never parsed.
size_t max_page() { return json_limits(JsonKind::hub_api).max_bytes; }

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  long status = 0;
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
  if (t->req->file && status / 100 == 2) {
    if (status == 200 && t->req->offset > 0 && !t->truncated) {
      // The server ignored the Range: start the file again.
      if (ftruncate(fileno(t->req->file), 0) != 0 || fseek(t->req->file, 0, SEEK_SET) != 0) return 0;
      t->truncated = true;
    }
    return fwrite(data, 1, size * n, t->req->file);
  }
  if (t->resp->body.size() + size * n > max_page()) {
    t->resp->too_large = true;
    return 0;
  }
  t->resp->body.append(data, size * n);
  return size * n;
}

std::string megabytes(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MB", double(bytes) / 1e6);
  return buf;
}

int on_progress(void* user, curl_off_t, curl_off_t now, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  const auto clock = std::chrono::steady_clock::now();
  if (clock - t->last_bar < std::chrono::milliseconds(200)) return 0;
  t->last_bar = clock;
  const int64_t done = (t->truncated ? 0 : t->req->offset) + int64_t(now), total = t->req->total;
  const int width = 30, filled = total > 0 ? int(std::min<int64_t>(width, done * width / total)) : 0;
  std::fprintf(stderr, "\r%s [%s%s] %s / %s ", t->req->label.c_str(), std::string(size_t(filled), '#').c_str(),
               std::string(size_t(width - filled), '.').c_str(), megabytes(done).c_str(), megabytes(total).c_str());
  return 0;
}

Response perform(const Request& req) {
  Response resp;
  CURL* curl = curl_easy_init();
  if (!curl) fail("libcurl could not start a transfer");
  Transfer t{&req, &resp, curl};
  char error[CURL_ERROR_SIZE] = "";
  curl_slist* headers = nullptr;
  const std::string tok = token();
  if (!tok.empty()) headers = curl_slist_append(headers, ("Authorization: Bearer " + tok).c_str());
  // libcurl (7.58 on) sends none of these to another host after a redirect, so the token never
  // reaches the CDN the Hub sends a large file's download to.
  if (req.offset > 0) headers = curl_slist_append(headers, ("Range: bytes=" + std::to_string(req.offset) + "-").c_str());
  curl_easy_setopt(curl, CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "meshtrain");
  curl_easy_setopt(curl, CURLOPT_NOBODY, req.head ? 1L : 0L);
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, req.follow ? 1L : 0L);
  curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 20L);
  // A stalled transfer (under 1 byte/s for 60 s) is an error, resumed like a dropped one.
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t);
  if (!req.label.empty() && isatty(STDERR_FILENO)) {
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &t);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  }
  resp.code = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &resp.status);
  if (resp.code != CURLE_OK) resp.error = error[0] ? error : curl_easy_strerror(resp.code);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  return resp;
}

// "HTTP 503", or curl's words for a transfer that got no answer.
std::string described(const Response& r) {
  return r.code != CURLE_OK ? r.error : "HTTP " + std::to_string(r.status);
}

// Tries of one request before giving up: huggingface_hub's count. The waits between them double
// from $MESHTRAIN_HUB_RETRY_WAIT seconds (default 1) up to 8 times that: 1+2+4+8 s in all.
constexpr int kTries = 5;

double first_wait_s() {
  const std::string v = env("MESHTRAIN_HUB_RETRY_WAIT");
  if (v.empty()) return 1.0;
  char* end = nullptr;
  const double s = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0' || !(s >= 0 && s <= 3600))
    fail("MESHTRAIN_HUB_RETRY_WAIT='" + v.substr(0, 40) + "' is not a number of seconds from 0 to 3600");
  return s;
}

// After failed try `tried` (1-based): says so and waits.
void wait_to_retry(const std::string& id, const std::string& what, const Response& r, int tried,
                   const char* again = "trying again") {
  const double s = first_wait_s() * double(1 << std::min(tried - 1, 3));
  std::fprintf(stderr, "meshtrain: %s %s: %s; %s in %g s (try %d of %d)\n", id.c_str(), what.c_str(),
               described(r).c_str(), again, s, tried + 1, kTries);
  std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

// Worth another try: a server error or rate limit (5xx, 429), or a transfer cut short. Cannot
// connect / cannot resolve count only when `connect_errors` (the server answered moments ago):
// at the first request they mean the network or HF_ENDPOINT is wrong, said at once.
bool transient(const Response& r, bool connect_errors) {
  if (r.too_large) return false;
  if (r.code == CURLE_OK) return r.status / 100 == 5 || r.status == 429;
  switch (r.code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
      return connect_errors;
    case CURLE_PARTIAL_FILE:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
      return true;
    default:
      return false;
  }
}

// A request with no file to write, tried up to kTries times while it fails transiently.
Response perform_retrying(const Request& req, const std::string& id, const std::string& what, bool connect_errors) {
  for (int tried = 1;; ++tried) {
    Response r = perform(req);
    if (tried == kTries || !transient(r, connect_errors)) return r;
    wait_to_retry(id, what, r, tried);
  }
}

[[noreturn]] void gave_up(const std::string& id, const std::string& what, const Response& r) {
  fail("'" + id + "': " + endpoint() + " failed " + std::to_string(kTries) + " times in a row for " + what + " (" +
       described(r) + ", the last time): the server is down or overloaded; run again later (what was downloaded "
       "is kept and resumed)");
}

// The id's error for a refused request: gated, missing, or the server's own status.
[[noreturn]] void refused(const std::string& id, const std::string& revision, const std::string& what,
                          const Response& r) {
  if (r.too_large)
    fail("'" + id + "': " + endpoint() + "'s answer for " + what + " is over the " +
         std::to_string(max_page() >> 20) + " MiB limit for " + json_limits(JsonKind::hub_api).name +
         ": is HF_ENDPOINT a Hugging Face Hub?");
  const std::string code = r.headers.count("x-error-code") ? r.headers.at("x-error-code") : "";
  if (r.status == 401 || r.status == 403) {
    fail("'" + id + "': the Hub refused access (HTTP " + std::to_string(r.status) + ") to " + what + ": " +
         (token().empty() ? "a gated or private model needs a token: set HF_TOKEN to an access token of an account "
                            "that was granted access (huggingface.co/settings/tokens)"
                          : "the token in HF_TOKEN was refused: is it valid, and was its account granted access to "
                            "this gated model?"));
  }
  if (r.status == 404 && code == "RevisionNotFound")
    fail("'" + id + "' has no revision '" + revision + "' on " + endpoint() +
         ": --revision takes a branch, a tag, a commit or refs/pr/N of that repository");
  if (r.status == 404 && (code == "RepoNotFound" || what == "its file list"))
    fail("'" + id + "': no such model on " + endpoint() + " (HTTP 404): check the id's spelling (ORG/NAME as " +
         "its page on the Hub shows it)");
  fail("'" + id + "': " + endpoint() + " answered HTTP " + std::to_string(r.status) + " for " + what);
}

[[noreturn]] void unreachable(const std::string& id, const fs::path& repo, const Response& r) {
  const bool custom = !env("HF_ENDPOINT").empty();
  std::string advice;
  if (r.code == CURLE_COULDNT_RESOLVE_HOST)
    advice = custom ? "is HF_ENDPOINT's host name right? (unset HF_ENDPOINT to use huggingface.co)"
                    : "check the network's DNS, or set HF_ENDPOINT to a mirror";
  else if (r.code == CURLE_COULDNT_CONNECT && custom)
    advice = "is the server HF_ENDPOINT names running, on that port? (unset HF_ENDPOINT to use huggingface.co)";
  else
    advice = "connect to the network, or set HF_ENDPOINT to a mirror";
  fail("'" + id + "' is not in the Hugging Face cache at " + repo.string() + ", and " + endpoint() +
       " cannot be reached to download it (" + r.error + "): " + advice);
}

struct RemoteFile {
  std::string name;
  int64_t size = -1;
  std::string sha256;  // a large (LFS) file's; empty for a small one
};

// The files of the repository meshtrain reads (top level only: a subfolder is another model).
bool wanted(const std::string& name, bool config_only) {
  if (name.find('/') != std::string::npos) return false;
  if (config_only) return name == "config.json";
  auto ends = [&](const std::string& s) { return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0; };
  if (name.rfind("model", 0) == 0 && (ends(".safetensors") || name == "model.safetensors.index.json")) return true;
  static const char* kFiles[] = {"config.json",          "generation_config.json", "tokenizer.json",
                                 "tokenizer_config.json", "tokenizer.model",        "special_tokens_map.json",
                                 "added_tokens.json",     "vocab.json",             "merges.txt",
                                 "chat_template.jinja",   "chat_template.json",     "tokenizer.byte",
                                 "tokenizer.bin"};  // the last two: meshtrain's own (convert, export)
  return std::find(std::begin(kFiles), std::end(kFiles), name) != std::end(kFiles);
}

void write_text(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  write_file_atomically(p.string(), [&](std::ostream& o) { o << text; });
}

std::string bar_label(const std::string& id, const std::string& name) { return "meshtrain: " + id + " " + name; }

// "http://host:port" of "http://host:port/some/path": what a Location of "/path" is relative to.
std::string origin(const std::string& url) {
  const size_t scheme = url.find("://");
  const size_t path = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  return path == std::string::npos ? url : url.substr(0, path);
}

// A file as its HEAD described it: where to get it and what it must be.
struct Located {
  std::string name, commit, url, etag, sha;
  int64_t size = -1;
};

// The HEAD of one file at `commit`: its etag, size and (large files) SHA-256. Every file is located
// before any is downloaded, so a refusal (gated, a server out of step) leaves the cache as it was.
Located locate(const std::string& id, const std::string& commit, const fs::path& repo, const RemoteFile& f) {
  Located at;
  at.name = f.name, at.commit = commit;
  at.url = endpoint() + "/" + id + "/resolve/" + commit + "/" + quoted(f.name, true);
  Request head;
  head.url = at.url, head.head = true, head.follow = false;
  Response meta = perform_retrying(head, id, f.name, true);
  // A relative redirect is the Hub's for a renamed repository: followed for the metadata (a few
  // hops at most). An absolute one is a large file's, to its CDN: its headers are the metadata.
  for (int hops = 0; hops < 5 && meta.code == CURLE_OK && meta.status / 100 == 3 &&
                     !meta.headers.count("x-linked-etag") && meta.headers.count("location") &&
                     meta.headers.at("location").rfind("/", 0) == 0;
       ++hops) {
    head.url = origin(head.url) + meta.headers.at("location");
    meta = perform_retrying(head, id, f.name, true);
  }
  if (meta.too_large) refused(id, commit, f.name, meta);
  if (transient(meta, false)) gave_up(id, f.name, meta);  // out of tries; cannot connect is said below
  if (meta.code != CURLE_OK) unreachable(id, repo, meta);
  if (meta.status / 100 != 2 && meta.status / 100 != 3) refused(id, commit, f.name, meta);
  const auto header = [&](const char* n) { return meta.headers.count(n) ? meta.headers.at(n) : std::string(); };
  // Asked by commit, the Hub answers for that commit; another is a proxy or mirror out of step.
  if (!header("x-repo-commit").empty() && header("x-repo-commit") != commit)
    fail("'" + id + "': " + endpoint() + " answered for " + f.name + " at commit " + header("x-repo-commit") +
         ", not the " + commit + " it listed (a mirror or proxy out of step?): nothing was downloaded; run again "
         "later, or unset HF_ENDPOINT");
  at.etag = bare_etag(!header("x-linked-etag").empty() ? header("x-linked-etag") : header("etag"));
  if (at.etag.empty() || at.etag.find('/') != std::string::npos || at.etag.front() == '.')
    fail("'" + id + "': " + endpoint() + " gave no usable ETag for " + f.name);
  at.size = f.size;
  try {
    if (!header("x-linked-size").empty()) at.size = std::stoll(header("x-linked-size"));
    else if (meta.status / 100 == 2 && !header("content-length").empty()) at.size = std::stoll(header("content-length"));
  } catch (const std::exception&) {
    fail("'" + id + "': " + endpoint() + " gave no usable size for " + f.name);
  }
  // A large file is named by its SHA-256 (the etag, and the API's lfs.sha256).
  at.sha = f.sha256;
  if (at.sha.empty() && !header("x-linked-etag").empty() && at.etag.size() == 64) at.sha = at.etag;
  if (!f.sha256.empty() && at.etag.size() == 64 && at.etag != f.sha256)
    fail("'" + id + "': " + f.name + ": the Hub's ETag " + at.etag + " and its file list's SHA-256 " + f.sha256 +
         " differ");
  return at;
}

bool have_blob(const fs::path& blob, int64_t size) {
  return fs::exists(blob) && (size < 0 || int64_t(fs::file_size(blob)) == size);
}

// Brings the blob of `f` into `repo`/blobs/<etag> (a no-op when it is there); returns its etag.
std::string fetch_blob(const std::string& id, const fs::path& repo, const Located& f) {
  const fs::path blob = repo / "blobs" / f.etag;
  if (have_blob(blob, f.size)) return f.etag;
  fs::create_directories(repo / "blobs");
  const fs::path locks = repo.parent_path() / ".locks" / repo.filename();
  fs::create_directories(locks);
  // Another process downloading the same blob (ranks of one job on one node, or two runs) is
  // waited for, an hour at most, and its blob then used: huggingface_hub's lock file, so its
  // downloads and meshtrain's exclude each other too.
  std::unique_ptr<FileLock> lock;
  const auto give_up_at = std::chrono::steady_clock::now() + std::chrono::hours(1);
  for (bool said = false;;) {
    try {
      lock = std::make_unique<FileLock>((locks / (f.etag + ".lock")).string(), "the download of " + f.name);
      break;
    } catch (const Error& e) {
      if (std::string(e.what()).find(" is in use by ") == std::string::npos ||
          std::chrono::steady_clock::now() > give_up_at)
        throw;
      if (!said) std::fprintf(stderr, "meshtrain: %s %s: %s; waiting for it\n", id.c_str(), f.name.c_str(), e.what());
      said = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  if (have_blob(blob, f.size)) {
    std::fprintf(stderr, "meshtrain: %s %s: downloaded by the other process\n", id.c_str(), f.name.c_str());
    return f.etag;
  }

  const fs::path part = repo / "blobs" / (f.etag + ".incomplete");
  Response r;
  for (int tried = 1;; ++tried) {
    const int64_t have = fs::exists(part) ? int64_t(fs::file_size(part)) : 0;
    if (f.size >= 0 && have == f.size) break;  // complete: a run stopped between the last byte and the rename
    FILE* out = std::fopen(part.c_str(), have > 0 ? "r+b" : "wb");
    if (!out) fail(part.string() + ": cannot be written");
    std::fseek(out, 0, SEEK_END);
    Request get;
    get.url = f.url, get.file = out, get.offset = f.size >= 0 && have > f.size ? 0 : have;
    get.label = bar_label(id, f.name), get.total = f.size;
    if (get.offset == 0 && have > 0) (void)!ftruncate(fileno(out), 0), std::fseek(out, 0, SEEK_SET);
    r = perform(get);
    const bool wrote = !std::ferror(out) && std::fclose(out) == 0;
    if (isatty(STDERR_FILENO)) std::fprintf(stderr, "\n");
    if (r.too_large) refused(id, f.commit, f.name, r);  // an error page past the limit, not the file
    if (!wrote || r.code == CURLE_WRITE_ERROR) fail(part.string() + ": write error (is the disk full?)");
    if (r.code == CURLE_OK && r.status / 100 == 2) break;
    if (r.code == CURLE_OK && r.status == 416) break;  // nothing left to send: the size check decides
    if (r.code == CURLE_OK && !transient(r, true)) refused(id, f.commit, f.name, r);
    if (tried == kTries || !transient(r, true)) {
      if (transient(r, false)) gave_up(id, f.name, r);
      unreachable(id, repo, r);
    }
    // A dropped connection, a stall or a server error: again, from where it stopped.
    wait_to_retry(id, f.name, r, tried, "resuming");
  }
  const int64_t got = int64_t(fs::file_size(part));
  if (f.size >= 0 && got != f.size) {
    fs::remove(part);
    fail("'" + id + "': " + f.name + ": received " + std::to_string(got) + " bytes, the Hub says it has " +
         std::to_string(f.size) + ": nothing was kept; run again");
  }
  if (!f.sha.empty()) {
    const std::string actual = sha256_of_file(part.string());
    if (actual != f.sha) {
      fs::remove(part);
      fail("'" + id + "': " + f.name + ": the downloaded bytes' SHA-256 is " + actual + ", the Hub's is " + f.sha +
           ": the transfer was corrupted and nothing was kept; run again");
    }
  }
  fs::rename(part, blob);
  if (!isatty(STDERR_FILENO)) std::fprintf(stderr, "meshtrain: downloaded %s %s (%s)\n", id.c_str(), f.name.c_str(), megabytes(got).c_str());
  return f.etag;
}

}  // namespace

std::string download_snapshot(const std::string& id, const std::string& revision, const fs::path& repo,
                              bool config_only) {
  static const bool curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  if (!curl_ready) fail("libcurl could not be initialised");
  // The commit and the file list, with each file's size and a large file's SHA-256.
  Request api;
  api.url = endpoint() + "/api/models/" + id + "/revision/" + quoted(revision, false) + "?blobs=true";
  const Response r = perform_retrying(api, id, "its file list", false);
  if (r.too_large) refused(id, revision, "its file list", r);
  if (transient(r, false)) gave_up(id, "its file list", r);
  if (r.code != CURLE_OK) unreachable(id, repo, r);
  if (r.status != 200) refused(id, revision, "its file list", r);
  const nlohmann::json info = parse_json(r.body, JsonKind::hub_api, endpoint() + "'s answer for " + id);
  if (!info.contains("sha") || !info["sha"].is_string() || !is_commit_hash(info["sha"].get<std::string>()))
    fail("'" + id + "': " + endpoint() + "'s answer names no commit (no \"sha\")");
  const std::string commit = info["sha"];
  std::vector<RemoteFile> files;
  bool weights = false;
  for (const auto& s : info.value("siblings", nlohmann::json::array())) {
    if (!s.is_object() || !s.contains("rfilename") || !s["rfilename"].is_string()) continue;
    RemoteFile f;
    f.name = s["rfilename"].get<std::string>();
    if (!wanted(f.name, config_only)) continue;
    if (f.name.find("..") != std::string::npos) fail("'" + id + "': the file list names '" + f.name + "'");
    if (s.contains("size") && s["size"].is_number_integer()) f.size = s["size"];
    if (s.contains("lfs") && s["lfs"].is_object()) {
      const auto& lfs = s["lfs"];
      if (lfs.contains("sha256") && lfs["sha256"].is_string()) f.sha256 = lfs["sha256"];
      if (lfs.contains("size") && lfs["size"].is_number_integer()) f.size = lfs["size"];
    }
    weights |= f.name.size() > 12 && f.name.compare(f.name.size() - 12, 12, ".safetensors") == 0;
    files.push_back(f);
  }
  if (std::none_of(files.begin(), files.end(), [](const RemoteFile& f) { return f.name == "config.json"; }))
    fail("'" + id + "' (" + commit + ") has no config.json: not a transformers model meshtrain can read");
  if (!config_only && !weights)
    fail("'" + id + "' (" + commit + ") has no model*.safetensors weights (meshtrain reads safetensors, not "
         ".bin, .pt or .gguf files of a Hub repository)");

  std::vector<Located> located;
  for (const RemoteFile& f : files) located.push_back(locate(id, commit, repo, f));
  std::vector<std::pair<std::string, std::string>> links;  // file, etag
  for (const Located& f : located) links.push_back({f.name, fetch_blob(id, repo, f)});
  // Every blob is in: now the snapshot, and the ref that names it.
  const fs::path snap = repo / "snapshots" / commit;
  fs::create_directories(snap);
  for (const auto& [name, etag] : links) {
    // Made beside its place and renamed over it: ranks of one job linking the same file at once
    // each leave a whole link.
    const fs::path link = snap / name, made = snap / (name + ".link." + std::to_string(getpid()));
    std::error_code ec;
    fs::remove(made, ec);
    fs::create_symlink(fs::path("..") / ".." / "blobs" / etag, made);
    fs::rename(made, link);
  }
  if (revision != commit) write_text(repo / "refs" / revision, commit);
  return commit;
}

}  // namespace mt::hub

#endif  // MESHTRAIN_HAVE_CURL
