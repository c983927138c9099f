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
// OutputSet writes several outputs together: every file and directory is staged first, then the
// streams and special files are written, and only when all of that succeeded are the staged files
// and directories renamed into place (all of them while no signal can intervene). A failure, or a
// signal (install_signal_cleanup), before that leaves nothing in place and removes what was staged.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace flashlab {

struct OutputTarget {
  enum class Kind { none, stream, special, file, dir };
  Kind kind = Kind::none;
  std::string option;              // "--json", "-o", "--dump": for messages
  std::string given;               // as written on the command line
  std::string path;                // special, file, dir: symlinks followed; absolute where the
                                   // working directory has a name (relative in one that is too
                                   // deep to name, or deleted)
  int fd = -1;                     // stream: 1 (stdout) or 2 (stderr)
  bool exists = false;             // file, dir: something is there now
  uint64_t device = 0, inode = 0;  // of what is there now (exists or special)
  // file: its directory and name, which say that two paths (through a bind mount, say) name one
  // new file
  uint64_t dir_device = 0, dir_inode = 0;
  std::string name;
  bool to_stdout() const { return kind == Kind::stream && fd == 1; }
};

// Resolves an output file (see above). Throws UsageError when it cannot be written: its directory
// is missing or not writable, it is a directory, a symlink loop, a name too long, a special file
// that is not writable or cannot be opened (/dev/tty without a terminal).
OutputTarget output_file(const std::string& option, const std::string& given);

// Resolves an output directory. It may exist only when it is empty or `replaceable` says its
// contents are an earlier output that may be replaced; missing parents are created when it is
// written. Throws UsageError otherwise, when no directory can be created there, when it is a
// mount point (it cannot be renamed over) or when it holds the working directory.
using ReplaceableDir = std::function<bool(const std::filesystem::path&)>;
// The file a run creates for a moment to test that it may write in a directory (and removes at
// once): another run checking the same directory meanwhile sees it, and must not count it.
bool is_write_probe(std::string_view name);
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

// Signals. Call once at the start of main, before any thread is started: SIGINT, SIGTERM, SIGHUP
// and SIGQUIT are then taken by a thread of their own, which removes every staged output (and every
// StagedPath) and exits with status 128 + the signal; SIGPIPE is ignored, so a write to a closed
// pipe fails with EPIPE (and is reported) instead of killing the process without a word. Standard
// streams that are closed are held open on /dev/null for reading, so no file the program opens
// takes their numbers and every write to them fails (EBADF).
void install_signal_cleanup();

// A temporary file or directory (tree) that a signal removes until release() is called.
// Creating, filling and renaming it happen under staging_lock(), so a signal waits for the step
// under way and never sees half of one.
class StagedPath {
 public:
  StagedPath(std::string path, bool is_dir);
  ~StagedPath();  // forgets the path (does not remove it)
  StagedPath(const StagedPath&) = delete;
  StagedPath& operator=(const StagedPath&) = delete;

 private:
  std::string path_;
};
std::unique_lock<std::mutex> staging_lock();

// True when this standard stream (1 or 2) was closed when the program started.
bool stream_was_closed(int fd);

// Writes all of `data` to stdout (fd 1); throws std::runtime_error ("cannot write to stdout: ...")
// when it cannot.
void write_stdout(std::string_view data);

// One file, whole or not at all: output_file(path) staged and committed.
void write_file_atomic(const std::string& path, std::string_view data);

}  // namespace flashlab
