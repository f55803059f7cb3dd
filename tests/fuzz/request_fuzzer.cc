// libFuzzer target: request validation, from the bytes of an ExtractHeader to a patch plan
// and the selected bundles, as the server does it (server/rpc/request_decode.h:
// CheckHeaderFields, DecodeRequest, CheckRequest with the default limits; then
// core::Geometry::Create for an r-camera CCD). Every input must give a plan or an error
// status: never a crash, UB, a hang or a huge allocation. The PSF is the test PSF cut to its
// first 50 fibres (make_seeds.py): two bundles of the default size, so that an accepted
// request plans a tenth of a camera's fibres and the target runs ten times as many inputs.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/plan/geometry.h"
#include "core/io/psf.h"
#include "server/rpc/request_decode.h"
#include "spexd/v1/spexd.pb.h"

namespace {

const std::shared_ptr<const spexd::core::Psf>& TestPsf() {
  static const auto* psf = [] {
    auto loaded = spexd::core::Psf::Load(SPEXD_FUZZ_PSF);
    if (!loaded.ok()) __builtin_trap();
    return new std::shared_ptr<const spexd::core::Psf>(
        std::make_shared<const spexd::core::Psf>(*std::move(loaded)));
  }();
  return *psf;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  spexd::v1::ExtractHeader header;
  if (!header.ParseFromArray(data, static_cast<int>(size))) return 0;
  if (!spexd::server::CheckHeaderFields(header).ok()) return 0;
  const spexd::server::ServiceLimits limits;
  const bool subset = header.bundles_size() > 0 || header.fibers_size() > 0;
  auto decoded = spexd::server::DecodeRequest(header, subset, limits);
  if (!decoded.ok()) return 0;
  const std::vector<int>& bundles = decoded->request.bundles;
  auto params = spexd::server::CheckRequest(decoded->params, *TestPsf(), limits);
  if (!params.ok()) return 0;
  // Accepted requests must plan: the checks above are meant to leave nothing for
  // Geometry::Create to refuse or to choke on.
  auto geometry = spexd::core::Geometry::Create(TestPsf(), *params, 4128, 4114,
                                                /*cache_spots=*/false);
  if (!geometry.ok()) return 0;
  for (int b : bundles) {
    if (b < 0 || b >= (*geometry)->plan().nbundles) __builtin_trap();
  }
  return 0;
}
