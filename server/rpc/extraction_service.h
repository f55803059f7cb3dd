// spexd.v1.Extraction on gRPC's callback API: a reactor per call receives the header and
// the upload, admits the request to the scheduler, and writes what the worker streams.
// Reactions never block: decoding and extraction run on the worker.
//
// Both methods are registered "raw" (grpc::ByteBuffer in and out; the generated
// WithRawCallbackMethod_* wrappers): requests are parsed here as ExtractRequest, and
// responses arrive already serialized (WireMessage), so a bundle's ~7 MB of float64
// arrays go from the BundleResult to the transport as slices that borrow them, never
// copied into protobuf messages. The wire format is exactly spexd.v1's.
#ifndef SPEXD_SERVER_EXTRACTION_SERVICE_H_
#define SPEXD_SERVER_EXTRACTION_SERVICE_H_

#include "server/rpc/service_context.h"
#include "spexd/v1/spexd.grpc.pb.h"

namespace spexd::server {

class ExtractionService final
    : public v1::Extraction::WithCallbackMethod_ExtractExposure<
          v1::Extraction::WithRawCallbackMethod_ExtractFrame<
              v1::Extraction::WithRawCallbackMethod_ExtractBundles<v1::Extraction::Service>>> {
 public:
  explicit ExtractionService(ServiceContext* context) : context_(context) {}

  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ExtractFrame(
      grpc::CallbackServerContext* call) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ExtractBundles(
      grpc::CallbackServerContext* call) override;
  // Many frames as one job (server/rpc/exposure_service.cc, server/jobs/exposure_job.h); an
  // ordinary (parsed) server-streaming method: its messages are small.
  grpc::ServerWriteReactor<v1::ExposureResponse>* ExtractExposure(
      grpc::CallbackServerContext* call, const v1::ExposureRequest* request) override;

 private:
  ServiceContext* context_;
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_EXTRACTION_SERVICE_H_
