// OpenMPI loaded at run time (libmpi.so.40, or the library DEEPEP_MPI_LIBRARY names): just enough of
// it for Group::from_mpi to learn MPI_COMM_WORLD's rank and size and broadcast the rendezvous
// address. Nothing links MPI: without it only Group::from_mpi fails, with a user error saying why.
#pragma once

namespace deepep::mpi {

struct World {
  int rank = 0;
  int size = 0;
};

// This process's MPI_COMM_WORLD. Initializes MPI when the process has not (and then finalizes it
// at exit, as OpenMPI's launcher expects).
World world();
// MPI_Bcast of `bytes` bytes over MPI_COMM_WORLD from `root` (collective).
void broadcast(void* data, int bytes, int root);

}  // namespace deepep::mpi
