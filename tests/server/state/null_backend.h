// A backend that extracts nothing and succeeds: the scheduler tests' workers.
#ifndef SPEXD_TESTS_SERVER_NULL_BACKEND_H_
#define SPEXD_TESTS_SERVER_NULL_BACKEND_H_

#include <string>

#include "core/backend/backend.h"

namespace spexd::server::test_backends {

class NullBackend : public core::Backend {
 public:
  std::string name() const override { return "null"; }
  absl::StatusOr<core::ExtractionSummary> Extract(const core::ExtractionJob&,
                                                  const core::BundleSink&) override {
    return core::ExtractionSummary{};
  }
};

}  // namespace spexd::server::test_backends

#endif  // SPEXD_TESTS_SERVER_NULL_BACKEND_H_
