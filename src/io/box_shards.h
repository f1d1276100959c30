// A checkpoint of sharded parameters that any other split can read back: a set of safetensors
// files, each holding boxes of named F32 tensors, which together cover the full tensors. Every
// rank writes its own file with its own boxes (no gathering), and a job restarted on a different
// mesh asks for its new boxes; the pieces it needs are found by intersection.
//
// Each file is self-describing. Its tensors are the boxes (stored under the tensor's name, shape =
// box.shape()), and its "__metadata__" has one key, "meshtrain.boxes", whose value is the JSON
//   {"<name>": {"shape": [full shape...], "box": [[begin, end], ...]}, ...}
// so a reader needs no index and no knowledge of the mesh that wrote it. Pieces may overlap
// (replicas along the dp axis write equal values); any piece holding an element may supply it.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "core/tensor_box.h"

namespace mt {

inline constexpr const char* kBoxesMetadataKey = "meshtrain.boxes";

struct BoxShardOut {
  std::string name;
  std::vector<int64_t> full_shape;
  TensorBox box;                // within full_shape
  const float* data = nullptr;  // box.numel() floats, row-major over box.shape()
};

// Writes one file atomically (write_safetensors) and returns its CRC32C. mt::Error naming `path`
// if a box does not lie within its full shape or a name repeats.
uint32_t write_box_shard(const std::string& path, const std::vector<BoxShardOut>& boxes);

class BoxShardSet {
 public:
  // Maps every file and validates it: the metadata key is present and well-formed, every box lies
  // within its full shape, each stored tensor has its box's shape and a dtype readable as float,
  // the metadata and the stored tensors name the same set, and a name has one full shape across
  // all files. Errors are one line starting with the offending file's path.
  explicit BoxShardSet(const std::vector<std::string>& paths);

  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  const std::vector<int64_t>& full_shape(const std::string& name) const;  // mt::Error if unknown
  std::vector<std::string> names() const;                                  // sorted

  // Fills dst (box.numel() floats, row-major over the box) from every stored piece meeting the
  // box. mt::Error if the name is unknown, the box is out of bounds, or some element of the box
  // is in no piece ("<name>: box [..] is not covered by the shards ..."). With Finite::required,
  // a NaN or infinity read is refused naming the file, the tensor and the element: training
  // state is never legitimately non-finite, and it is checked here because only here is the
  // file each element came from known.
  enum class Finite { any, required };
  void read_box_f32(const std::string& name, const TensorBox& box, float* dst,
                    Finite finite = Finite::any) const;

 private:
  struct Piece {
    const SafetensorsFile* file;
    TensorBox box;
  };
  struct Tensor {
    std::vector<int64_t> full_shape;
    std::string first_path;  // where full_shape was first seen, for the mismatch message
    std::vector<Piece> pieces;
  };
  void add_file(const SafetensorsFile& file);
  const Tensor& tensor(const std::string& name) const;

  std::string desc_;  // names the set in errors not tied to one file
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, Tensor> tensors_;
};

}  // namespace mt
