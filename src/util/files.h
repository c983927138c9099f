// Output files: resolved and checked before any work starts, written whole or not at all.
//
// Where an output lands is decided once, up front (OutputTarget):
//   "-"                     stdout
//   /dev/stdout, a link to it, /proc/self/fd/1 ...
//                           the same stream as this process's stdout (or stderr): written to it
//   /dev/null, a FIFO ...   other special files: written in place (they cannot be renamed over)
//   a regular file, or none yet, possibly behind symlinks
//                           the link is followed, and the file is written to a temporary name in
//                           the target's own directory, then renamed over the target: the link
//                           stays a link, and a reader (or a crash) never sees half a file
//   a directory output      written into a hidden temporary directory beside it, then renamed into
//                           place (an earlier output of the same kind that is there is replaced)
//
// OutputSet writes several outputs together: every file and directory is staged first, and only
// when all of them are complete are they renamed into place; streams and special files are written
// last. A failure before that leaves nothing behind.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace flashlab {

struct OutputTarget {
  enum class Kind { none, stream, special, file, dir };
  Kind kind = Kind::none;
  std::string option;              // "--json", "-o", "--dump": for messages
  std::string given;               // as written on the command line
  std::string path;                // special, file, dir: absolute, symlinks followed
  int fd = -1;                     // stream: 1 (stdout) or 2 (stderr)
  bool exists = false;             // file, dir: something is there now
  uint64_t device = 0, inode = 0;  // of what is there now (exists or special)
  bool to_stdout() const { return kind == Kind::stream && fd == 1; }
};

// Resolves an output file (see above). Throws UsageError when it cannot be written: its directory
// is missing or not writable, it is a directory, a symlink loop, a name too long, a special file
// that is not writable.
OutputTarget output_file(const std::string& option, const std::string& given);

// Resolves an output directory. It may exist only when it is empty or `replaceable` says its
// contents are an earlier output that may be replaced; missing parents are created when it is
// written. Throws UsageError otherwise, or when no directory can be created there.
using ReplaceableDir = std::function<bool(const std::filesystem::path&)>;
OutputTarget output_dir(const std::string& option, const std::string& given,
                        const ReplaceableDir& replaceable);

// Throws UsageError when two outputs land on one file, directory or stream, when a file output lies
// inside a directory output, or when an output would overwrite one of the input files.
void check_distinct(const std::vector<OutputTarget>& outputs,
                    const std::vector<std::string>& inputs = {});

// Free bytes on the file system that would hold `path` (its nearest existing ancestor); -1 if
// unknown.
int64_t free_disk_bytes(const std::string& path);

class OutputSet {
 public:
  OutputSet();
  ~OutputSet();  // removes whatever was staged and not committed
  OutputSet(const OutputSet&) = delete;
  OutputSet& operator=(const OutputSet&) = delete;

  // A file output: written to its temporary name now (streams and special files: kept until
  // commit). Throws std::runtime_error with the path and the system's reason.
  void add_file(const OutputTarget& t, std::string_view data);

  // A directory output: creates its temporary directory now; `write` puts one file into it.
  class Dir {
   public:
    virtual ~Dir() = default;
    virtual void write(const std::string& name, std::string_view data) = 0;
  };
  Dir& add_dir(const OutputTarget& t);

  // Renames every staged file and directory into place, then writes streams and special files.
  void commit();

 private:
  struct Staged;
  std::vector<std::unique_ptr<Staged>> staged_;
};

// One file, whole or not at all: output_file(path) staged and committed.
void write_file_atomic(const std::string& path, std::string_view data);

}  // namespace flashlab
