// The tests' main: as spexd's own programs do, it first lets OpenBLAS run the kernels spexd
// chooses (core/cpu/blas_core_type.h), so that a test comparing its in-process CPU
// extraction with a spexd process bit for bit compares the same arithmetic.
#include "core/cpu/blas_core_type.h"
#include "gtest/gtest.h"

int main(int argc, char** argv) {
  spexd::core::ReexecForOpenBlasCoreType(argv);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
