// The one conversion between the wire's v1::ExtractionParams and core::ExtractionParams,
// linked by the server (decoding requests) and by the C++ clients that extract through
// the service (spexctl's remote mode, the benchmarks). It lives beside the proto, not in
// client/ or server/, because both sides need it and it needs core: the spexd_client
// library itself stays proto and Abseil only (docs/design.md, "Modules").
#ifndef SPEXD_PROTO_CONVERT_EXTRACTION_PARAMS_H_
#define SPEXD_PROTO_CONVERT_EXTRACTION_PARAMS_H_

#include "absl/status/statusor.h"
#include "core/plan/extraction_params.h"
#include "spexd/v1/spexd.pb.h"

namespace spexd::wire {

// Request parameters with desi_extract_spectra's defaults for unset fields. Only the
// wire-level rules are checked here (all three of wmin/wmax/dw or none, known enum
// values: INVALID_ARGUMENT otherwise); the values are validated into a
// core::ExtractionPlan by whoever plans the extraction. `want_model` travels in the
// request header next to the parameters (ExtractHeader.want_model).
absl::StatusOr<core::ExtractionParams> ParamsFromProto(const v1::ExtractionParams& proto,
                                                       bool want_model);

// The parameters as a client sends them: every field set (optional grid and psferr only
// when the caller set them), so the server applies exactly the client's values.
// want_model is not part of the message.
v1::ExtractionParams ParamsToProto(const core::ExtractionParams& params);

}  // namespace spexd::wire

#endif  // SPEXD_PROTO_CONVERT_EXTRACTION_PARAMS_H_
