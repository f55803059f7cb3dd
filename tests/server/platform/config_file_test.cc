#include "server/platform/config_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <future>

#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace spexd::server {
namespace {

TEST(ConfigFileTest, KeyValueLinesBecomeFlags) {
  auto args = ConfigTextToArgs(
      "# spexd.conf\n"
      "listen = 127.0.0.1:6000\n"
      "\n"
      "data-roots=/data/a,/data/b   # two roots\n"
      "--max_queue = 4\n"
      "tls_cert=\n",
      "spexd.conf");
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(*args, (std::vector<std::string>{"--listen=127.0.0.1:6000", "--data_roots=/data/a,/data/b",
                                             "--max_queue=4", "--tls_cert="}));
}

TEST(ConfigFileTest, ErrorsNameTheLine) {
  auto bad = ConfigTextToArgs("listen = x\nnonsense\n", "c.conf");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("c.conf:2"), absl::string_view::npos) << bad.status();
  EXPECT_FALSE(ConfigTextToArgs("= value\n", "c").ok());
  EXPECT_FALSE(ConfigTextToArgs("config = other.conf\n", "c").ok());
  EXPECT_FALSE(ConfigFileToArgs("/nonexistent/spexd.conf").ok());
}

TEST(ConfigFileTest, CommandLineOverridesTheFile) {
  const std::string path = testing::MakeTempDir() + "/spexd.conf";
  std::ofstream(path) << "max_queue = 4\nlisten = 0.0.0.0:1\n";
  std::string a0 = "spexd", a1 = "--config=" + path, a2 = "--listen=127.0.0.1:2";
  char* argv[] = {a0.data(), a1.data(), a2.data()};
  auto merged = MergeConfigArgs(3, argv);
  ASSERT_TRUE(merged.ok()) << merged.status();
  // File flags first, command line after: absl keeps the last value of a flag.
  EXPECT_EQ(*merged, (std::vector<std::string>{"spexd", "--max_queue=4", "--listen=0.0.0.0:1", a1, a2}));
}

// Only a regular file of bounded size is read: what else --config may name by mistake is
// refused with a message naming it, at once (a FIFO would block startup for ever,
// /dev/zero fill memory, a directory read as an empty config).
TEST(ConfigFileTest, OnlyARegularFileOfBoundedSize) {
  const std::string dir = testing::MakeTempDir();
  auto refused = [](const std::string& path, absl::string_view says) {
    auto args = ConfigFileToArgs(path);
    ASSERT_FALSE(args.ok()) << path;
    EXPECT_EQ(args.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(args.status().message().find(path), absl::string_view::npos) << args.status();
    EXPECT_NE(args.status().message().find(says), absl::string_view::npos) << args.status();
  };
  refused(dir, "it is a directory, not a regular file");
  refused("/dev/zero", "it is a character device");
  const std::string big = dir + "/big.conf";
  {
    std::ofstream out(big);
    const std::string line = "# " + std::string(1000, 'x') + "\n";
    for (int64_t written = 0; written <= kMaxConfigFileBytes; written += line.size()) out << line;
  }
  refused(big, "it is over");
  // A symlink to a regular file is followed (a Kubernetes ConfigMap's files are links).
  const std::string real = dir + "/real.conf", link = dir + "/link.conf";
  std::ofstream(real) << "max_queue = 4\n";
  ASSERT_EQ(::symlink(real.c_str(), link.c_str()), 0);
  auto linked = ConfigFileToArgs(link);
  ASSERT_TRUE(linked.ok()) << linked.status();
  EXPECT_EQ(*linked, std::vector<std::string>{"--max_queue=4"});

  const std::string fifo = dir + "/fifo.conf";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto read = std::async(std::launch::async, [&] { return ConfigFileToArgs(fifo); });
  if (read.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    ADD_FAILURE() << "reading a FIFO as the config file blocks";
    const int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);  // unblocks the reader
    if (w >= 0) ::close(w);
  }
  auto args = read.get();
  ASSERT_FALSE(args.ok());
  EXPECT_NE(args.status().message().find("it is a FIFO"), absl::string_view::npos) << args.status();
}

}  // namespace
}  // namespace spexd::server
