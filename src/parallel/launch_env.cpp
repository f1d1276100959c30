#include "parallel/launch_env.h"

#include <cstdlib>

#include "core/error.h"

namespace mt::parallel {
namespace {

struct Names {
  const char *rank, *size, *local_rank;
};

Names names_of(Launcher l) {
  switch (l) {
    case Launcher::mpirun:
      return {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"};
    case Launcher::srun:
      return {"SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID"};
    case Launcher::none: break;
  }
  return {};
}

int number(const EnvLookup& get, const char* name) {
  const char* v = get(name);
  if (!v) return -1;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (*v == '\0' || *end != '\0' || n < 0 || n > 1 << 30)
    fail(std::string(name) + "=" + v + " is not a rank or a count");
  return int(n);
}

}  // namespace

LaunchEnv read_launch_env(const EnvLookup& get) {
  // SLURM names the node a process runs on whichever launcher started it (mpirun's daemons
  // inherit it from the slurmd that srun reached).
  LaunchEnv env;
  if (const char* node = get("SLURMD_NODENAME")) env.node = node;
  for (Launcher l : {Launcher::mpirun, Launcher::srun}) {
    const Names n = names_of(l);
    if (!get(n.rank) || !get(n.size)) continue;
    env.launcher = l;
    env.rank = number(get, n.rank);
    env.size = number(get, n.size);
    env.local_rank = number(get, n.local_rank);
    break;
  }
  return env;
}

LaunchEnv read_launch_env() {
  return read_launch_env([](const char* name) { return std::getenv(name); });
}

std::string launcher_name(Launcher l) {
  if (l == Launcher::none) return "MPI (nodes by host name)";
  const Names n = names_of(l);
  return std::string(l == Launcher::srun ? "srun" : "mpirun") + " (" + n.rank + ", " + n.size + ")";
}

void check_launch_matches(const LaunchEnv& env, int mpi_rank, int mpi_size) {
  if (env.launcher == Launcher::none || (env.rank == mpi_rank && env.size == mpi_size)) return;
  const std::string said = launcher_name(env.launcher) + " started this process as rank " +
                           std::to_string(env.rank) + " of " + std::to_string(env.size) +
                           " but MPI made it rank " + std::to_string(mpi_rank) + " of " +
                           std::to_string(mpi_size);
  if (env.launcher == Launcher::srun)
    fail(said + ": MPI did not join srun's job; launch with srun --mpi=pmix (OpenMPI takes its "
                "ranks from srun through PMIx), or run mpirun inside the allocation");
  fail(said + ": the launcher and MPI disagree; launch with the mpirun of the MPI meshtrain was "
              "built with");
}

}  // namespace mt::parallel
