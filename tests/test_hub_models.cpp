// --model ORG/NAME: a Hugging Face Hub id resolved from huggingface_hub's cache, or downloaded into
// it (io/hub_model.h, io/hub_download.h), driven through the binary against tests/hub_server.h's
// stand-in for the Hub on the loopback (never the real one). The cache each test leaves is checked
// file by file against huggingface_hub's layout, so that Python's huggingface_hub finds it too.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "core/bounded_json.h"
#include "hub_server.h"
#include "io/hub_cache.h"
#include "io/hub_download.h"
#include "io/hub_sha256.h"
#include "io/safetensors_index.h"
#include "io/safetensors_write.h"
#include "run_command.h"
#include "temp_dirs.h"

namespace fs = std::filesystem;
using mt::testing::CommandResult;
using mt::testing::FakeHub;
using mt::testing::run_command;

namespace {

const std::string kShared = std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/";
const std::string kCommit = "0123456789abcdef0123456789abcdef01234567";
const std::string kGenerate = " --prompt 'Once upon a time' -n 12 -t 0";

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The tiny model's files (stories260K converted to an HF directory), made once, with what a Hub
// repository holds besides: a .bin copy of the weights and a README, which meshtrain must not fetch.
struct TinyModel {
  std::string dir;
  std::map<std::string, std::string> files;
};

const TinyModel& tiny() {
  static const TinyModel model = [] {
    TinyModel m;
    m.dir = mt::testing::stories_hf_dir(mt::testing::fresh_temp_dir("hub_tiny"));
    if (m.dir.empty()) return m;
    for (const auto& e : fs::directory_iterator(m.dir))
      if (e.is_regular_file()) m.files[e.path().filename().string()] = read_file(e.path());
    m.files["pytorch_model.bin"] = m.files["model.safetensors"];
    m.files["README.md"] = "# tiny\n";
    return m;
  }();
  return model;
}

FakeHub::Repo repo(const std::string& id) {
  FakeHub::Repo r;
  r.id = id;
  r.commit = kCommit;
  r.files = tiny().files;
  return r;
}

// `meshtrain ARGS` with the Hub at `endpoint` and the cache in `cache`, no token and online unless
// `env` says otherwise; stdout and stderr apart.
struct HubRun {
  int code;
  std::string out, err;
};
HubRun meshtrain(const std::string& endpoint, const fs::path& cache, const std::string& args, const std::string& env = "") {
  const fs::path err = cache.parent_path() / ("stderr." + std::to_string(::getpid()));
  const std::string cmd = "(env -u HF_TOKEN -u HUGGING_FACE_HUB_TOKEN -u HF_HUB_OFFLINE -u HF_HOME -u HUGGINGFACE_HUB_CACHE "
                          "HF_TOKEN_PATH=" + (cache.parent_path() / "no-token").string() + " HF_ENDPOINT=" + endpoint +
                          " HF_HUB_CACHE=" + cache.string() + " MESHTRAIN_HUB_RETRY_WAIT=0.01 " + env + " " +
                          MESHTRAIN_BINARY + " " + args +
                          " 2>" + err.string() + ")";
  const CommandResult r = run_command(cmd);
  return {r.code, r.output, read_file(err)};
}

// The generated text of the tiny model from its local directory: what the Hub's copy must give.
const std::string& local_generation() {
  static const std::string out = run_command(std::string(MESHTRAIN_BINARY) + " generate --model " + tiny().dir +
                                             kGenerate + " 2>/dev/null").output;
  return out;
}

#define NEED_TINY_MODEL()                                                                    \
  if (!fs::exists(kShared + "stories260K/stories260K.bin")) GTEST_SKIP() << "shared data not present"; \
  ASSERT_FALSE(tiny().dir.empty())
// A download needs libcurl; reading the cache does not.
#define NEED_DOWNLOADS()                                                                 \
  if (!mt::hub::download_compiled_in()) GTEST_SKIP() << "built without libcurl";         \
  NEED_TINY_MODEL()

// Every file meshtrain reads is in huggingface_hub's layout: refs/main names the commit,
// snapshots/<commit>/<file> is a relative symlink to ../../blobs/<etag>, a small file's etag its
// blob id and a large one's its SHA-256; nothing left half done, nothing else fetched.
void expect_hub_layout(const fs::path& repo, const std::string& commit, bool with_ref = true) {
  if (with_ref) {
    EXPECT_EQ(read_file(repo / "refs" / "main"), commit);  // no newline, as huggingface_hub writes it
  }
  const fs::path snap = repo / "snapshots" / commit;
  for (const auto& [name, bytes] : tiny().files) {
    const fs::path link = snap / name;
    if (name == "pytorch_model.bin" || name == "README.md") {
      EXPECT_FALSE(fs::exists(link) || fs::is_symlink(link)) << name << " should not have been downloaded";
      continue;
    }
    ASSERT_TRUE(fs::is_symlink(link)) << link;
    const std::string etag = FakeHub::is_lfs(name) ? FakeHub::sha256(bytes) : FakeHub::blob_id(bytes);
    EXPECT_EQ(fs::read_symlink(link), fs::path("../../blobs") / etag) << name;
    EXPECT_EQ(read_file(link), bytes) << name;
  }
  for (const auto& e : fs::directory_iterator(repo / "blobs"))
    EXPECT_EQ(e.path().extension(), "") << "left behind: " << e.path();
}

}  // namespace

TEST(HubModels, DownloadsIntoTheHubCacheLayoutAndGeneratesAsTheLocalDirectory) {
  NEED_DOWNLOADS();
  const fs::path dir = mt::testing::fresh_temp_dir("hub_download");
  FakeHub hub;
  hub.add(repo("org/tiny"));
  const HubRun r = meshtrain(hub.endpoint(), dir / "cache", "generate --model org/tiny" + kGenerate);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, local_generation());
  EXPECT_NE(r.err.find("meshtrain: downloaded org/tiny model.safetensors"), std::string::npos) << r.err;
  expect_hub_layout(dir / "cache" / "models--org--tiny", kCommit);
  for (const std::string& req : hub.requests()) EXPECT_EQ(req.find("pytorch_model.bin"), std::string::npos) << req;

  // From the cache alone: offline, and online without asking the Hub anything.
  const size_t asked = hub.requests().size();
  HubRun again = meshtrain(hub.endpoint(), dir / "cache", "generate --model org/tiny" + kGenerate, "HF_HUB_OFFLINE=1");
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(again.out, local_generation());
  again = meshtrain("http://127.0.0.1:1", dir / "cache", "generate --model org/tiny" + kGenerate);
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(again.out, local_generation());
  EXPECT_EQ(hub.requests().size(), asked);
}

TEST(HubModels, OfflineOrUnreachableWithoutTheModelNamesTheIdAndTheCachePath) {
  NEED_DOWNLOADS();
  const fs::path dir = mt::testing::fresh_temp_dir("hub_offline");
  const std::string where = (dir / "cache" / "models--org--tiny").string();
  FakeHub hub;
  hub.add(repo("org/tiny"));
  HubRun r = meshtrain(hub.endpoint(), dir / "cache", "generate --model org/tiny -n 1", "HF_HUB_OFFLINE=1");
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(r.err, "meshtrain: error: 'org/tiny' (revision main) is not in the Hugging Face cache at " + where +
                       ", and HF_HUB_OFFLINE is set: download it where the network is (`meshtrain` or "
                       "`huggingface-cli download org/tiny`) into that cache, or unset HF_HUB_OFFLINE\n");
  EXPECT_TRUE(hub.requests().empty());
  r = meshtrain("http://127.0.0.1:1", dir / "cache", "generate --model org/tiny -n 1");
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(r.err.rfind("meshtrain: error: 'org/tiny' is not in the Hugging Face cache at " + where +
                            ", and http://127.0.0.1:1 cannot be reached to download it (", 0), 0u) << r.err;
  // A closed port: said at once (no retries), with what to check.
  EXPECT_NE(r.err.find("): is the server HF_ENDPOINT names running, on that port? (unset HF_ENDPOINT to use "
                       "huggingface.co)\n"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(HubModels, RevisionTakesACommitAndAnUnknownOneIsRefused) {
  NEED_DOWNLOADS();
  const fs::path dir = mt::testing::fresh_temp_dir("hub_revision");
  FakeHub hub;
  hub.add(repo("org/tiny"));
  HubRun r = meshtrain(hub.endpoint(), dir / "cache", "generate --model org/tiny --revision " + kCommit + kGenerate);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, local_generation());
  // A commit needs no ref: huggingface_hub writes refs only for branches and tags.
  EXPECT_FALSE(fs::exists(dir / "cache" / "models--org--tiny" / "refs"));
  expect_hub_layout(dir / "cache" / "models--org--tiny", kCommit, /*with_ref=*/false);
  // The commit again: from the cache, offline.
  r = meshtrain(hub.endpoint(), dir / "cache", "generate --model org/tiny --revision " + kCommit + kGenerate,
                "HF_HUB_OFFLINE=1");
  EXPECT_EQ(r.code, 0) << r.err;

  r = meshtrain(hub.endpoint(), dir / "cache", "generate --model org/tiny --revision v9 -n 1");
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(r.err, "meshtrain: error: 'org/tiny' has no revision 'v9' on " + hub.endpoint() +
                       ": --revision takes a branch, a tag, a commit or refs/pr/N of that repository\n");
  r = meshtrain(hub.endpoint(), dir / "cache", "generate --model org/missing -n 1");
  EXPECT_EQ(r.err, "meshtrain: error: 'org/missing': no such model on " + hub.endpoint() +
                       " (HTTP 404): check the id's spelling (ORG/NAME as its page on the Hub shows it)\n");
  r = meshtrain(hub.endpoint(), dir / "cache", "generate --model " + tiny().dir + " --revision main -n 1");
  EXPECT_EQ(r.err, "meshtrain: error: --revision main is for a Hugging Face Hub id (ORG/NAME); '" + tiny().dir +
                       "' is a local path\n");
}

TEST(HubModels, AGatedModelNeedsHfToken) {
  NEED_DOWNLOADS();
  const fs::path dir = mt::testing::fresh_temp_dir("hub_gated");
  FakeHub hub;
  FakeHub::Repo gated = repo("org/gated");
  gated.token = "hf_test_token";
  hub.add(gated);
  HubRun r = meshtrain(hub.endpoint(), dir / "cache", "generate --model org/gated -n 1");
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(r.err, "meshtrain: error: 'org/gated': the Hub refused access (HTTP 401) to config.json: a gated or "
                   "private model needs a token: set HF_TOKEN to an access token of an account that was granted "
                   "access (huggingface.co/settings/tokens)\n");
  r = meshtrain(hub.endpoint(), dir / "cache", "generate --model org/gated -n 1", "HF_TOKEN=hf_wrong");
  EXPECT_NE(r.err.find("the token in HF_TOKEN was refused"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "cache" / "models--org--gated" / "snapshots"));
  // The Hub named "localhost" sends the weights to 127.0.0.1, another host as libcurl sees it, as
  // the real Hub sends them to its CDN: the token goes to the Hub alone.
  const std::string port = hub.endpoint().substr(hub.endpoint().rfind(':'));
  r = meshtrain("http://localhost" + port, dir / "cache", "generate --model org/gated" + kGenerate,
                "HF_TOKEN=hf_test_token");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, local_generation());
  const auto with_token = hub.authorized();
  EXPECT_FALSE(with_token.empty());
  for (const std::string& req : with_token) EXPECT_EQ(req.find("/cdn/"), std::string::npos) << req;
}

// On a terminal each file's download shows a bar (elsewhere a line per file: the tests above).
TEST(HubModels, ATerminalShowsAProgressBar) {
  NEED_DOWNLOADS();
  const fs::path dir = mt::testing::fresh_temp_dir("hub_bar");
  FakeHub hub;
  hub.add(repo("org/tiny"));
  const std::string cmd = "env -u HF_TOKEN -u HF_HUB_OFFLINE HF_ENDPOINT=" + hub.endpoint() + " HF_HUB_CACHE=" +
                          (dir / "cache").string() + " " + MESHTRAIN_BINARY + " generate --model org/tiny -n 1";
  const CommandResult r = run_command("script -qec '" + cmd + "' /dev/null");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("\rmeshtrain: org/tiny model.safetensors ["), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" MB"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("meshtrain: downloaded"), std::string::npos) << r.output;
}

TEST(HubModels, ACorruptedFileIsRefusedAndNothingOfItKept) {
  NEED_DOWNLOADS();
  const fs::path dir = mt::testing::fresh_temp_dir("hub_corrupt");
  FakeHub hub;
  FakeHub::Repo bad = repo("org/corrupt");
  bad.corrupt = {"model.safetensors"};
  hub.add(bad);
  const HubRun r = meshtrain(hub.endpoint(), dir / "cache", "generate --model org/corrupt -n 1");
  EXPECT_NE(r.code, 0);
  const std::string sha = FakeHub::sha256(tiny().files.at("model.safetensors"));
  EXPECT_NE(r.err.find("meshtrain: error: 'org/corrupt': model.safetensors: the downloaded bytes' SHA-256 is "),
            std::string::npos) << r.err;
  EXPECT_NE(r.err.find(", the Hub's is " + sha + ": the transfer was corrupted and nothing was kept; run again\n"),
            std::string::npos) << r.err;
  const fs::path cached = dir / "cache" / "models--org--corrupt";
  EXPECT_FALSE(fs::exists(cached / "snapshots"));
  EXPECT_FALSE(fs::exists(cached / "refs"));
  EXPECT_FALSE(fs::exists(cached / "blobs" / sha));
  EXPECT_FALSE(fs::exists(cached / "blobs" / (sha + ".incomplete")));
}

TEST(HubModels, ADroppedConnectionIsResumedWithARangeRequest) {
  NEED_DOWNLOADS();
  const fs::path dir = mt::testing::fresh_temp_dir("hub_resume");
  FakeHub hub;
  FakeHub::Repo flaky = repo("org/flaky");
  flaky.cut_once = {"model.safetensors"};
  hub.add(flaky);
  const HubRun r = meshtrain(hub.endpoint(), dir / "cache", "generate --model org/flaky" + kGenerate);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, local_generation());
  EXPECT_NE(r.err.find("meshtrain: org/flaky model.safetensors: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("; resuming in 0.01 s (try 2 of 5)\n"), std::string::npos) << r.err;
  const std::string& weights = tiny().files.at("model.safetensors");
  const std::string cdn = "GET /cdn/" + FakeHub::sha256(weights);
  const std::string resumed = cdn + " range=bytes=" + std::to_string(weights.size() / 2) + "-";
  const auto reqs = hub.requests();
  EXPECT_NE(std::find(reqs.begin(), reqs.end(), resumed), reqs.end()) << "no " << resumed;
  expect_hub_layout(dir / "cache" / "models--org--flaky", kCommit);
}

// A run stopped mid-download (killed, or out of retries) leaves blobs/<etag>.incomplete: the next
// run asks for the rest only.
TEST(HubModels, TheNextRunResumesWhatAnEarlierOneLeftIncomplete) {
  NEED_DOWNLOADS();
  const fs::path dir = mt::testing::fresh_temp_dir("hub_incomplete");
  FakeHub hub;
  hub.add(repo("org/tiny"));
  const std::string& weights = tiny().files.at("model.safetensors");
  const std::string sha = FakeHub::sha256(weights);
  const fs::path blobs = dir / "cache" / "models--org--tiny" / "blobs";
  fs::create_directories(blobs);
  const size_t had = weights.size() / 3;
  std::ofstream(blobs / (sha + ".incomplete"), std::ios::binary) << weights.substr(0, had);
  const HubRun r = meshtrain(hub.endpoint(), dir / "cache", "generate --model org/tiny" + kGenerate);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, local_generation());
  const auto reqs = hub.requests();
  const std::string rest = "GET /cdn/" + sha + " range=bytes=" + std::to_string(had) + "-";
  EXPECT_NE(std::find(reqs.begin(), reqs.end(), rest), reqs.end()) << "no " << rest;
  EXPECT_EQ(std::find(reqs.begin(), reqs.end(), "GET /cdn/" + sha), reqs.end()) << "the whole file was asked for";
  expect_hub_layout(dir / "cache" / "models--org--tiny", kCommit);
}

// A sharded checkpoint: the index and every shard it names are fetched (LFS, each checked), and a
// snapshot missing a shard is completed, not taken for the model.
TEST(HubModels, AShardedModelIsFetchedWithEveryShardItsIndexNames) {
  NEED_DOWNLOADS();
  const fs::path dir = mt::testing::fresh_temp_dir("hub_sharded");
  const mt::SafetensorsCheckpoint ckpt(tiny().dir);
  std::vector<std::vector<float>> values;
  std::vector<mt::TensorOut> tensors;
  size_t total = 0;
  for (const std::string& name : ckpt.names()) {
    values.emplace_back(size_t(ckpt.info(name).numel));
    ckpt.read_f32(name, values.back().data());
    total += values.back().size() * sizeof(float);
  }
  size_t i = 0;
  for (const std::string& name : ckpt.names()) {
    tensors.push_back({name, "F32", ckpt.info(name).shape, values[i].data(), values[i].size() * sizeof(float)});
    ++i;
  }
  const std::vector<std::string> written = mt::write_sharded_safetensors((dir / "sharded").string(), tensors, total / 3);
  ASSERT_GE(written.size(), 3u);  // two shards or more, and the index
  FakeHub::Repo sharded = repo("org/sharded");
  sharded.files.erase("model.safetensors");
  sharded.files.erase("pytorch_model.bin");
  std::vector<std::string> shards;
  for (const std::string& w : written) {
    const std::string name = fs::path(w).filename().string();
    sharded.files[name] = read_file(w);
    if (FakeHub::is_lfs(name)) shards.push_back(name);
  }
  FakeHub hub;
  hub.add(sharded);
  HubRun r = meshtrain(hub.endpoint(), dir / "cache", "generate --model org/sharded" + kGenerate);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, local_generation());
  const fs::path snap = dir / "cache" / "models--org--sharded" / "snapshots" / kCommit;
  EXPECT_TRUE(fs::is_symlink(snap / "model.safetensors.index.json"));
  for (const std::string& s : shards)
    EXPECT_EQ(fs::read_symlink(snap / s), fs::path("../../blobs") / FakeHub::sha256(sharded.files[s])) << s;
  // A shard gone from the snapshot: fetched again, not read as a model without it.
  fs::remove(snap / shards.back());
  r = meshtrain(hub.endpoint(), dir / "cache", "generate --model org/sharded" + kGenerate);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, local_generation());
  EXPECT_TRUE(fs::is_symlink(snap / shards.back()));
}

// A cache huggingface_hub filled (laid out here by hand as it does it, under HF_HOME), read without
// any server; and the cache directory's environment variables in huggingface_hub's order.
TEST(HubModels, ReadsTheCacheHuggingfaceHubFilledUnderHfHome) {
  NEED_TINY_MODEL();
  const fs::path dir = mt::testing::fresh_temp_dir("hub_hf_home");
  const fs::path repo_dir = dir / "hf_home" / "hub" / "models--org--tiny";
  fs::create_directories(repo_dir / "refs");
  std::ofstream(repo_dir / "refs" / "main") << kCommit;
  fs::create_directories(repo_dir / "blobs");
  fs::create_directories(repo_dir / "snapshots" / kCommit);
  for (const auto& [name, bytes] : tiny().files) {
    const std::string etag = FakeHub::is_lfs(name) ? FakeHub::sha256(bytes) : FakeHub::blob_id(bytes);
    std::ofstream(repo_dir / "blobs" / etag, std::ios::binary) << bytes;
    fs::create_symlink(fs::path("../../blobs") / etag, repo_dir / "snapshots" / kCommit / name);
  }
  const std::string cmd = "env -u HF_HUB_CACHE -u HUGGINGFACE_HUB_CACHE HF_HUB_OFFLINE=1 HF_HOME=" +
                          (dir / "hf_home").string() + " " + MESHTRAIN_BINARY + " generate --model org/tiny" +
                          kGenerate + " 2>&1";
  const CommandResult r = run_command(cmd);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output, local_generation());
}

TEST(HubModels, TheCacheDirectoryFollowsHuggingfaceHubsVariables) {
  struct Saved {
    std::map<std::string, std::optional<std::string>> values;
    Saved() {
      for (const char* n : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HOME"}) {
        const char* v = std::getenv(n);
        values[n] = v ? std::optional<std::string>(v) : std::nullopt;
        ::unsetenv(n);
      }
    }
    ~Saved() {
      for (const auto& [n, v] : values) v ? (void)::setenv(n.c_str(), v->c_str(), 1) : (void)::unsetenv(n.c_str());
    }
  } saved;
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(mt::hub::cache_dir(), fs::path("/home/u/.cache/huggingface/hub"));
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(mt::hub::cache_dir(), fs::path("/xdg/huggingface/hub"));
  ::setenv("HF_HOME", "~/hf", 1);
  EXPECT_EQ(mt::hub::cache_dir(), fs::path("/home/u/hf/hub"));
  ::setenv("HUGGINGFACE_HUB_CACHE", "/old", 1);
  EXPECT_EQ(mt::hub::cache_dir(), fs::path("/old"));
  ::setenv("HF_HUB_CACHE", "/new", 1);
  EXPECT_EQ(mt::hub::cache_dir(), fs::path("/new"));
  EXPECT_EQ(mt::hub::repo_dir("/c", "meta-llama/Llama-3.2-1B"), fs::path("/c/models--meta-llama--Llama-3.2-1B"));
}

// The planner reads a model's shape: config.json alone is fetched (named as given); a later run
// of the whole model completes the same snapshot.
TEST(HubModels, PlanFetchesConfigJsonAloneAndGenerateCompletesTheSnapshot) {
  NEED_DOWNLOADS();
  const fs::path dir = mt::testing::fresh_temp_dir("hub_plan");
  FakeHub hub;
  hub.add(repo("org/tiny"));
  HubRun r = meshtrain(hub.endpoint(), dir / "cache", "plan --model org/tiny --cluster cpu --mesh dp=1 --seq 64 --global-batch 1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("org/tiny"), std::string::npos) << r.out;
  const fs::path snap = dir / "cache" / "models--org--tiny" / "snapshots" / kCommit;
  EXPECT_TRUE(fs::is_symlink(snap / "config.json"));
  EXPECT_FALSE(fs::exists(snap / "model.safetensors"));
  r = meshtrain(hub.endpoint(), dir / "cache", "generate --model org/tiny" + kGenerate);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, local_generation());
  expect_hub_layout(dir / "cache" / "models--org--tiny", kCommit);
}

// A run of a Hub model records its snapshot, so that a resume reads the same files offline.
TEST(HubModels, TrainRecordsTheSnapshotItRead) {
  NEED_DOWNLOADS();
  const fs::path dir = mt::testing::fresh_temp_dir("hub_train");
  FakeHub hub;
  hub.add(repo("org/tiny"));
  const std::string args = "train --model org/tiny --lora --set train.steps=2 --set train.seq_len=32 "
                           "--set train.batch_size=2 --set train.log_every=1 --set data.cache_dir=off --out " +
                           (dir / "run").string();
  const HubRun r = meshtrain(hub.endpoint(), dir / "cache", args);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const fs::path snap = dir / "cache" / "models--org--tiny" / "snapshots" / kCommit;
  EXPECT_NE(read_file(dir / "run" / "run.toml").find("path = \"" + snap.string() + "\""), std::string::npos)
      << read_file(dir / "run" / "run.toml");
}

// The digest blobs are checked with, against FIPS 180-4's examples (one block, two blocks, and a
// million bytes fed in uneven pieces across block boundaries).
TEST(HubModels, Sha256MatchesTheStandardsExamples) {
  EXPECT_EQ(FakeHub::sha256(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(FakeHub::sha256("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(FakeHub::sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  mt::hub::Sha256 million;
  const std::string piece(977, 'a');
  size_t fed = 0;
  while (fed < 1000000) {
    const size_t n = std::min(piece.size(), 1000000 - fed);
    million.update(piece.data(), n);
    fed += n;
  }
  EXPECT_EQ(million.hex(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

namespace {

size_t count_of(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// The lines of `text` that start "meshtrain: error:".
size_t error_lines(const std::string& text) { return count_of("\n" + text, "\nmeshtrain: error: "); }

}  // namespace

// A HEAD answering for another commit than the API listed (a mirror or proxy mid-update) is refused
// before any file's bytes are asked for: the cache is left as it was.
TEST(HubModels, AFileAnsweredForAnotherCommitIsRefusedBeforeAnythingIsDownloaded) {
  NEED_DOWNLOADS();
  const fs::path dir = mt::testing::fresh_temp_dir("hub_other_commit");
  FakeHub hub;
  FakeHub::Repo r = repo("org/skewed");
  r.other_commit = {"model.safetensors"};
  hub.add(r);
  const HubRun run = meshtrain(hub.endpoint(), dir / "cache", "generate --model org/skewed -n 1");
  EXPECT_NE(run.code, 0);
  EXPECT_EQ(run.err, "meshtrain: error: 'org/skewed': " + hub.endpoint() + " answered for model.safetensors at commit " +
                         std::string(40, 'e') + ", not the " + kCommit + " it listed (a mirror or proxy out of step?): "
                         "nothing was downloaded; run again later, or unset HF_ENDPOINT\n");
  const fs::path cached = dir / "cache" / "models--org--skewed";
  EXPECT_FALSE(fs::exists(cached / "snapshots"));
  EXPECT_FALSE(fs::exists(cached / "refs"));
  EXPECT_TRUE(!fs::exists(cached / "blobs") || fs::is_empty(cached / "blobs"));
  for (const std::string& req : hub.requests())
    EXPECT_TRUE(req.rfind("HEAD ", 0) == 0 || req.rfind("GET /api/", 0) == 0) << "asked for bytes: " << req;
}

// 503s are tried again, waits doubling from MESHTRAIN_HUB_RETRY_WAIT (0.01 s here), up to 5 tries;
// then one error line. A closed port at the first request is not retried (the test above).
TEST(HubModels, ServerErrorsAreRetriedWithBackOffThenGivenUpInOneLine) {
  NEED_DOWNLOADS();
  const fs::path dir = mt::testing::fresh_temp_dir("hub_retry");
  FakeHub hub;
  FakeHub::Repo busy = repo("org/busy");
  busy.unavailable = 3;
  hub.add(busy);
  HubRun r = meshtrain(hub.endpoint(), dir / "cache", "generate --model org/busy" + kGenerate);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, local_generation());
  EXPECT_NE(r.err.find("meshtrain: org/busy its file list: HTTP 503; trying again in 0.01 s (try 2 of 5)\n"
                       "meshtrain: org/busy its file list: HTTP 503; trying again in 0.02 s (try 3 of 5)\n"
                       "meshtrain: org/busy its file list: HTTP 503; trying again in 0.04 s (try 4 of 5)\n"),
            std::string::npos) << r.err;
  expect_hub_layout(dir / "cache" / "models--org--busy", kCommit);

  FakeHub::Repo down = repo("org/down");
  down.unavailable = 1000;
  hub.add(down);
  r = meshtrain(hub.endpoint(), dir / "cache", "generate --model org/down -n 1");
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(count_of(r.err, "HTTP 503; trying again in "), 4u) << r.err;
  EXPECT_NE(r.err.find("(try 5 of 5)\nmeshtrain: error: 'org/down': " + hub.endpoint() + " failed 5 times in a row "
                       "for its file list (HTTP 503, the last time): the server is down or overloaded; run again "
                       "later (what was downloaded is kept and resumed)\n"), std::string::npos) << r.err;
  EXPECT_EQ(error_lines(r.err), 1u) << r.err;
  const auto reqs = hub.requests();
  EXPECT_EQ(std::count(reqs.begin(), reqs.end(), "GET /api/models/org/down/revision/main?blobs=true"), 5);
  EXPECT_FALSE(fs::exists(dir / "cache" / "models--org--down" / "snapshots"));

  r = meshtrain(hub.endpoint(), dir / "cache", "generate --model org/down -n 1", "MESHTRAIN_HUB_RETRY_WAIT=soon");
  EXPECT_NE(r.err.find("meshtrain: error: MESHTRAIN_HUB_RETRY_WAIT='soon' is not a number of seconds from 0 to "
                       "3600\n"), std::string::npos) << r.err;
}

// A renamed repository's old id answers relative redirects (Location: /NEW/...), followed for the
// API, the HEADs and the downloads; the cache keeps the id asked for, as huggingface_hub does.
TEST(HubModels, ARenamedRepositorysRelativeRedirectsAreFollowed) {
  NEED_DOWNLOADS();
  const fs::path dir = mt::testing::fresh_temp_dir("hub_renamed");
  FakeHub hub;
  FakeHub::Repo moved = repo("org/tiny");
  moved.renamed_from = "old/tiny";
  hub.add(moved);
  const HubRun r = meshtrain(hub.endpoint(), dir / "cache", "generate --model old/tiny" + kGenerate);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, local_generation());
  const auto reqs = hub.requests();
  for (const std::string& want : std::vector<std::string>{"GET /api/models/old/tiny/revision/main?blobs=true",
                                  "GET /api/models/org/tiny/revision/main?blobs=true",
                                  "HEAD /old/tiny/resolve/" + kCommit + "/config.json",
                                  "HEAD /org/tiny/resolve/" + kCommit + "/config.json",
                                  "GET /org/tiny/resolve/" + kCommit + "/model.safetensors"})
    EXPECT_NE(std::find(reqs.begin(), reqs.end(), want), reqs.end()) << "no " << want;
  expect_hub_layout(dir / "cache" / "models--old--tiny", kCommit);
}

// --revision refs/pr/1: the API is asked for it as one path segment, and its ref is stored as
// huggingface_hub's file_download.py stores it, refs/<revision> as a path: refs/refs/pr/1.
TEST(HubModels, APullRequestRevisionIsStoredWhereHuggingfaceHubStoresIt) {
  NEED_DOWNLOADS();
  const fs::path dir = mt::testing::fresh_temp_dir("hub_pr");
  const std::string pr_commit = "fedcba9876543210fedcba9876543210fedcba98";
  FakeHub hub;
  FakeHub::Repo r = repo("org/tiny");
  r.refs = {{"refs/pr/1", pr_commit}};
  hub.add(r);
  HubRun run = meshtrain(hub.endpoint(), dir / "cache", "generate --model org/tiny --revision refs/pr/1" + kGenerate);
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(run.out, local_generation());
  const auto reqs = hub.requests();
  EXPECT_NE(std::find(reqs.begin(), reqs.end(), "GET /api/models/org/tiny/revision/refs%2Fpr%2F1?blobs=true"),
            reqs.end());
  const fs::path cached = dir / "cache" / "models--org--tiny";
  EXPECT_EQ(read_file(cached / "refs" / "refs" / "pr" / "1"), pr_commit);
  EXPECT_FALSE(fs::exists(cached / "refs" / "main"));
  expect_hub_layout(cached, pr_commit, /*with_ref=*/false);
  run = meshtrain(hub.endpoint(), dir / "cache", "generate --model org/tiny --revision refs/pr/1" + kGenerate,
                  "HF_HUB_OFFLINE=1");
  EXPECT_EQ(run.code, 0) << run.err;
  // A revision that would name a file outside refs/ is refused before the cache or the Hub is asked.
  const size_t asked = hub.requests().size();
  for (const std::string bad : {"../../x", "refs//pr", "/etc", "refs/pr/."}) {
    run = meshtrain(hub.endpoint(), dir / "cache", "generate --model org/tiny -n 1 --revision '" + bad + "'");
    EXPECT_EQ(run.err, "meshtrain: error: --revision '" + bad + "' is not a branch, tag, commit or refs/pr/N name "
                       "(no empty, '.' or '..' parts, spaces or backslashes)\n");
  }
  EXPECT_EQ(hub.requests().size(), asked);
}

// Two runs downloading one model at once (two jobs, or ranks on one host): the second waits on the
// first's lock for each file and then uses its blob; the weights are fetched once.
TEST(HubModels, TwoProcessesDownloadingOneModelShareEachFile) {
  NEED_DOWNLOADS();
  const fs::path dir = mt::testing::fresh_temp_dir("hub_two");
  FakeHub hub;
  FakeHub::Repo r = repo("org/tiny");
  r.slow = {"model.safetensors"};  // ~2 s
  hub.add(r);
  auto cmd = [&](const std::string& name) {
    return "env -u HF_TOKEN -u HF_HUB_OFFLINE HF_ENDPOINT=" + hub.endpoint() + " HF_HUB_CACHE=" +
           (dir / "cache").string() + " " + MESHTRAIN_BINARY + " generate --model org/tiny" + kGenerate + " >" +
           (dir / (name + ".out")).string() + " 2>" + (dir / (name + ".err")).string() + "; echo $? >" +
           (dir / (name + ".rc")).string();
  };
  const CommandResult both = run_command("(" + cmd("a") + ") & sleep 0.5; " + cmd("b") + "; wait");
  ASSERT_EQ(both.code, 0) << both.output;
  for (const std::string name : {"a", "b"}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(read_file(dir / (name + ".rc")), "0\n") << read_file(dir / (name + ".err"));
    EXPECT_EQ(read_file(dir / (name + ".out")), local_generation());
  }
  // Which one waits is the scheduler's choice (b starts 0.5 s later; the weights take ~2 s).
  const std::string a_err = read_file(dir / "a.err"), b_err = read_file(dir / "b.err");
  const std::string& waited = b_err.find("waiting for it") != std::string::npos ? b_err : a_err;
  const std::string& fetched = &waited == &b_err ? a_err : b_err;
  EXPECT_NE(waited.find("meshtrain: org/tiny model.safetensors: the download of model.safetensors is in use by "),
            std::string::npos) << waited;
  EXPECT_NE(waited.find("; waiting for it\nmeshtrain: org/tiny model.safetensors: downloaded by the other process\n"),
            std::string::npos) << waited;
  EXPECT_NE(fetched.find("meshtrain: downloaded org/tiny model.safetensors"), std::string::npos) << fetched;
  const std::string cdn = "GET /cdn/" + FakeHub::sha256(tiny().files.at("model.safetensors"));
  const auto reqs = hub.requests();
  EXPECT_EQ(std::count(reqs.begin(), reqs.end(), cdn), 1);
  expect_hub_layout(dir / "cache" / "models--org--tiny", kCommit);
}

// The API's answer is read under its own JSON limit and named as what it is.
TEST(HubModels, AMalformedOrOversizedApiAnswerIsRefusedAsTheHubsAnswer) {
  NEED_DOWNLOADS();
  const fs::path dir = mt::testing::fresh_temp_dir("hub_api_json");
  FakeHub hub;
  FakeHub::Repo bad = repo("org/bad");
  bad.api_body = "{\"sha\": [1,";
  hub.add(bad);
  FakeHub::Repo big = repo("org/big");
  big.api_padding = 33 << 20;
  hub.add(big);
  HubRun r = meshtrain(hub.endpoint(), dir / "cache", "generate --model org/bad -n 1");
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(r.err.rfind("meshtrain: error: " + hub.endpoint() + "'s answer for org/bad: not valid JSON (at byte ", 0),
            0u) << r.err;
  EXPECT_EQ(error_lines(r.err), 1u) << r.err;
  r = meshtrain(hub.endpoint(), dir / "cache", "generate --model org/big -n 1");
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(r.err, "meshtrain: error: 'org/big': " + hub.endpoint() + "'s answer for its file list is over the 32 MiB "
                   "limit for the Hub API's answers: is HF_ENDPOINT a Hugging Face Hub?\n");
  EXPECT_EQ(mt::json_limits(mt::JsonKind::hub_api).max_bytes, size_t(32) << 20);
}
