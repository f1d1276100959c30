// What meshtrain reads from its launcher's environment (srun's SLURM_* variables, mpirun's
// OMPI_COMM_WORLD_*) and how it describes where the ranks run. The real srun path is
// scripts/slurm_test.sh.
#include <gtest/gtest.h>

#include <map>

#include "error_of.h"
#include "core/error.h"
#include "parallel/launch_env.h"
#include "parallel/rank_places.h"

namespace mt::parallel {
namespace {

EnvLookup env_of(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(LaunchEnv, SrunGivesRankSizeLocalRankAndNode) {
  LaunchEnv e = read_launch_env(env_of({{"SLURM_PROCID", "3"}, {"SLURM_STEP_NUM_TASKS", "4"},
                                        {"SLURM_LOCALID", "1"}, {"SLURMD_NODENAME", "n2"}}));
  EXPECT_EQ(e.launcher, Launcher::srun);
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.size, 4);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.node, "n2");
}

TEST(LaunchEnv, BatchScriptWithoutStepIsNoLauncher) {
  // sbatch's script has SLURM_PROCID=0 but is not a step: a plain run inside it stays one process.
  LaunchEnv e = read_launch_env(env_of({{"SLURM_PROCID", "0"}, {"SLURM_LOCALID", "0"}}));
  EXPECT_EQ(e.launcher, Launcher::none);
  EXPECT_EQ(e.local_rank, -1);
}

TEST(LaunchEnv, MpirunInsideAnAllocationWinsOverItsDaemonsSlurmVariables) {
  // mpirun's processes inherit SLURM_PROCID/SLURM_LOCALID of the daemon srun started on their
  // node (node index, 0); their own rank and local rank are OpenMPI's.
  LaunchEnv e = read_launch_env(
      env_of({{"SLURM_PROCID", "1"}, {"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_LOCALID", "0"},
              {"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"},
              {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"SLURMD_NODENAME", "n2"}}));
  EXPECT_EQ(e.launcher, Launcher::mpirun);
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.size, 4);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.node, "n2");  // the daemon's node is the process's node
}

TEST(LaunchEnv, RefusesANonNumber) {
  EXPECT_EQ(error_of([] {
              read_launch_env(env_of({{"SLURM_PROCID", "x1"}, {"SLURM_STEP_NUM_TASKS", "2"}}));
            }),
            "SLURM_PROCID=x1 is not a rank or a count");
}

TEST(LaunchEnv, WorldMustMatchWhatTheLauncherSaid) {
  LaunchEnv srun;
  srun.launcher = Launcher::srun, srun.rank = 1, srun.size = 2;
  EXPECT_EQ(error_of([&] { check_launch_matches(srun, 1, 2); }), "");
  const std::string e = error_of([&] { check_launch_matches(srun, 0, 1); });
  EXPECT_NE(e.find("srun (SLURM_PROCID, SLURM_STEP_NUM_TASKS) started this process as rank 1 of 2 "
                   "but MPI made it rank 0 of 1"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("srun --mpi=pmix"), std::string::npos) << e;
  EXPECT_EQ(error_of([] { check_launch_matches(LaunchEnv{}, 0, 1); }), "");
}

TEST(RankPlaces, DescribesNodesRanksAndLocalRanks) {
  // srun -N 2 -n 4 --distribution=cyclic: ranks alternate between the nodes.
  std::vector<RankPlace> cyclic = {{"n1", 0}, {"n2", 0}, {"n1", 1}, {"n2", 1}};
  EXPECT_EQ(describe_rank_places(cyclic, Launcher::srun),
            "4 ranks on 2 nodes, placed by srun (SLURM_PROCID, SLURM_STEP_NUM_TASKS): "
            "n1 runs ranks 0,2 (local 0,1); n2 runs ranks 1,3 (local 0,1)");
  std::vector<RankPlace> block;
  for (int r = 0; r < 16; ++r) block.push_back({r < 8 ? "a" : "b", r % 8});
  EXPECT_EQ(describe_rank_places(block, Launcher::mpirun),
            "16 ranks on 2 nodes, placed by mpirun (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE): "
            "a runs ranks 0-7 (local 0-7); b runs ranks 8-15 (local 0-7)");
}

TEST(RankPlaces, OneRankTakesTheLaunchersNodeAndLocalRankOrTheHost) {
  LocalComm world;
  LaunchEnv srun;
  srun.launcher = Launcher::srun, srun.rank = 0, srun.size = 1, srun.local_rank = 5,
  srun.node = "n7";
  std::vector<RankPlace> p = gather_rank_places(world, srun);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].node, "n7");
  EXPECT_EQ(p[0].local_rank, 5);
  p = gather_rank_places(world, LaunchEnv{});  // no launcher: the host name, first on its node
  EXPECT_FALSE(p[0].node.empty());
  EXPECT_EQ(p[0].local_rank, 0);
}

}  // namespace
}  // namespace mt::parallel
