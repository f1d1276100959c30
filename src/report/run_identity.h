// What a run trained, in the words of the report's first rows: the model, the data, the mode
// (full, LoRA or QLoRA, with the method and precision) and the mesh, read from its run.toml (and
// its summary's mesh, the layout a --mesh auto chose) so that a report found on its own says
// which run it is.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace mt::report {

// (label, value) rows; a value run.toml does not give reads "not recorded". Never throws: an
// unreadable run.toml gives "not recorded" rows.
std::vector<std::pair<std::string, std::string>> run_identity_rows(
    const std::string& config_toml, const std::optional<nlohmann::json>& summary);

}  // namespace mt::report
