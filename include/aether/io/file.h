// aether/io/file.h - whole-file reads and crash-safe (atomic) whole-file writes.
//
// write_file_atomic(path, bytes) never leaves a damaged file at `path`: it writes a temporary file
// in the same directory (mkstemp, named ".<name>.tmp-XXXXXX"), fsyncs it, renames it over `path`
// and fsyncs the directory. On any failure the temporary file is removed and the old file (if
// any) is untouched; readers see either the complete old file or the complete new one.
// The writer holds an flock on its temporary file until the rename. A writer that dies (kill -9,
// a crash, power loss) leaves its temporary file behind; the next write_file_atomic to the same
// path removes every ".<name>.tmp-XXXXXX" that no live writer holds locked, and never the file of
// a save still in progress (in this process or another).
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "aether/core/error.h"

namespace aether {

// The error for a file that could not be opened: "<path>: <what>: <strerror(err)>", of kind
// ErrorKind::not_found when the file or a folder on its path is not there (ENOENT, ENOTDIR), else
// ErrorKind::runtime (no permission, a folder where a file belongs...). err is the open's errno.
Error open_error(const std::string& path, std::string_view what, int err);

// The whole file as bytes. Throws aether::Error "<path>: cannot read: <reason>".
std::string read_file(const std::string& path);

// Replaces `path` with `bytes` atomically (see above). A new file gets mode 0644; a replaced file
// keeps its permission bits (a symbolic link at `path` is replaced by the file, not followed).
// Throws aether::Error "<path>: cannot save: <reason>".
void write_file_atomic(const std::string& path, std::string_view bytes);

// Throws aether::Error "<op>: <what> '<path>' ..." naming the reason unless write_file_atomic could
// write `path` now: a name is given, `path` is not a directory or another non-regular file, its
// directory exists, is a directory and is writable, and the name leaves room for the temporary
// file's. For a check before work whose result would be lost (training that saves checkpoints).
void check_writable_file(const std::string& path, const std::string& op, const std::string& what);

namespace detail {
// Test hook: write_file_atomic calls hook(stage) at "created" (temp file exists, empty),
// "partially_written" (half the bytes written), "written" (all written, not yet synced) and
// "synced" (fsynced and closed, not yet renamed). A hook that throws simulates a failure (crash,
// full disk) at that stage. Pass an empty function to remove it. Not thread-safe; tests only.
void set_atomic_write_hook(std::function<void(const char* stage)> hook);
}  // namespace detail

}  // namespace aether
