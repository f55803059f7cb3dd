// spexctl's command line: the flag parser (client/spexctl/cli_args.h) and the extract command it
// feeds (client/spexctl/extract_flags.h), shared by the local and the remote mode.
#include "client/spexctl/extract_flags.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "client/spexctl/cli_args.h"
#include "client/spexctl/desispec_path_rule.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace spexd::client {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<ExtractCommand> Parse(const std::vector<std::string>& args,
                                     const DefaultPath& default_path = {}) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(ExtractFlagSpecs(), args);
  if (!parsed.ok()) return parsed.status();
  return ParseExtractCommand(*parsed, default_path);
}

TEST(CliArgs, ShortAndLongNamesAndPositionals) {
  const std::vector<FlagSpec> specs = {{"input", 'i', true, ""}, {"quiet", 'q', false, ""}};
  absl::StatusOr<ParsedArgs> a = ParseArgs(specs, {"-i", "x.fits", "--quiet", "extra"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->GetOr("input", ""), "x.fits");
  EXPECT_TRUE(a->Has("quiet"));
  EXPECT_EQ(a->positional(), std::vector<std::string>{"extra"});
}

TEST(CliArgs, UnknownFlagAndMissingValueNameTheFlag) {
  const std::vector<FlagSpec> specs = {{"input", 'i', true, ""}};
  absl::StatusOr<ParsedArgs> unknown = ParseArgs(specs, {"--bogus", "1"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(unknown.status()));
  EXPECT_THAT(unknown.status().message(), HasSubstr("bogus"));
  absl::StatusOr<ParsedArgs> missing = ParseArgs(specs, {"--input"});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("input"));
}

TEST(ExtractFlags, DesiExtractSpectraFlagsFillTheParameters) {
  absl::StatusOr<ExtractCommand> c =
      Parse({"-i", "in.fits", "-p", "psf.fits", "-o", "out.fits", "-w", "5760.0,7620.0,0.8",
             "-s", "25", "-n", "50", "--compat", "cpu", "--mask-policy", "any", "--threads",
             "3", "--backend", "cuda"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->input, "in.fits");
  EXPECT_TRUE(c->params.has_wavelength);
  EXPECT_EQ(c->params.wmin, 5760.0);
  EXPECT_EQ(c->params.wmax, 7620.0);
  EXPECT_EQ(c->params.dw, 0.8);
  EXPECT_EQ(c->params.specmin, 25);
  EXPECT_EQ(c->params.nspec, 50);
  EXPECT_EQ(c->params.compat, core::Compat::kCpu);
  EXPECT_EQ(c->params.mask_policy, core::MaskPolicy::kAnyBit);
  EXPECT_EQ(c->threads, 3);
  EXPECT_EQ(c->backend, core::BackendKind::kCuda);
  EXPECT_TRUE(c->local);  // no server named
}

TEST(ExtractFlags, DefaultsAreDesiExtractSpectras) {
  absl::StatusOr<ExtractCommand> c = Parse({"-i", "a", "-p", "b", "-o", "c"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->params.has_wavelength);
  EXPECT_EQ(c->params.nspec, 500);
  EXPECT_EQ(c->params.bundlesize, 25);
  EXPECT_EQ(c->params.nsubbundles, 5);
  EXPECT_EQ(c->params.nwavestep, 50);
  EXPECT_EQ(c->params.compat, core::Compat::kGpu);
  EXPECT_EQ(c->backend, core::BackendKind::kCpu);
  EXPECT_FALSE(c->params.psferr.has_value());
}

TEST(ExtractFlags, BadValuesAreRejectedWithTheFlagNamed) {
  struct Case {
    std::vector<std::string> extra;
    std::string expect;
  };
  for (const Case& k : std::vector<Case>{{{"--backend", "gpu"}, "backend"},
                                          {{"--compat", "both"}, "--compat"},
                                          {{"--mask-policy", "all"}, "--mask-policy"},
                                          {{"-w", "5760,7620"}, "--wavelength"},
                                          {{"--local", "--server", "h:1"}, "exclusive"}}) {
    std::vector<std::string> args = {"-i", "a", "-p", "b", "-o", "c"};
    args.insert(args.end(), k.extra.begin(), k.extra.end());
    absl::StatusOr<ExtractCommand> c = Parse(args);
    ASSERT_FALSE(c.ok()) << k.expect;
    EXPECT_TRUE(absl::IsInvalidArgument(c.status())) << c.status();
    EXPECT_THAT(c.status().message(), HasSubstr(k.expect));
  }
}

TEST(ExtractFlags, RequiredFilesAreNamedWhenMissing) {
  absl::StatusOr<ExtractCommand> c = Parse({"-p", "b", "-o", "c"});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("--input"));
}

TEST(ExtractFlags, NewAndDeprecatedSpellingsFillTheSameOption) {
  absl::StatusOr<ExtractCommand> c =
      Parse({"-i", "a", "-p", "b", "-o", "c", "--reproduce", "gpu_specter_cpu", "--cpu-threads", "3"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->params.compat, core::Compat::kCpu);
  EXPECT_EQ(c->threads, 3);
  c = Parse({"-i", "a", "-p", "b", "-o", "c", "--compat=gpu_specter_cpu", "--threads=2"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->params.compat, core::Compat::kCpu);
  EXPECT_EQ(c->threads, 2);
  c = Parse({"-i", "a", "-p", "b", "-o", "c", "--reproduce", "gpu"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->params.compat, core::Compat::kGpu);
  absl::StatusOr<ParsedArgs> both =
      ParseArgs(ExtractFlagSpecs(), {"--threads", "1", "--cpu-threads", "2"});
  ASSERT_FALSE(both.ok());
  EXPECT_THAT(both.status().message(), HasSubstr("same option"));
  // The same spelling twice keeps the last value, as absl::Flags does.
  absl::StatusOr<ParsedArgs> twice = ParseArgs(ExtractFlagSpecs(), {"--threads", "1", "--threads", "2"});
  ASSERT_TRUE(twice.ok()) << twice.status();
  EXPECT_EQ(twice->GetOr("cpu-threads", ""), "2");
}

TEST(ExtractFlags, HelpMarksTheDeprecatedSpellings) {
  const std::string help = FormatHelp(ExtractFlagSpecs());
  EXPECT_THAT(help, HasSubstr("--compat VALUE"));
  EXPECT_THAT(help, HasSubstr("deprecated spelling of --reproduce"));
  EXPECT_THAT(help, HasSubstr("deprecated spelling of --cpu-threads"));
  EXPECT_THAT(help, HasSubstr("not where the work runs"));
}

// desi_extract_spectra's remaining options: names, defaults and meaning.
TEST(ExtractFlags, DesiExtractSpectraOptionsAccepted) {
  absl::StatusOr<ExtractCommand> d = Parse({"-i", "in.fits", "-p", "psf.fits", "-o", "out.fits"});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->params.pixpad_frac, 0.8);
  EXPECT_EQ(d->params.wavepad_frac, 0.2);
  EXPECT_FALSE(d->params.barycentric_correction);
  EXPECT_TRUE(d->params.scores);
  EXPECT_EQ(d->params.compat, core::Compat::kGpu);
  absl::StatusOr<ExtractCommand> c =
      Parse({"-i", "in.fits", "-p", "psf.fits", "-o", "out.fits", "-f", "fibermap.fits",
             "--barycentric-correction", "--no-scores", "-r", "0.1", "--pixpad-frac", "0.5",
             "--wavepad-frac", "0.3", "--no-gpu", "-v",
             "--mask-policy", "desispec-exact"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->fibermap, "fibermap.fits");
  EXPECT_TRUE(c->params.barycentric_correction);
  EXPECT_FALSE(c->params.scores);
  EXPECT_EQ(c->params.regularize, 0.1);
  EXPECT_EQ(c->params.pixpad_frac, 0.5);
  EXPECT_EQ(c->params.wavepad_frac, 0.3);
  EXPECT_TRUE(c->verbose);
  EXPECT_EQ(c->backend, core::BackendKind::kCpu);
  EXPECT_EQ(c->params.compat, core::Compat::kCpu);  // desispec --no-gpu: gpu_specter's CPU path
  EXPECT_EQ(c->params.mask_policy, core::MaskPolicy::kDesispecExact);
  // An explicit --compat wins; --no-gpu with the CUDA backend is a contradiction.
  auto g = Parse({"-i", "a", "-p", "b", "-o", "c", "--no-gpu", "--compat", "gpu"});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->params.compat, core::Compat::kGpu);
  auto bad = Parse({"-i", "a", "-p", "b", "-o", "c", "--no-gpu", "--backend", "cuda"});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("--no-gpu"));
}

// --use-specter (classic specter in desispec) is refused, naming the difference, not
// taken as gpu_specter's extraction.
TEST(ExtractFlags, UseSpecterRefused) {
  auto r = Parse({"-i", "a", "-p", "b", "-o", "c", "--use-specter"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("classic specter"));
  EXPECT_THAT(r.status().message(), HasSubstr("0.115 sigma"));
}

// desi_extract_spectra's command line without --no-gpu: the gpu_specter path desispec
// would reproduce on this node (the rule given), not always the GPU path; --reproduce and
// --no-gpu still decide when given, and the rule is then not asked.
TEST(ExtractFlags, WithoutReproduceTheNodesRuleDecides) {
  int asked = 0;
  auto node = [&asked](core::Compat compat) -> DefaultPath {
    return [&asked, compat]() -> absl::StatusOr<PathChoice> {
      ++asked;
      return PathChoice{compat, "test rule"};
    };
  };
  auto c = Parse({"-i", "a", "-p", "b", "-o", "c"}, node(core::Compat::kCpu));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->params.compat, core::Compat::kCpu);
  EXPECT_EQ(c->reproduce_why, "test rule");
  c = Parse({"-i", "a", "-p", "b", "-o", "c"}, node(core::Compat::kGpu));
  EXPECT_EQ(c->params.compat, core::Compat::kGpu);
  EXPECT_EQ(asked, 2);
  c = Parse({"-i", "a", "-p", "b", "-o", "c", "--reproduce", "gpu_specter_gpu"},
            node(core::Compat::kCpu));
  EXPECT_EQ(c->params.compat, core::Compat::kGpu);
  EXPECT_EQ(c->reproduce_why, "--reproduce");
  c = Parse({"-i", "a", "-p", "b", "-o", "c", "--no-gpu"}, node(core::Compat::kGpu));
  EXPECT_EQ(c->params.compat, core::Compat::kCpu);
  EXPECT_EQ(c->reproduce_why, "--no-gpu");
  EXPECT_EQ(asked, 2);
  auto failing = []() -> absl::StatusOr<PathChoice> {
    return absl::InvalidArgumentError("$SPEXD_DESI_GPU must be 0 or 1");
  };
  EXPECT_THAT(Parse({"-i", "a", "-p", "b", "-o", "c"}, failing).status().message(),
              HasSubstr("SPEXD_DESI_GPU"));
}

// The rule itself: $DESI_NO_GPU first (its presence), then $SPEXD_DESI_GPU, then the CUDA
// driver's device count.
TEST(DesispecPathRule, EnvironmentThenTheDriver) {
  struct Env {
    const char* name;
    std::string saved;
    bool had;
    explicit Env(const char* n) : name(n), had(getenv(n) != nullptr) {
      if (had) saved = getenv(n);
      unsetenv(n);
    }
    ~Env() {
      if (had) setenv(name, saved.c_str(), 1);
      else unsetenv(name);
    }
  } no_gpu("DESI_NO_GPU"), forced("SPEXD_DESI_GPU");
  setenv("SPEXD_DESI_GPU", "1", 1);
  auto r = DesispecPathRule();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->compat, core::Compat::kGpu);
  EXPECT_EQ(r->why, "$SPEXD_DESI_GPU=1");
  setenv("DESI_NO_GPU", "", 1);  // set, even empty: desispec.gpu tests presence
  r = DesispecPathRule();
  EXPECT_EQ(r->compat, core::Compat::kCpu);
  EXPECT_EQ(r->why, "$DESI_NO_GPU is set");
  unsetenv("DESI_NO_GPU");
  setenv("SPEXD_DESI_GPU", "yes", 1);
  EXPECT_FALSE(DesispecPathRule().ok());
  setenv("SPEXD_DESI_GPU", "0", 1);
  EXPECT_EQ(DesispecPathRule()->compat, core::Compat::kCpu);
  unsetenv("SPEXD_DESI_GPU");
  r = DesispecPathRule();  // this node: GPU only where the driver's nodes or count show one
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->compat == core::Compat::kGpu,
            r->why.find("the CUDA driver sees ") == 0 ||
                r->why.find("the NVIDIA driver's device nodes show ") == 0)
      << r->why;
}

// The device nodes a GPU node's rule counts instead of initialising the driver: nvidiaN
// beside a usable nvidiactl; the driver's other nodes (nvidia-uvm, nvidia-modeset, nvidia-caps)
// are not GPUs.
TEST(DesispecPathRule, DeviceNodesAreTheNumberedOnesBesideNvidiactl) {
  const std::string dev = ::testing::TempDir() + "/spexctl_dev_nodes";
  std::filesystem::remove_all(dev);
  std::filesystem::create_directories(dev);
  auto touch = [&](const char* name) { std::ofstream(dev + "/" + name) << ""; };
  touch("nvidia0");
  touch("nvidia1");
  EXPECT_EQ(UsableDeviceNodes(dev), 0);  // no nvidiactl: no driver to talk to
  touch("nvidiactl");
  touch("nvidia-uvm");
  touch("nvidia-modeset");
  touch("nvidia12");
  std::filesystem::create_directories(dev + "/nvidia-caps");
  EXPECT_EQ(UsableDeviceNodes(dev), 3);
  EXPECT_EQ(UsableDeviceNodes(dev + "/absent"), 0);
  std::filesystem::remove_all(dev);
}

}  // namespace
}  // namespace spexd::client
