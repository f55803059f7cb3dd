// The CUDA regions clients registered (CudaRegions service). A region lives
// while its RegisterCudaRegion call stays open: the call is the session, so a producer
// that exits or disconnects releases its regions with its connection. It ends at
// UnregisterCudaRegion, when the client cancels or disconnects, or at drain. Extraction
// jobs hold a shared_ptr to the regions they use, so the mapping stays valid until they
// end; Unregister waits for them before it returns (the producer may cudaFree then).
#ifndef SPEXD_SERVER_REGION_REGISTRY_H_
#define SPEXD_SERVER_REGION_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/backend/device_region.h"

namespace spexd::server {

class ServerMetrics;

struct RegisteredRegion {
  std::string id;    // capability: random, only the registering client learns it
  std::string name;  // the client's label
  std::string peer;  // who registered it (logs)
  std::shared_ptr<core::ImportedRegion> memory;
  int device() const { return memory->device(); }
  uint64_t size() const { return memory->size(); }
};

class RegionRegistry {
 public:
  // Ends the RegisterCudaRegion call that holds a region, with the given status.
  using EndCall = std::function<void(const absl::Status&)>;

  explicit RegionRegistry(ServerMetrics* metrics) : metrics_(metrics) {}

  // Registers an imported region; `end_call` is called exactly once when the region is
  // released by Unregister or CloseAll (never by Detach, whose caller ends its own call).
  std::shared_ptr<const RegisteredRegion> Add(std::unique_ptr<core::ImportedRegion> memory,
                                              std::string name, std::string peer, EndCall end_call);
  // The region for a request. FAILED_PRECONDITION when the id is not (or no longer)
  // registered.
  absl::StatusOr<std::shared_ptr<const RegisteredRegion>> Find(const std::string& id) const;
  // The holding call ended on its own (cancel, disconnect): forgets the region if it is
  // still registered and returns true, in which case the caller finishes its call.
  bool Detach(const std::string& id);
  // Forgets the region, ends its holding call with OK and waits until no extraction uses
  // it any more (up to `deadline`), so that it is unmapped when this returns OK.
  // NOT_FOUND for an unknown id; DEADLINE_EXCEEDED when still in use at the deadline
  // (it is unmapped when the last extraction using it ends).
  absl::Status Unregister(const std::string& id, absl::Time deadline);
  // Drain: forgets every region and ends each holding call with `status`.
  void CloseAll(const absl::Status& status);

  int size() const;

 private:
  struct Entry {
    std::shared_ptr<const RegisteredRegion> region;
    EndCall end_call;
  };
  void PublishLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ServerMetrics* const metrics_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry> regions_ ABSL_GUARDED_BY(mu_);
};

// True for a peer on this host: a unix socket, or IPv4/IPv6 loopback (gRPC peer strings
// "unix:...", "ipv4:127.x.x.x:port", "ipv6:[::1]:port", also URI-escaped).
bool IsLocalPeer(std::string_view peer);

}  // namespace spexd::server

#endif  // SPEXD_SERVER_REGION_REGISTRY_H_
