// What the launcher told this process in its environment: its rank, the world's size, its rank
// among the processes on its node (the local rank, which is what picks a node's device) and the
// node's name. Read before MPI starts, so that MPI's world can be checked against it.
#pragma once
#include <functional>
#include <string>

namespace mt::parallel {

// mpirun: OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK. srun: SLURM_PROCID, SLURM_STEP_NUM_TASKS,
// SLURM_LOCALID. The node: SLURMD_NODENAME under either. mpirun comes first: inside a SLURM allocation its processes
// inherit the SLURM variables of the daemon srun started for their node, which describe that
// daemon, not them.
enum class Launcher { none, mpirun, srun };

struct LaunchEnv {
  Launcher launcher = Launcher::none;
  int rank = -1, size = -1, local_rank = -1;  // -1: the launcher gave none
  std::string node;                           // empty: not under SLURM
};

using EnvLookup = std::function<const char*(const char*)>;

// Reads the variables of the first launcher whose rank and size are both set; a set variable
// that is not a number is refused in one line.
LaunchEnv read_launch_env(const EnvLookup& get);
LaunchEnv read_launch_env();  // from this process's environment

// "mpirun (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE)" and the like, for messages.
std::string launcher_name(Launcher l);

// Refuses a world whose rank or size differs from what the launcher said. The usual cause is srun
// without a process-management interface MPI can use: every task then starts as rank 0 of a
// world of one, and each would train alone into the same output directory.
void check_launch_matches(const LaunchEnv& env, int mpi_rank, int mpi_size);

}  // namespace mt::parallel
