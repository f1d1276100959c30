// What the plan command prints: text tables for people, JSON for machines, SVG pictures (the
// memory breakdown per device, the search's throughput-memory front).
#pragma once
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "plan/search.h"

namespace mt::plan {

std::string describe_input(const PlanInput& in);  // one line: model, mode, batch, mesh, cluster
void print_plan(std::ostream& os, const Candidate& c);
void print_search(std::ostream& os, const SearchResult& r, size_t top);

nlohmann::json plan_json(const Candidate& c);
nlohmann::json search_json(const SearchResult& r, size_t top);

// A stacked bar of the memory items against the device's capacity.
std::string memory_svg(const Candidate& c);
// Tokens/s against peak memory per device for every layout the search evaluated; fitting layouts
// filled, the capacity as a vertical line.
std::string front_svg(const SearchResult& r, double capacity);

}  // namespace mt::plan
