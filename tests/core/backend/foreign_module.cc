// A stand-in for a CUDA module from another build: it exports the module's check entry
// point with the real implementation (core::CheckSameBuild), but with a foreign build id.
// module_identity_test.cc loads it through core::LoadCudaBackend.
#include <cstddef>

#include "core/backend/module_identity.h"

extern "C" __attribute__((visibility("default"))) int spexd_cuda_check_host(
    const char* build_id, const char* boundary_checksum, char* error, std::size_t error_size) {
  spexd::core::BuildIdentity foreign = spexd::core::ThisBuild();
  foreign.build_id = "0.0.0/other-compiler/foreign0token";
  const absl::Status same = spexd::core::CheckSameBuild(
      foreign, spexd::core::BuildIdentity{build_id, boundary_checksum}, "host executable");
  if (same.ok()) return 1;
  spexd::core::CopyMessage(same.message(), error, error_size);
  return 0;
}
