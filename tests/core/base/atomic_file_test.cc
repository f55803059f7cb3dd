// core::AtomicFile: the path holds the old file or the whole new one, never a
// part; a temporary dropped uncommitted, named or not, leaves nothing behind.
#include "core/base/atomic_file.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/write_fully.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

using spexd::testing::MakeTempDir;
using spexd::testing::ReadBytes;

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out.push_back(e.path().filename().string());
  }
  return out;
}

void Write(const AtomicFile& f, const std::string& bytes) {
  ASSERT_TRUE(WriteFully(f.fd(), bytes.data(), bytes.size(), -1, f.path()).ok());
}

TEST(AtomicFileTest, CommitReplacesThePathWhole) {
  for (bool unnamed : {true, false}) {
    SCOPED_TRACE(unnamed ? "unnamed" : "named");
    const std::string dir = MakeTempDir();
    const std::string path = dir + "/frame.fits";
    ASSERT_TRUE(spexd::testing::WriteBytes(path, "old"));
    auto f = AtomicFile::Create(path, unnamed);
    ASSERT_TRUE(f.ok()) << f.status();
    Write(*f, "new contents");
    EXPECT_EQ(ReadBytes(path), "old");  // nothing shows before Commit
    if (!unnamed || !f->temporary_name().empty()) {
      EXPECT_TRUE(std::filesystem::exists(f->temporary_name()));
    }
    ASSERT_TRUE(f->Commit().ok());
    EXPECT_EQ(ReadBytes(path), "new contents");
    EXPECT_EQ(Entries(dir), std::vector<std::string>{"frame.fits"});
    EXPECT_EQ(f->Commit().code(), absl::StatusCode::kFailedPrecondition);
  }
}

TEST(AtomicFileTest, UncommittedLeavesNothing) {
  for (bool unnamed : {true, false}) {
    SCOPED_TRACE(unnamed ? "unnamed" : "named");
    const std::string dir = MakeTempDir();
    {
      auto f = AtomicFile::Create(dir + "/frame.fits", unnamed);
      ASSERT_TRUE(f.ok()) << f.status();
      Write(*f, "partial");
      AtomicFile moved = *std::move(f);  // the temporary follows its owner
      EXPECT_EQ(Entries(dir).size(), unnamed && moved.temporary_name().empty() ? 0u : 1u);
    }
    EXPECT_TRUE(Entries(dir).empty());
  }
}

TEST(AtomicFileTest, FailuresAreErrorsAndLeaveNothing) {
  EXPECT_EQ(AtomicFile::Create("/nonexistent-dir/frame.fits").status().code(),
            absl::StatusCode::kInvalidArgument);
  // The rename fails (the path is a directory): an error, and no temporary is left.
  for (bool unnamed : {true, false}) {
    SCOPED_TRACE(unnamed ? "unnamed" : "named");
    const std::string dir = MakeTempDir();
    std::filesystem::create_directories(dir + "/frame.fits/inside");
    auto f = AtomicFile::Create(dir + "/frame.fits", unnamed);
    ASSERT_TRUE(f.ok()) << f.status();
    Write(*f, "data");
    const absl::Status st = f->Commit();
    EXPECT_EQ(st.code(), absl::StatusCode::kInternal) << st;
    EXPECT_NE(st.message().find("rename failed"), std::string::npos) << st;
    EXPECT_EQ(Entries(dir), std::vector<std::string>{"frame.fits"});
  }
}

// Temporaries are unguessable and created exclusively: files at every name the pid-and-
// counter scheme would give ("<path>.tmp-<pid>-<n>") neither fail the write nor are
// removed by it, named temporary or not.
TEST(AtomicFileTest, FilesAtGuessableTemporaryNamesAreNeitherFatalNorRemoved) {
  const std::string dir = MakeTempDir();
  const std::string path = dir + "/frame.fits";
  constexpr int kPlanted = 256;
  auto planted = [&](int n) { return absl::StrCat(path, ".tmp-", ::getpid(), "-", n); };
  for (int n = 0; n < kPlanted; ++n) {
    auto f = ::fopen(planted(n).c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("theirs", f);
    std::fclose(f);
  }
  for (bool unnamed : {true, false}) {
    SCOPED_TRACE(unnamed ? "unnamed" : "named");
    for (int i = 0; i < 3; ++i) {
      auto f = AtomicFile::Create(path, unnamed);
      ASSERT_TRUE(f.ok()) << f.status();
      Write(*f, "ours");
      ASSERT_TRUE(f->Commit().ok());
      EXPECT_EQ(ReadBytes(path), "ours");
    }
    ASSERT_TRUE(AtomicFile::Create(path, unnamed).ok());  // dropped: its own name only
  }
  for (int n = 0; n < kPlanted; ++n) ASSERT_EQ(ReadBytes(planted(n)), "theirs") << n;
  EXPECT_EQ(Entries(dir).size(), static_cast<std::size_t>(kPlanted + 1));
  // Names drawn are distinct and carry 16 hex digits.
  const std::string a = RandomTemporaryName("p"), b = RandomTemporaryName("p");
  EXPECT_NE(a, b);
  ASSERT_EQ(a.size(), std::string("p.tmp-").size() + 16) << a;
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef", 6), std::string::npos) << a;
}

}  // namespace
}  // namespace spexd::core
