// A test suite that reads the bundled r PSF (BundledPsfPath) once: psf_ lives from the
// suite's first test to its last.
#ifndef SPEXD_TESTS_BUNDLED_PSF_TEST_H_
#define SPEXD_TESTS_BUNDLED_PSF_TEST_H_

#include <utility>

#include "core/io/psf.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace spexd::testing {

class BundledPsfTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto psf = core::Psf::Load(BundledPsfPath());
    ASSERT_TRUE(psf.ok()) << psf.status();
    psf_ = new core::Psf(*std::move(psf));
  }
  static void TearDownTestSuite() {
    delete psf_;
    psf_ = nullptr;
  }
  inline static core::Psf* psf_ = nullptr;
};

}  // namespace spexd::testing

#endif  // SPEXD_TESTS_BUNDLED_PSF_TEST_H_
