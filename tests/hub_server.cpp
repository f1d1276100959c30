#include "hub_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "io/hub_sha256.h"

namespace mt::testing {

namespace {

void send_all(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += size_t(n);
  }
}

std::string reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 206: return "Partial Content";
    case 302: return "Found";
    case 307: return "Temporary Redirect";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 416: return "Range Not Satisfiable";
    case 503: return "Service Unavailable";
    default: return "Status";
  }
}

// A whole response: status line, headers, Content-Length, and the body unless `head`.
void respond(int fd, int status, const std::vector<std::string>& headers, const std::string& body, bool head,
             int64_t length = -1) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason(status) + "\r\n";
  for (const std::string& h : headers) out += h + "\r\n";
  out += "Content-Length: " + std::to_string(length >= 0 ? length : int64_t(body.size())) + "\r\n";
  out += "Connection: close\r\n\r\n";
  if (!head) out += body;
  send_all(fd, out);
}

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

std::string url_decoded(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out += char(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

std::string FakeHub::sha256(const std::string& bytes) {
  hub::Sha256 s;
  s.update(bytes.data(), bytes.size());
  return s.hex();
}

// Git names a blob by the SHA-1 of "blob <size>\0<bytes>"; any 40 hex digits stand in for it here,
// as neither meshtrain nor huggingface_hub checks a small file's id against its bytes.
std::string FakeHub::blob_id(const std::string& bytes) {
  return sha256("blob " + std::to_string(bytes.size()) + std::string(1, '\0') + bytes).substr(0, 40);
}

bool FakeHub::is_lfs(const std::string& name) {
  return name.size() > 12 && name.compare(name.size() - 12, 12, ".safetensors") == 0;
}

FakeHub::FakeHub() {
  listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (listener_ < 0) throw std::runtime_error("FakeHub: socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listener_, 16) != 0)
    throw std::runtime_error("FakeHub: bind/listen on 127.0.0.1 failed");
  socklen_t len = sizeof addr;
  ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { serve(); });
}

FakeHub::~FakeHub() {
  stop_ = true;
  thread_.join();
  for (std::thread& t : connections_) t.join();
  ::close(listener_);
}

void FakeHub::add(const Repo& repo) {
  std::lock_guard<std::mutex> lock(mutex_);
  repos_[repo.id] = repo;
  for (const auto& [name, bytes] : repo.files)
    if (is_lfs(name)) cdn_[sha256(bytes)] = {repo.id, name};
}

std::string FakeHub::endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

std::vector<std::string> FakeHub::requests() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return log_;
}

std::vector<std::string> FakeHub::authorized() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return authorized_;
}

void FakeHub::serve() {
  while (!stop_) {
    pollfd p{listener_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const int fd = ::accept(listener_, nullptr, nullptr);
    if (fd < 0) continue;
    timeval tv{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    connections_.emplace_back([this, fd] {
      answer(fd);
      ::close(fd);
    });
  }
}

FakeHub::Repo* FakeHub::repo_of(const std::string& rest, std::string* tail, bool* renamed) {
  const size_t a = rest.find('/');
  const size_t b = a == std::string::npos ? a : rest.find('/', a + 1);
  if (b == std::string::npos) return nullptr;
  const std::string id = rest.substr(0, b);
  *tail = rest.substr(b + 1);
  *renamed = false;
  auto it = repos_.find(id);
  if (it != repos_.end()) return &it->second;
  for (auto& [name, r] : repos_)
    if (!r.renamed_from.empty() && r.renamed_from == id) return *renamed = true, &r;
  return nullptr;
}

void FakeHub::answer(int fd) {
  std::string req;
  char buf[4096];
  while (req.find("\r\n\r\n") == std::string::npos && req.size() < 65536) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return;
    req.append(buf, size_t(n));
  }
  std::istringstream in(req);
  std::string method, target, version, line;
  in >> method >> target >> version;
  std::getline(in, line);
  std::map<std::string, std::string> headers;
  while (std::getline(in, line) && line != "\r") {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon), value = line.substr(colon + 1);
    for (char& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
    while (!value.empty() && (value.front() == ' ')) value.erase(0, 1);
    while (!value.empty() && (value.back() == '\r' || value.back() == ' ')) value.pop_back();
    headers[name] = value;
  }
  const bool head = method == "HEAD";
  const std::string range = headers.count("range") ? headers["range"] : "";
  std::unique_lock<std::mutex> lock(mutex_);
  log_.push_back(method + " " + target + (range.empty() ? "" : " range=" + range));
  if (headers.count("authorization")) authorized_.push_back(method + " " + target);
  const std::string path = target.substr(0, target.find('?'));

  auto commit_of = [](const Repo& r, const std::string& rev) {
    if (rev == "main" || rev == r.commit) return r.commit;
    for (const auto& [name, commit] : r.refs)
      if (rev == name || rev == commit) return commit;
    return std::string();
  };
  // A renamed repository's old id: a redirect to the same place under the new one, relative.
  auto moved = [&](const Repo& r, const std::string& prefix, const std::string& rest) {
    return respond(fd, 307, {"Location: " + prefix + r.id + "/" + rest + (target.find('?') == std::string::npos ? "" : target.substr(target.find('?')))},
                   "", head);
  };
  // The first `unavailable` requests of a repository: the Hub overloaded.
  auto busy = [&](Repo& r) {
    if (r.unavailable <= 0) return false;
    --r.unavailable;
    respond(fd, 503, {}, "Service Unavailable", head);
    return true;
  };

  std::string tail;
  bool renamed = false;
  if (starts_with(path, "/api/models/")) {
    Repo* r = repo_of(path.substr(12), &tail, &renamed);
    if (!r || !starts_with(tail, "revision/"))
      return respond(fd, 404, {"X-Error-Code: RepoNotFound"}, "{\"error\":\"Repository not found\"}", head);
    if (renamed) return moved(*r, "/api/models/", tail);
    if (busy(*r)) return;
    if (!r->api_body.empty()) return respond(fd, 200, {"Content-Type: application/json"}, r->api_body, head);
    const std::string commit = commit_of(*r, url_decoded(tail.substr(9)));
    if (commit.empty())
      return respond(fd, 404, {"X-Error-Code: RevisionNotFound"}, "{\"error\":\"Invalid rev id\"}", head);
    nlohmann::json siblings = nlohmann::json::array();
    for (const auto& [name, bytes] : r->files) {
      nlohmann::json s = {{"rfilename", name}, {"size", bytes.size()}, {"blobId", blob_id(bytes)}};
      if (is_lfs(name)) s["lfs"] = {{"sha256", sha256(bytes)}, {"size", bytes.size()}, {"pointerSize", 134}};
      siblings.push_back(s);
    }
    nlohmann::json info = {{"id", r->id}, {"sha", commit}, {"gated", r->token.empty() ? false : true},
                           {"siblings", siblings}};
    if (r->api_padding) info["padding"] = std::string(r->api_padding, ' ');
    return respond(fd, 200, {"Content-Type: application/json"}, info.dump(), head);
  }
  if (starts_with(path, "/cdn/")) {
    auto it = cdn_.find(path.substr(5));
    if (it == cdn_.end()) return respond(fd, 404, {}, "no such object", head);
    const Repo& r = repos_[it->second.first];
    const std::string& file = it->second.second;
    std::string bytes = r.files.at(file);
    if (r.corrupt.count(file)) bytes[bytes.size() / 2] ^= 0x5a;
    size_t from = 0;
    if (starts_with(range, "bytes=")) from = std::stoul(range.substr(6));
    if (from >= bytes.size() && from > 0) return respond(fd, 416, {"Content-Range: bytes */" + std::to_string(bytes.size())}, "", head);
    if (from == 0 && !head && r.cut_once.count(file) && !cut_done_.count(file)) {
      // Promise the whole file, send half, hang up.
      cut_done_.insert(file);
      std::string out = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(bytes.size()) + "\r\nConnection: close\r\n\r\n";
      send_all(fd, out + bytes.substr(0, bytes.size() / 2));
      return;
    }
    if (r.slow.count(file) && from == 0 && !head) {
      // Twenty pieces 100 ms apart, the lock released: another client is answered meanwhile.
      lock.unlock();
      send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(bytes.size()) + "\r\nConnection: close\r\n\r\n");
      const size_t piece = bytes.size() / 20 + 1;
      for (size_t at = 0; at < bytes.size(); at += piece) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        send_all(fd, bytes.substr(at, piece));
      }
      return;
    }
    if (from > 0)
      return respond(fd, 206,
                     {"Content-Range: bytes " + std::to_string(from) + "-" + std::to_string(bytes.size() - 1) + "/" +
                      std::to_string(bytes.size())},
                     bytes.substr(from), head);
    return respond(fd, 200, {}, bytes, head);
  }
  Repo* r = path.size() > 1 ? repo_of(path.substr(1), &tail, &renamed) : nullptr;
  if (!r || !starts_with(tail, "resolve/")) return respond(fd, 404, {"X-Error-Code: RepoNotFound"}, "not found", head);
  if (renamed) return moved(*r, "/", tail);
  if (busy(*r)) return;
  const std::string rest = tail.substr(8);
  const size_t slash = rest.find('/');
  const std::string commit = commit_of(*r, url_decoded(rest.substr(0, slash)));
  if (commit.empty() || slash == std::string::npos)
    return respond(fd, 404, {"X-Error-Code: RevisionNotFound"}, "no such revision", head);
  if (!r->token.empty() && headers["authorization"] != "Bearer " + r->token)
    return respond(fd, 401, {"X-Error-Code: GatedRepo"}, "Access to model " + r->id + " is restricted.", head);
  const std::string file = url_decoded(rest.substr(slash + 1));
  auto f = r->files.find(file);
  if (f == r->files.end()) return respond(fd, 404, {"X-Error-Code: EntryNotFound"}, "no such file", head);
  const std::vector<std::string> common = {
      "X-Repo-Commit: " + (r->other_commit.count(file) ? std::string(40, 'e') : commit)};
  if (is_lfs(file)) {
    std::vector<std::string> h = common;
    h.push_back("Location: " + endpoint() + "/cdn/" + sha256(f->second));
    h.push_back("X-Linked-Etag: \"" + sha256(f->second) + "\"");
    h.push_back("X-Linked-Size: " + std::to_string(f->second.size()));
    h.push_back("ETag: \"" + blob_id(f->second) + "\"");  // the LFS pointer's, which the linked one overrides
    return respond(fd, 302, h, "", head);
  }
  std::vector<std::string> h = common;
  h.push_back("ETag: \"" + blob_id(f->second) + "\"");
  return respond(fd, 200, h, f->second, head);
}

}  // namespace mt::testing
