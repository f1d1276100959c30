#include "parallel/dist_config.h"

#include "core/toml.h"

#include <sstream>

#include "core/error.h"

namespace mt::parallel {

SplitConfig split_dist_config(const std::string& toml_text, const std::string& where) {
  SplitConfig out;
  out.dist.partition = parse_partition_toml(toml_text, where);  // also reports syntax errors
  toml::table doc = toml::parse(toml_text, where);
  if (const toml::node* m = doc.get("mesh")) {
    const toml::table* mt = m->as_table();
    if (!mt) fail(where + ": 'mesh' must be a table ([mesh])");
    MeshShape shape;
    for (auto&& [k, v] : *mt) {
      const std::string key(k.str());
      // mesh.auto says how the sizes were chosen (the run config's key, train --mesh auto); the
      // sizes beside it are the layout.
      if (key == "auto") {
        if (!v.is_boolean()) fail(where + ": mesh.auto must be true or false");
        continue;
      }
      Axis a = parse_axis(key, where + ": mesh." + key);
      if (!v.is_integer() || v.as_integer()->get() <= 0)
        fail(where + ": mesh." + key + " must be a positive integer");
      shape.size(a) = v.as_integer()->get();
    }
    out.dist.mesh = shape;
  }
  doc.erase("mesh");
  doc.erase("partition");
  std::ostringstream ss;
  ss << doc;
  out.rest_toml = ss.str();
  return out;
}

}  // namespace mt::parallel
