// meshtrain train [--config run.toml] [--model DIR] [--data FILE] [--lora] [--out DIR] [--device cpu|cuda]
//                 [--mesh dp=..,fsdp=..,tp=..,pp=..,cp=..|auto [--cluster NAME|FILE]]
//                 [--steps N] [--epochs E] [--lr LR] [--batch-size N] [--seq-len N] [--seed N]
//                 [--tokenizer PATH|byte] [--learning_rate LR ...: other tools' names, cli/key_options.h]
//                 [--resume RUN_DIR] [--set section.key=value ...]
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "cli/commands.h"
#include "cli/device_option.h"
#include "cli/key_options.h"
#include "core/available_memory.h"
#include "core/clipped.h"
#include "core/error.h"
#include "core/host_load.h"
#include "core/work_gate.h"
#include "io/hub_model.h"
#include "io/pretrained.h"
#include "parallel/comm.h"
#include "parallel/launch_env.h"
#include "plan/auto_mesh.h"
#include "plan/run_memory.h"
#include "train/config_docs.h"
#include "train/lr_schedule.h"
#include "train/resumed_run_config.h"
#include "train/run_config.h"
#include "train/run_layout.h"
#include "train/sequence_length.h"
#include "train/stop_signals.h"
#include "train/trainer.h"

namespace mt::cli {

namespace {

// The shape of the run's model: the built-in config, or model.path's files checked against their
// config (from the headers).
ModelConfig run_model_shape(const RunConfig& cfg) {
  // Adapters are only worth anything on the base they were trained with, and a random base is
  // not saved: such a run would end with an adapter nothing can use.
  if (cfg.lora.enabled && cfg.model_path.empty() && !cfg.lora_random_base)
    fail("lora.enabled = true needs the base model the adapter is for: give model.path (--model "
         "DIR); a random base is never saved, so its adapter would be useless "
         "(lora.random_base = true allows it, for tests)");
  return cfg.model_path.empty() ? cfg.model : checked_pretrained_config(cfg.model_path);
}

// The processes of other work --mesh auto prices this host with (plan/hardware.h host_load), and
// how they were had: MESHTRAIN_HOST_LOAD when set (a number >= 0; 0 plans for an idle host), else
// the tasks runnable on this host now, less this job's own (core/host_load.h says why not the load
// average). The ranks must plan alike (the trainer refuses ranks whose configs, the mesh included,
// differ), and a reading over a moment differs from rank to rank; so under mpirun MPI starts here,
// before the trainer would start it, and the launch's rank 0 reads for all: the ranks send it their
// process ids and hosts, it samples with those of its host excluded (the others wait for its
// answer in the broadcast, busy or not: they are this job's, so not counted), and broadcasts what
// it read. Every rank reads MESHTRAIN_HOST_LOAD itself: mpirun passes its environment to all.
struct BackgroundLoad {
  double load = 0.0;
  std::string source;
};

BackgroundLoad host_background_load() {
  if (const char* v = std::getenv("MESHTRAIN_HOST_LOAD")) {
    char* end = nullptr;
    const double load = std::strtod(v, &end);
    if (end == v || *end != '\0' || !(load >= 0.0 && load < 1e6))
      fail("MESHTRAIN_HOST_LOAD must be a number >= 0 (processes of other work on this host), got '" +
           std::string(v) + "'");
    return {load, "MESHTRAIN_HOST_LOAD"};
  }
  if (!parallel::launched_with_mpi()) {
    const HostLoad h = read_host_load({int64_t(getpid())});
    return {h.load, h.source};
  }
  std::unique_ptr<parallel::Comm> world = parallel::make_world_comm();
  // Each rank's process id and host name, gathered on every rank (a fixed-size record each).
  struct Process {
    int64_t pid = 0;
    char host[256] = {};
  };
  Process me;
  me.pid = int64_t(getpid());
  if (gethostname(me.host, sizeof me.host - 1) != 0) me.host[0] = '\0';
  std::vector<Process> all(size_t(world->size()));
  world->all_gather_bytes(&me, all.data(), int64_t(sizeof(Process)), 1);
  double load = 0.0;
  std::string source;
  if (world->rank() == 0) {
    std::vector<int64_t> own;
    for (const Process& p : all)
      if (std::string(p.host) == me.host) own.push_back(p.pid);
    const HostLoad h = read_host_load(own);
    load = h.load;
    source = h.source;
  }
  world->broadcast(&load, 1, 0);
  int64_t length = int64_t(source.size());
  world->broadcast(&length, 1, 0);
  source.resize(size_t(length));
  world->broadcast_bytes(source.data(), length, 0);
  return {load, source};
}

// mesh.auto: the planner's mesh for the ranks launched (plan/auto_mesh.h), computed alike on every
// rank from the same config (the trainer then checks that the ranks' configs, the mesh included,
// agree). A resumed run keeps run.toml's choice on as many ranks as it was made for; --mesh auto
// itself, or another number of ranks, plans again.
void choose_auto_mesh(RunConfig& cfg, const ModelConfig& shape, const std::string& cluster, bool asked_again,
                      bool resumed) {
  const parallel::LaunchEnv env = parallel::read_launch_env();
  const int64_t world = env.size > 0 ? env.size : 1;
  const bool leader = env.rank <= 0;
  if (resumed && !asked_again && cfg.mesh.world() == world) {
    if (leader)
      std::cout << "mesh auto: " << cfg.mesh.str() << ", chosen when the run started (run.toml); --mesh auto "
                << "plans again\n";
    return;
  }
  // Read only where it prices this machine (run_cluster refuses another device without --cluster).
  const BackgroundLoad load =
      cluster.empty() && cfg.train.device == "cpu" ? host_background_load() : BackgroundLoad{};
  plan::Cluster machine =
      plan::run_cluster(cluster, cfg.train.device, available_memory(), parallel::ranks_on_this_host(), load.load);
  machine.host_load_source = load.source;
  const plan::MeshChoice choice = plan::choose_mesh(cfg, shape, machine, world);
  cfg.mesh = choice.chosen.input.mesh;
  if (leader) std::cout << plan::describe_choice(choice) << std::flush;
}

// Before the trainer allocates anything: the run's memory per rank, as `meshtrain plan` computes
// it, against what this host has left. MESHTRAIN_MEMORY_CHECK=off skips the memory check for
// users who know better (swap, memory that will be freed by the time the run grows).
void check_before_training(const RunConfig& cfg, const ModelConfig& shape) {
  const char* check = std::getenv("MESHTRAIN_MEMORY_CHECK");
  const std::string mode = check ? check : "";
  if (mode == "off") return;
  if (!mode.empty() && mode != "on")
    fail("MESHTRAIN_MEMORY_CHECK must be on or off, got '" + mode + "'");
  plan::check_run_memory(cfg, shape, available_memory(), parallel::ranks_on_this_host());
}

}  // namespace

Action add_train_command(CLI::App& app) {
  struct Options {
    std::string config;
    std::vector<std::string> overrides;
    std::string model, revision, data, out, resume;
    bool lora = false;
    std::string mesh, cluster;
    bool overwrite = false;
    bool print_config_table = false;
    bool print_default_config = false;
    DeviceOption device;
    KeyOptions keys;
  };
  auto opt = std::make_shared<Options>();
  auto* sub = app.add_subcommand(
      "train", "Train or LoRA fine-tune a model (no --config: the built-in default run)");
  sub->add_option("--config,-c", opt->config,
                  "TOML run configuration (default: none, the built-in run)")->check(CLI::ExistingFile);
  sub->add_option("--set", opt->overrides,
                  "Override a config value: section.key=value; repeatable, applied in order (default: none)")
      ->allow_extra_args(false);
  // Shorthands for the keys of a fine-tuning run, so a model and a data file need no config file.
  sub->add_option("--model,-m", opt->model,
                  "model to start from: HF directory or llama2.c .bin (--set model.path=...) (default: the config's model.path)");
  sub->add_option("--revision", opt->revision,
                  "with a Hugging Face Hub id as the model: its branch, tag or commit (default: main)");
  sub->add_option("--data,-d", opt->data, "training file (--set data.path=...) (default: the config's data.path)");
  sub->add_flag("--lora", opt->lora, "train LoRA adapters (--set lora.enabled=true)");
  CLI::Option* out_option = sub->add_option(
      "--out,-o", opt->out, "output directory (--set output.dir=...) (default: the config's output.dir)");
  CLI::Option* resume_option = sub->add_option(
      "--resume", opt->resume,
      "continue the run in RUN_DIR from its latest checkpoint, with its own run.toml as the config "
      "(--set output.dir=RUN_DIR --set train.resume=latest); --config and --set change keys of it "
      "(default: a new run)");
  sub->add_option("--mesh", opt->mesh,
                  "device mesh, e.g. dp=2, overriding [mesh]; launch with mpirun -n <ranks>; auto: the planner "
                  "chooses it (--set mesh.auto=true) (default: the config's [mesh])");
  sub->add_option("--cluster", opt->cluster,
                  "with --mesh auto: the machine to plan for, as meshtrain plan --cluster: "
                  "mi300x-node|frontier|dgx-h100|dgx-h200|cpu or a .toml file (default: this machine, its "
                  "memory shared by the ranks on it)");
  opt->device.add_to(sub, "the config's train.device");
  opt->keys.add_to(sub);
  sub->add_flag("--overwrite", opt->overwrite,
                "replace another run's files in output.dir (--set output.overwrite=true)");
  // The generated documents, so they can be regenerated (scripts/update_config_docs.sh).
  sub->add_flag("--print-config-table", opt->print_config_table,
                "print the table of config keys in docs/configuration.md (Markdown) and exit");
  sub->add_flag("--print-default-config", opt->print_default_config,
                "print the built-in default run's TOML (configs/tiny.toml) and exit");
  sub->footer(config_keys_help());
  // What train does not take is refused below, with the option it misspells (CLI11 would only say
  // that the arguments were not expected).
  sub->allow_extras();
  return [opt, sub, out_option, resume_option] {
    if (!sub->remaining().empty()) {
      const std::string arg = sub->remaining().front();
      fail("train: unknown option '" + clipped(arg) + "'" + option_hint(*sub, arg));
    }
    if (opt->print_config_table || opt->print_default_config) {
      std::cout << (opt->print_config_table ? config_keys_markdown() : default_run_config_toml());
      return 0;
    }
    // The shorthands first, so that a --set of the same key, more specific, wins.
    std::vector<std::string> shorthands = opt->keys.overrides(opt->overrides);
    if (!opt->model.empty()) shorthands.push_back("model.path=" + opt->model);
    if (!opt->data.empty()) shorthands.push_back("data.path=" + opt->data);
    if (opt->lora) shorthands.push_back("lora.enabled=true");
    // Given at all, even empty: `--out ""` is refused as an empty output.dir, not taken as absent.
    if (out_option->count() > 0) shorthands.push_back("output.dir=" + opt->out);
    if (resume_option->count() > 0) {
      if (opt->resume.empty()) fail("--resume needs the directory of the run to continue, got ''");
      if (out_option->count() > 0)
        fail("--resume " + opt->resume + " continues the run in its own directory: give no --out (got --out " +
             opt->out + ")");
      shorthands.insert(shorthands.end(), {"output.dir=" + opt->resume, "train.resume=latest"});
    }
    // --mesh auto is a --set of mesh.auto; a layout given turns it off (and replaces [mesh] below).
    if (opt->mesh == "auto") shorthands.push_back("mesh.auto=true");
    else if (!opt->mesh.empty()) shorthands.push_back("mesh.auto=false");
    opt->overrides.insert(opt->overrides.begin(), shorthands.begin(), shorthands.end());
    if (opt->overwrite) opt->overrides.push_back("output.overwrite=true");
    std::vector<std::string> renamed;
    // A resume's base is the run's own run.toml, not the built-in run (train/resumed_run_config.h).
    const bool resumed = asks_to_resume(opt->config, opt->overrides);
    RunConfig cfg = resumed
                        ? resumed_run_config(opt->config, opt->overrides, &renamed)
                    : opt->config.empty()
                        ? parse_run_config(default_run_config_toml(), opt->overrides, "<built-in default>", &renamed)
                        : load_run_config(opt->config, opt->overrides, &renamed);
    // Once, before the run's log (the launcher's rank; MPI has not started yet).
    if (parallel::read_launch_env().rank <= 0)
      for (const std::string& r : renamed) std::cout << "config: " << r << "\n";
    if (!opt->mesh.empty() && opt->mesh != "auto") cfg.mesh = parallel::MeshShape::parse(opt->mesh);
    if (!opt->cluster.empty() && !cfg.mesh_auto)
      fail("--cluster " + opt->cluster + " describes the machine --mesh auto plans for; give --mesh auto "
           "(or mesh.auto = true), or no --cluster");
    // The device first: a run that cannot have it is refused before anything is checked or written.
    const DeviceBackend backend = opt->device.open(cfg.train.device, "train.device", cfg.train.share_gpu);
    if (opt->device.given()) cfg.train.device = opt->device.name;  // run.toml records the device used
    // A length not given, chosen from the data before the memory check that depends on it (and
    // said once the run is known to go ahead, so that a refusal stays one line).
    // A Hub id (ORG/NAME) as model.path is its snapshot in the Hugging Face cache, downloaded when
    // absent; run.toml then names the very files the run read (a resume needs no network).
    cfg.model_path = hub::resolve_model_path(cfg.model_path, opt->revision);
    const std::string seq_len_choice = settle_seq_len(cfg);
    const ModelConfig shape = run_model_shape(cfg);
    if (cfg.mesh_auto) choose_auto_mesh(cfg, shape, opt->cluster, opt->mesh == "auto", resumed);
    // A layout the trainer cannot build is refused here, in one line, before the memory check and
    // the ranks start: the check `meshtrain shard` makes too (train/run_layout.h), so the two agree.
    check_run_layout(cfg, shape, cfg.mesh);
    check_before_training(cfg, shape);
    const bool leader = parallel::read_launch_env().rank <= 0;
    if (!seq_len_choice.empty() && leader) std::cout << seq_len_choice << std::endl;
    // A run by steps whose warm-up reaches its end is warned when it ends, so that a refusal of
    // its data (in train) stays one line. A run by epochs counts its steps in train, which warns.
    const std::string warmup = leader && cfg.train.epochs == 0
                                   ? warmup_warning(fresh_lr_schedule(cfg.optim, cfg.train.steps))
                                   : "";
    work_gate::reached("train");
    const bool stopped = train(cfg, std::cout, *backend).stopped;
    if (!warmup.empty()) std::cout << warmup << std::endl;
    return stopped ? kStoppedExitCode : 0;
  };
}

}  // namespace mt::cli
