// How spexctl compares and prints the paths of files a server writes: the same file
// under two spellings is one output, and a path printed on a result line cannot split it.
#ifndef SPEXD_CLIENT_OUTPUT_PATHS_H_
#define SPEXD_CLIENT_OUTPUT_PATHS_H_

#include <string>

#include "absl/strings/string_view.h"

namespace spexd::client {

// The file an output path names, for duplicate checks: empty and `.` components dropped
// (`a//b`, `a/./b` are `a/b`), and the directory resolved (symlinks followed, as the
// server's output check does) when it exists here, which it does on the shared
// filesystem where frame lists are made. `..` is kept as written: the server refuses it.
// The server checks the canonical paths itself; this finds a duplicate line before any
// request is sent.
std::string OutputPathKey(const std::string& path);

// `text` for one field of a line of output: a backslash becomes `\\`, a tab `\t`, a
// newline `\n`, a carriage return `\r`, and every other control byte (below 0x20, and
// 0x7f) `\xHH` with two lower-case hex digits; everything else, spaces and UTF-8
// included, is kept. A path holding a newline cannot split the `PATH SIZE bytes sha256
// HEX` line; the escapes are C's (Python: `codecs.decode(field, "unicode_escape")` for
// ASCII names).
std::string EscapeForLine(absl::string_view text);

}  // namespace spexd::client

#endif  // SPEXD_CLIENT_OUTPUT_PATHS_H_
