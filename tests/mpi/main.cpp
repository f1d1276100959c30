// GoogleTest under mpirun: every rank runs every test; only rank 0 prints; the exit code is
// non-zero on every rank if any rank failed, so mpirun (and ctest) report the failure.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#include "parallel/comm.h"

int main(int argc, char** argv) {
  // MULTIPLE, as the library asks for it (parallel/mpi_comm.cpp): the progress engine's thread and
  // the CUDA-on-CPU build's NCCL call MPI beside the main thread.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    std::fprintf(stderr, "meshtrain_mpi_tests: MPI provides thread level %d, not MPI_THREAD_MULTIPLE\n",
                 provided);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS() != 0;
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  mt::parallel::set_comm_progress(mt::parallel::CommProgress::off);  // its thread calls MPI
  MPI_Finalize();
  return any;
}
