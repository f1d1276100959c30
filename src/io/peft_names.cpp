#include "io/peft_names.h"

#include "model/transformer.h"

namespace mt {

std::string file_tensor_name(const std::string& prefix, const std::string& ours) {
  if (prefix == kPeftPrefix && (moe_router_copy_param(ours) || embedding_copy_param(ours)))
    return prefix + module_of_copy(ours);
  return prefix + ours;
}

}  // namespace mt
