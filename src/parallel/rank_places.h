// Where every rank of the world runs: its node and its rank among that node's ranks (the local
// rank, which will pick each rank's device on a node with several). Taken from the launcher
// (SLURMD_NODENAME and SLURM_LOCALID under srun, OMPI_COMM_WORLD_LOCAL_RANK under mpirun); where it
// gives none, the host name and the rank's position among the ranks on the same host.
#pragma once
#include <string>
#include <vector>

#include "parallel/comm.h"
#include "parallel/launch_env.h"

namespace mt::parallel {

struct RankPlace {
  std::string node;
  int local_rank = 0;
};

// Collective over `world`: element r is rank r's place.
std::vector<RankPlace> gather_rank_places(Comm& world, const LaunchEnv& env);

// "4 ranks on 2 nodes, placed by srun (SLURM_PROCID, SLURM_STEP_NUM_TASKS): n1 runs ranks 0,2
// (local 0,1); n2 runs ranks 1,3 (local 0,1)": local ranks in rank order, runs of consecutive
// numbers written a-b.
std::string describe_rank_places(const std::vector<RankPlace>& places, Launcher launcher);

}  // namespace mt::parallel
