// Output files: checked before any work starts, written whole or not at all.
//
// A file is written to a temporary name in its own directory and renamed over the target, so a
// reader (or a crash) never sees half a file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace flashlab {

// Throws UsageError unless a file can be created at `path` (its directory exists and is writable,
// and `path` is not a directory). Leaves nothing behind.
void check_output_file(const std::string& path);

// Throws UsageError unless `dir` is a writable directory or can be created (its nearest existing
// ancestor is a writable directory). Creates nothing.
void check_output_dir(const std::string& dir);

// Free bytes on the file system that holds `dir` (or its nearest existing ancestor); -1 if unknown.
int64_t free_disk_bytes(const std::string& dir);

// Creates `dir` and its parents when missing. Throws std::runtime_error on failure.
void make_dirs(const std::string& dir);

// Writes `data` to `path` atomically (temp file in the same directory + rename).
// Throws std::runtime_error with the path and the system's reason on failure.
void write_file_atomic(const std::string& path, std::string_view data);

}  // namespace flashlab
