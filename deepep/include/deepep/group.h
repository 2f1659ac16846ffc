// A group of ranks: the processes that communicate. Created from a rendezvous over TCP (any
// launcher: torchrun/mpirun environment variables, fork in tests, ...). Every rank learns its rank,
// the size, its node (processes whose host identity is equal share a node) and its local rank.
//
// The rendezvous keeps one TCP connection from every rank to rank 0 (the root); it carries the
// control plane: small all-gathers and barriers used while creating communicators. Every wait is
// bounded by `timeout`: a rank that never shows up, dies or disagrees makes every other rank fail
// with a message that says which rank and why.
//
// Group::from_mpi creates it from OpenMPI's MPI_COMM_WORLD, Group::from_nccl from an existing NCCL
// communicator (both libraries loaded at run time): they only carry rank 0's address to the others.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace deepep {

struct TcpRendezvous {
  std::string address = "127.0.0.1";  // where rank 0 listens (IPv4 address or host name)
  int port = 0;                       // rank 0's port (with listen_fd, the port that socket listens on)
  int rank = -1;
  int size = 0;
  // Rank 0 only: a socket already listening on address:port (for example made by a parent before
  // fork, on an ephemeral port). -1: rank 0 binds and listens itself. The group takes ownership.
  int listen_fd = -1;
  // Bound for every wait of the rendezvous and of the control plane.
  std::chrono::milliseconds timeout{60000};
  // Node identity; empty: the host name. Ranks with equal identities share a node.
  std::string host_id;

  // From the environment: DEEPEP_RENDEZVOUS=host:port, else MASTER_ADDR and MASTER_PORT; rank from
  // DEEPEP_RANK, RANK, OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID; size from DEEPEP_WORLD_SIZE,
  // WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE or SLURM_NTASKS; timeout from DEEPEP_TIMEOUT_MS.
  static TcpRendezvous from_env();
};

struct PeerInfo {
  int rank = 0;
  std::string host;  // host identity (TcpRendezvous::host_id)
  int pid = 0;
  int node = 0;        // index of the host among the group's hosts, in order of first rank
  int local_rank = 0;  // index among the ranks of the same node, in rank order
};

class Group {
 public:
  // Joins the rendezvous; returns when all `size` ranks have joined. User error on bad options;
  // CommError when ranks disagree (world size, duplicate ranks) or do not arrive within the timeout.
  static std::shared_ptr<Group> create(const TcpRendezvous& options);
  // Collective over MPI_COMM_WORLD (OpenMPI, loaded at run time; MPI is initialized when the
  // process has not, and then finalized at exit): rank and size are MPI's, rank 0 listens on an
  // ephemeral port of its host and MPI broadcasts the address, then as create(). timeout 0:
  // DEEPEP_TIMEOUT_MS, else 60 s. User error when OpenMPI cannot be loaded.
  static std::shared_ptr<Group> from_mpi(std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  // Collective over an existing NCCL communicator (an ncclComm_t, as void* so that this header
  // needs no NCCL; NCCL loaded at run time): rank and size are the communicator's, rank 0 listens
  // on an ephemeral port and an ncclBroadcast of a small device buffer carries its address, then as
  // create(). Comms of this group with CommOptions::device_transport "nccl" reuse the communicator
  // for their data plane. The caller keeps ownership and destroys it after those Comms; a CommError
  // of that plane (or of this broadcast) has aborted it, and NCCL has freed it then. timeout 0:
  // DEEPEP_TIMEOUT_MS, else 60 s. User error when NCCL cannot be loaded.
  static std::shared_ptr<Group> from_nccl(void* nccl_comm,
                                          std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(peers_.size()); }
  int node() const { return peers_[rank_].node; }
  int num_nodes() const { return num_nodes_; }
  int local_rank() const { return peers_[rank_].local_rank; }
  int local_size() const;
  const PeerInfo& peer(int rank) const { return peers_.at(rank); }
  const std::vector<PeerInfo>& peers() const { return peers_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  std::string endpoint() const { return endpoint_; }  // "address:port" of the rendezvous
  // The NCCL communicator the group was made from (from_nccl); nullptr otherwise.
  void* nccl_comm() const { return nccl_comm_; }

  // Control plane (small messages through rank 0). Collective: every rank calls it in the same
  // order. `what` names the step in error messages.
  std::vector<std::string> allgather(const std::string& mine, const std::string& what = "allgather");
  void barrier(const std::string& what = "barrier");

 private:
  Group() = default;
  [[noreturn]] void fail(const std::string& message);

  int rank_ = 0;
  int num_nodes_ = 1;
  std::vector<PeerInfo> peers_;
  std::chrono::milliseconds timeout_{60000};
  std::string endpoint_;
  int root_fd_ = -1;           // non-root: the connection to rank 0
  std::vector<int> peer_fds_;  // root: connection of every other rank (index = rank)
  std::string broken_;         // set when a control-plane step failed; later calls fail with it
  void* nccl_comm_ = nullptr;  // from_nccl's communicator (not owned)
};

}  // namespace deepep
