#include "bootstrap/mpi.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "rt/env.h"
#include "rt/error.h"

namespace deepep::mpi {
namespace {

// OpenMPI's ABI: handles are pointers to its predefined objects (MPI_COMM_WORLD is
// &ompi_mpi_comm_world, MPI_BYTE is &ompi_mpi_byte); the functions are the standard ones.
struct Library {
  void* comm_world = nullptr;
  void* byte = nullptr;
  int (*initialized)(int*) = nullptr;
  int (*finalized)(int*) = nullptr;
  int (*init)(int*, char***) = nullptr;
  int (*finalize)() = nullptr;
  int (*comm_rank)(void*, int*) = nullptr;
  int (*comm_size)(void*, int*) = nullptr;
  int (*bcast)(void*, int, void*, int, void*) = nullptr;
};

template <class F>
void resolve(void* handle, const char* name, const std::string& path, F* out) {
  *out = reinterpret_cast<F>(dlsym(handle, name));
  RT_USER_CHECK(*out != nullptr, "deepep Group::from_mpi: ", path, " has no ", name,
                " (only OpenMPI is supported; create the group with TcpRendezvous instead)");
}

const Library& library() {
  static const Library lib = [] {
    const std::string path = rt::env_string("DEEPEP_MPI_LIBRARY", "libmpi.so.40");
    // RTLD_GLOBAL: OpenMPI's components, loaded by MPI_Init, resolve against libmpi's symbols.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      rt::throw_user_error(rt::str("deepep Group::from_mpi: cannot load ", path, " (OpenMPI): ", why ? why : "?",
                                   "; install OpenMPI (or set DEEPEP_MPI_LIBRARY), or create the group with "
                                   "TcpRendezvous"));
    }
    Library l;
    resolve(handle, "ompi_mpi_comm_world", path, &l.comm_world);
    resolve(handle, "ompi_mpi_byte", path, &l.byte);
    resolve(handle, "MPI_Initialized", path, &l.initialized);
    resolve(handle, "MPI_Finalized", path, &l.finalized);
    resolve(handle, "MPI_Init", path, &l.init);
    resolve(handle, "MPI_Finalize", path, &l.finalize);
    resolve(handle, "MPI_Comm_rank", path, &l.comm_rank);
    resolve(handle, "MPI_Comm_size", path, &l.comm_size);
    resolve(handle, "MPI_Bcast", path, &l.bcast);
    return l;
  }();
  return lib;
}

void check(int rc, const char* call) {
  RT_USER_CHECK(rc == 0, "deepep Group::from_mpi: ", call, " failed (MPI error ", rc, ")");
}

}  // namespace

World world() {
  const Library& l = library();
  int ready = 0, done = 0;
  check(l.initialized(&ready), "MPI_Initialized");
  check(l.finalized(&done), "MPI_Finalized");
  RT_USER_CHECK(!done, "deepep Group::from_mpi: MPI was already finalized in this process");
  if (!ready) {
    check(l.init(nullptr, nullptr), "MPI_Init");
    std::atexit([] {
      int finished = 0;
      library().finalized(&finished);
      if (!finished) library().finalize();
    });
  }
  World w;
  check(l.comm_rank(l.comm_world, &w.rank), "MPI_Comm_rank");
  check(l.comm_size(l.comm_world, &w.size), "MPI_Comm_size");
  return w;
}

void broadcast(void* data, int bytes, int root) {
  const Library& l = library();
  check(l.bcast(data, bytes, l.byte, root, l.comm_world), "MPI_Bcast");
}

}  // namespace deepep::mpi
