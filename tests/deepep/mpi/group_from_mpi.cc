// Group::from_mpi under mpirun (ctest runs it on 4 ranks when OpenMPI's launcher is installed): the
// group's rank and size are MPI's, its control plane works (an all-gather of every rank's pid) and
// a communicator on it reduces correctly. Exits non-zero with a message on any failure.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "deepep/collectives.h"
#include "deepep/comm.h"
#include "deepep/group.h"
#include "rt/tensor.h"

namespace {

int fail(int rank, const std::string& what) {
  std::fprintf(stderr, "group_from_mpi (rank %d): %s\n", rank, what.c_str());
  return 1;
}

}  // namespace

int main() {
  const char* env_rank = std::getenv("OMPI_COMM_WORLD_RANK");
  const char* env_size = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (!env_rank || !env_size) return fail(-1, "not started by OpenMPI's mpirun (no OMPI_COMM_WORLD_RANK/SIZE)");
  const int rank = std::atoi(env_rank), size = std::atoi(env_size);
  try {
    const auto g = deepep::Group::from_mpi(std::chrono::seconds(30));
    if (g->rank() != rank || g->size() != size)
      return fail(rank, "the group says rank " + std::to_string(g->rank()) + " of " + std::to_string(g->size()));
    const auto pids = g->allgather(std::to_string(getpid()), "pids");
    if (pids[size_t(rank)] != std::to_string(getpid())) return fail(rank, "the all-gather lost this rank's pid");
    for (int r = 0; r < size; ++r)
      if (g->peer(r).pid != std::stoi(pids[size_t(r)])) return fail(rank, "rank " + std::to_string(r) + "'s pid differs");
    deepep::Comm comm(g);
    rt::Tensor t = rt::Tensor::empty({1000}, rt::DType::F32);
    for (int64_t i = 0; i < 1000; ++i) t.data_as<float>()[i] = float(rank * 1000 + i);
    deepep::all_reduce(comm, t);
    for (int64_t i = 0; i < 1000; ++i) {
      const float want = float(size * (size - 1) / 2 * 1000 + size * i);
      if (t.data_as<float>()[i] != want)
        return fail(rank, "all_reduce element " + std::to_string(i) + " = " + std::to_string(t.data_as<float>()[i]) +
                              ", want " + std::to_string(want));
    }
  } catch (const std::exception& e) {
    return fail(rank, e.what());
  }
  if (rank == 0) std::printf("group_from_mpi: %d ranks from MPI_COMM_WORLD, all-gather and all_reduce correct\n", size);
  return 0;
}
