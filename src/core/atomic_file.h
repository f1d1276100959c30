// Write a file so that readers see either the old file or the complete new one, never a torn
// one: write to "<path>.tmp.<pid>", fsync, rename over <path>, fsync the directory. Processes
// writing the same path at once each rename a complete file; the last one wins.
#pragma once
#include <functional>
#include <ostream>
#include <string>

namespace mt {

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& fill);

}  // namespace mt
