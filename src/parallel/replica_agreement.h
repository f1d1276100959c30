// Refusing to start when ranks that hold the same tensor hold different values of it. dp replicas
// (and the fsdp/tp blocks they mirror), norms replicated over tp, and a tied embedding held by
// the first and the last pipeline stage each load their copy themselves (each host reads
// model.path); a copy that differs (another file on one host, a corrupted download) would train
// replicas that silently drift apart. require_same_model (train/run_agreement.h) compares names
// and shapes; this compares the values, as a CRC32C of each block.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor_box.h"
#include "parallel/comm.h"

namespace mt::parallel {

// One block of a tensor that this rank holds: the tensor's name, the block's place in the whole
// tensor, and the CRC32C of its values (as f32, so every copy dtype compares alike).
struct HeldBlock {
  std::string tensor;
  TensorBox box;
  uint32_t crc = 0;
};

// Collective over `group`: every block (same tensor, same box) held by more than one rank has the
// same checksum on all of them; otherwise throws mt::Error, on every rank alike, naming the first
// few tensors that differ and which ranks hold which checksum, after `what` (where the values came
// from):
//   "ranks hold different values of the same tensor (<what>): model.norm.weight [0:64]
//    (rank 0: crc32c 1a2b3c4d; rank 1: crc32c 99aa0011)"
// Every rank's list of (tensor, box, checksum) is gathered (two all-gathers of ~60 bytes per
// block), so every rank sees every copy of every block, whatever the mesh.
void require_equal_replicas(Comm& group, const std::vector<HeldBlock>& blocks, const std::string& what);

}  // namespace mt::parallel
