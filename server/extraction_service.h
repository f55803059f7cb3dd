// spexd.v1.Extraction on gRPC's callback API: a reactor per call receives the header and
// the upload, admits the request to the scheduler, and writes what the worker streams.
// Reactions never block: decoding and extraction run on the worker.
#ifndef SPEXD_SERVER_EXTRACTION_SERVICE_H_
#define SPEXD_SERVER_EXTRACTION_SERVICE_H_

#include "server/service_context.h"
#include "spexd/v1/spexd.grpc.pb.h"

namespace spexd::server {

class ExtractionService final : public v1::Extraction::CallbackService {
 public:
  explicit ExtractionService(ServiceContext* context) : context_(context) {}

  grpc::ServerBidiReactor<v1::ExtractRequest, v1::ExtractResponse>* ExtractFrame(
      grpc::CallbackServerContext* call) override;
  grpc::ServerBidiReactor<v1::ExtractRequest, v1::ExtractResponse>* ExtractBundles(
      grpc::CallbackServerContext* call) override;

 private:
  ServiceContext* context_;
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_EXTRACTION_SERVICE_H_
