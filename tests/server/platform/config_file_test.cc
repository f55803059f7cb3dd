#include "server/platform/config_file.h"

#include <fstream>

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

}  // namespace
}  // namespace spexd::server
