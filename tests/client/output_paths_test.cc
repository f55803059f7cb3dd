// How spexctl compares server output paths (one file under two spellings is one output)
// and prints them (a name holding a newline cannot split a result line).
#include "client/spexctl/output_paths.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"

namespace spexd::client {
namespace {

TEST(OutputPathKeyTest, SpellingsOfOneFileGiveOneKey) {
  char tmpl[] = "/tmp/spexd-output-paths-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ASSERT_EQ(::mkdir((dir + "/out").c_str(), 0755), 0);
  ASSERT_EQ(::symlink((dir + "/out").c_str(), (dir + "/alias").c_str()), 0);
  const std::string key = OutputPathKey(dir + "/out/a.fits");
  EXPECT_EQ(OutputPathKey(dir + "/out//a.fits"), key);
  EXPECT_EQ(OutputPathKey(dir + "//out/./a.fits"), key);
  EXPECT_EQ(OutputPathKey(dir + "/alias/a.fits"), key);  // a symlinked directory
  EXPECT_NE(OutputPathKey(dir + "/out/b.fits"), key);
  EXPECT_NE(OutputPathKey(dir + "/out/a.fits.gz"), key);
  // Directories that do not exist here (a server's own filesystem): spelling only.
  EXPECT_EQ(OutputPathKey("/no-such-dir//x/./a.fits"), OutputPathKey("/no-such-dir/x/a.fits"));
  EXPECT_NE(OutputPathKey("/no-such-dir/x/a.fits"), OutputPathKey("/no-such-dir/y/a.fits"));
  EXPECT_EQ(OutputPathKey("rel//a.fits"), OutputPathKey("./rel/a.fits"));
  ::unlink((dir + "/alias").c_str());
  ::rmdir((dir + "/out").c_str());
  ::rmdir(dir.c_str());
}

TEST(EscapeForLineTest, ControlBytesAndBackslashesAreEscapedTheRestKept) {
  EXPECT_EQ(EscapeForLine("/out/a b.fits"), "/out/a b.fits");
  EXPECT_EQ(EscapeForLine("/out/a\nb.fits"), "/out/a\\nb.fits");
  EXPECT_EQ(EscapeForLine("a\tb\rc\\d"), "a\\tb\\rc\\\\d");
  EXPECT_EQ(EscapeForLine(std::string("x\x01y\x7fz\x1b", 6)), "x\\x01y\\x7fz\\x1b");
  EXPECT_EQ(EscapeForLine("caf\xc3\xa9.fits"), "caf\xc3\xa9.fits");  // UTF-8 as is
  // A newline-holding name stays one line, and a backslash cannot forge an escape.
  const std::string forged = EscapeForLine("a\\nb");
  EXPECT_EQ(forged, "a\\\\nb");
  EXPECT_EQ(EscapeForLine("a\nb").find('\n'), std::string::npos);
}

}  // namespace
}  // namespace spexd::client
