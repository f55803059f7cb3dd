// spexd.v1.Admin: PSF lifecycle and server information. Low-rate calls on gRPC's sync
// API (docs/design.md): a PSF load parses a file, which is fine on a sync-server thread.
#ifndef SPEXD_SERVER_ADMIN_SERVICE_H_
#define SPEXD_SERVER_ADMIN_SERVICE_H_

#include "server/rpc/service_context.h"
#include "spexd/v1/spexd.grpc.pb.h"

namespace spexd::server {

class AdminService final : public v1::Admin::Service {
 public:
  explicit AdminService(ServiceContext* context) : context_(context) {}

  grpc::Status LoadPsf(grpc::ServerContext* call, grpc::ServerReader<v1::LoadPsfRequest>* reader,
                       v1::PsfInfo* response) override;
  grpc::Status ListPsfs(grpc::ServerContext* call, const v1::ListPsfsRequest* request,
                        v1::ListPsfsResponse* response) override;
  grpc::Status UnloadPsf(grpc::ServerContext* call, const v1::UnloadPsfRequest* request,
                         v1::UnloadPsfResponse* response) override;
  grpc::Status GetServerInfo(grpc::ServerContext* call, const v1::GetServerInfoRequest* request,
                             v1::ServerInfo* response) override;

 private:
  // Converts (status_util) and counts the result of one call.
  grpc::Status Done(const char* rpc, const absl::Status& status,
                    grpc::ServerContext* call = nullptr);

  ServiceContext* context_;
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_ADMIN_SERVICE_H_
