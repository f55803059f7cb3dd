#include "server/state/region_registry.h"

#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/platform/log.h"
#include "server/platform/metrics.h"

namespace spexd::server {
namespace {

// 128 random bits as hex: a region id cannot be guessed by another local client.
std::string NewRegionId() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return absl::StrFormat("%016x%016x", rng(), rng());
}

}  // namespace

std::shared_ptr<const RegisteredRegion> RegionRegistry::Add(std::unique_ptr<core::ImportedRegion> memory,
                                                            std::string name, std::string peer,
                                                            EndCall end_call) {
  auto region = std::make_shared<RegisteredRegion>();
  region->id = NewRegionId();
  region->name = std::move(name);
  region->peer = std::move(peer);
  region->memory = std::move(memory);
  absl::MutexLock lock(&mu_);
  regions_[region->id] = Entry{region, std::move(end_call)};
  PublishLocked();
  return region;
}

absl::StatusOr<std::shared_ptr<const RegisteredRegion>> RegionRegistry::Find(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  auto it = regions_.find(id);
  if (it == regions_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("CUDA region '", id.substr(0, 64), "' is not registered (never, or released: "
                     "unregistered, its RegisterCudaRegion call ended, or the server restarted)"));
  }
  return it->second.region;
}

bool RegionRegistry::Detach(const std::string& id) {
  absl::MutexLock lock(&mu_);
  const bool found = regions_.erase(id) > 0;
  PublishLocked();
  return found;
}

absl::Status RegionRegistry::Unregister(const std::string& id, absl::Time deadline) {
  Entry entry;
  {
    absl::MutexLock lock(&mu_);
    auto it = regions_.find(id);
    if (it == regions_.end()) {
      return absl::NotFoundError(absl::StrCat("CUDA region '", id.substr(0, 64), "' is not registered"));
    }
    entry = std::move(it->second);
    regions_.erase(it);
    PublishLocked();
  }
  entry.end_call(absl::OkStatus());
  // Jobs hold their own references; the mapping goes with the last one. Unregister is a
  // rare admin call: polling keeps the job side free of any wait bookkeeping.
  std::weak_ptr<const RegisteredRegion> watch = entry.region;
  const std::string name = entry.region->name;
  entry.region.reset();
  while (!watch.expired()) {
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "CUDA region '", name, "' is unregistered but an extraction still uses it; it is "
          "unmapped when that extraction ends (do not free the memory before)"));
    }
    absl::SleepFor(absl::Milliseconds(2));
  }
  return absl::OkStatus();
}

void RegionRegistry::CloseAll(const absl::Status& status) {
  std::map<std::string, Entry> all;
  {
    absl::MutexLock lock(&mu_);
    all.swap(regions_);
    PublishLocked();
  }
  for (auto& [id, entry] : all) entry.end_call(status);
  if (!all.empty()) Log(LogLevel::kInfo, "cuda_regions_closed", {{"regions", static_cast<int>(all.size())}});
}

int RegionRegistry::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(regions_.size());
}

void RegionRegistry::PublishLocked() const {
  if (metrics_ == nullptr) return;
  double bytes = 0;
  for (const auto& [id, entry] : regions_) bytes += static_cast<double>(entry.region->size());
  metrics_->SetCudaRegions(static_cast<double>(regions_.size()), bytes);
}

bool IsLocalPeer(std::string_view peer) {
  if (peer.starts_with("unix:") || peer.starts_with("unix-abstract:")) return true;
  if (peer.starts_with("ipv4:127.")) return true;
  return peer.starts_with("ipv6:[::1]:") || peer.starts_with("ipv6:%5B::1%5D:") ||
         peer.starts_with("ipv6:[::ffff:127.") || peer.starts_with("ipv6:%5B::ffff:127.");
}

}  // namespace spexd::server
