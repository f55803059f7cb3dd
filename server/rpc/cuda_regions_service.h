// spexd.v1.CudaRegions: clients on this node register device allocations by
// CUDA IPC handle for zero-copy extraction input and output. RegisterCudaRegion runs on
// the callback API (its call holds the region: server/state/region_registry.h);
// UnregisterCudaRegion on the sync API, since it waits for extractions that still use
// the region.
#ifndef SPEXD_SERVER_CUDA_REGIONS_SERVICE_H_
#define SPEXD_SERVER_CUDA_REGIONS_SERVICE_H_

#include "absl/status/status.h"
#include "server/rpc/service_context.h"
#include "spexd/v1/spexd.grpc.pb.h"

namespace spexd::server {

class CudaRegionsService final
    : public v1::CudaRegions::WithCallbackMethod_RegisterCudaRegion<v1::CudaRegions::Service> {
 public:
  explicit CudaRegionsService(ServiceContext* context) : context_(context) {}

  grpc::ServerWriteReactor<v1::RegisterCudaRegionResponse>* RegisterCudaRegion(
      grpc::CallbackServerContext* call, const v1::RegisterCudaRegionRequest* request) override;
  grpc::Status UnregisterCudaRegion(grpc::ServerContext* call,
                                    const v1::UnregisterCudaRegionRequest* request,
                                    v1::UnregisterCudaRegionResponse* response) override;

 private:
  ServiceContext* context_;
};

// Regions are accepted only from a local peer (unix socket, loopback) or an
// authenticated one (the server requires a bearer token, which the caller has already
// checked, or the peer presented a verified client certificate): PERMISSION_DENIED
// otherwise. CUDA IPC works only within one node anyway; this keeps a remote client from
// making the server map memory of local processes.
absl::Status CheckRegionPeer(const grpc::ServerContextBase& call, const ServiceContext& context);

}  // namespace spexd::server

#endif  // SPEXD_SERVER_CUDA_REGIONS_SERVICE_H_
