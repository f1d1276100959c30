#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "parallel/comm.h"

namespace mt::parallel {

void LocalComm::all_gather_bytes(const void* in, void* out, int64_t n, int elem_bytes) {
  if (in != out) std::memmove(out, in, size_t(n) * size_t(elem_bytes));
}

void LocalComm::reduce_scatter_sum(const float* in, float* out, int64_t n) {
  if (in != out) std::memmove(out, in, size_t(n) * sizeof(float));
}

void LocalComm::broadcast_bytes(void*, int64_t, int root) {
  MT_CHECK(root == 0, "broadcast root outside a one-rank group");
}

Request LocalComm::iall_gather_bytes(const void* in, void* out, int64_t n, int elem_bytes) {
  all_gather_bytes(in, out, n, elem_bytes);
  return std::make_unique<CompletedRequest>();
}

Request LocalComm::ireduce_scatter_sum(const float* in, float* out, int64_t n) {
  reduce_scatter_sum(in, out, n);
  return std::make_unique<CompletedRequest>();
}

void LocalComm::send_bytes(const void*, int64_t, int peer, int) {
  fail("send to rank " + std::to_string(peer) + " in a single-process group");
}
void LocalComm::recv_bytes(void*, int64_t, int peer, int) {
  fail("recv from rank " + std::to_string(peer) + " in a single-process group");
}
Request LocalComm::isend_bytes(const void* data, int64_t bytes, int peer, int tag) {
  send_bytes(data, bytes, peer, tag);
  return nullptr;
}
Request LocalComm::irecv_bytes(void* data, int64_t bytes, int peer, int tag) {
  recv_bytes(data, bytes, peer, tag);
  return nullptr;
}

std::unique_ptr<Comm> LocalComm::split(int, int) { return std::make_unique<LocalComm>(); }

void LocalComm::abort(int code) { std::exit(code); }

}  // namespace mt::parallel
