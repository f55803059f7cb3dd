// Status propagation helpers used on every module boundary (docs/design.md "Conventions").
#ifndef SPEXD_CORE_STATUS_MACROS_H_
#define SPEXD_CORE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SPEXD_STATUS_CONCAT_INNER_(a, b) a##b
#define SPEXD_STATUS_CONCAT_(a, b) SPEXD_STATUS_CONCAT_INNER_(a, b)

// Returns the status of `expr` from the current function if it is not OK.
#define SPEXD_RETURN_IF_ERROR(expr)                 \
  do {                                              \
    ::absl::Status spexd_status_ = (expr);          \
    if (!spexd_status_.ok()) return spexd_status_;  \
  } while (0)

// `lhs` = value of the StatusOr `expr`, or returns its error status.
#define SPEXD_ASSIGN_OR_RETURN(lhs, expr) \
  SPEXD_ASSIGN_OR_RETURN_IMPL_(SPEXD_STATUS_CONCAT_(spexd_statusor_, __LINE__), lhs, expr)
#define SPEXD_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()

#endif  // SPEXD_CORE_STATUS_MACROS_H_
