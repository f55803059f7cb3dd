#include "client/spexctl/remote_commands.h"

#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"
#include "client/spexctl/cli_args.h"
#include "client/spexctl/remote_flags.h"
#include "client/lib/spexd_client.h"

namespace spexd::client {
namespace {

const std::vector<FlagSpec>& PsfFlagSpecs() {
  static const std::vector<FlagSpec> extra = {
      {"server-path", 0, false, "psf load: the path is on the server (no upload)"},
      {"help", 'h', false, "show this help"}};
  static const std::vector<FlagSpec> specs = JoinFlagSpecs({&ConnectionFlagSpecs(), &extra});
  return specs;
}

const std::vector<FlagSpec>& PlainFlagSpecs() {
  static const std::vector<FlagSpec> extra = {{"help", 'h', false, "show this help"}};
  static const std::vector<FlagSpec> specs = JoinFlagSpecs({&ConnectionFlagSpecs(), &extra});
  return specs;
}

int Error(const char* command, const absl::Status& status) {
  std::fprintf(stderr, "spexctl %s: %s\n", command, status.ToString().c_str());
  return 1;
}

// Parses flags and connects; null (with the exit code in *code) on failure or --help.
std::unique_ptr<SpexdClient> Connect(const char* command, const char* usage,
                                     const std::vector<FlagSpec>& specs,
                                     const std::vector<std::string>& args, ParsedArgs* parsed,
                                     int* code) {
  auto p = ParseArgs(specs, args);
  if (!p.ok()) {
    std::fprintf(stderr, "spexctl %s: %s\n", command, std::string(p.status().message()).c_str());
    *code = 2;
    return nullptr;
  }
  if (p->Has("help")) {
    std::printf("usage: %s\n%s", usage, FormatHelp(specs).c_str());
    *code = 0;
    return nullptr;
  }
  auto options = ClientOptionsFromArgs(*p);
  if (!options.ok()) {
    *code = 2;
    std::fprintf(stderr, "spexctl %s: %s\n", command,
                 std::string(options.status().message()).c_str());
    return nullptr;
  }
  auto client = SpexdClient::Create(*options);
  if (!client.ok()) {
    *code = Error(command, client.status());
    return nullptr;
  }
  *parsed = *std::move(p);
  return *std::move(client);
}

void PrintPsf(const v1::PsfInfo& p) {
  std::printf("%s  %-40s  nspec %d  %.1f-%.1f A  host %.1f MB  gpu %.1f MB  geometries %d%s\n",
              p.id().c_str(), p.source().c_str(), p.nspec(), p.wavemin(), p.wavemax(),
              static_cast<double>(p.host_bytes()) / 1e6, static_cast<double>(p.gpu_bytes()) / 1e6,
              p.geometries(), p.already_loaded() ? "  (already loaded)" : "");
}

}  // namespace

int RunPsfCommand(const std::vector<std::string>& args) {
  constexpr const char* kUsage =
      "spexctl psf load PATH [--server-path] | psf list | psf unload ID  --server host:port";
  ParsedArgs parsed;
  int code = 0;
  auto client = Connect("psf", kUsage, PsfFlagSpecs(), args, &parsed, &code);
  if (client == nullptr) return code;
  const auto& pos = parsed.positional();
  const std::string verb = pos.empty() ? "" : pos[0];
  if (verb == "load" && pos.size() == 2) {
    absl::StatusOr<v1::PsfInfo> info;
    if (parsed.Has("server-path")) {
      info = client->LoadPsfFromServerPath(pos[1]);
    } else {
      auto bytes = ReadWholeFile(pos[1], "PSF");
      if (!bytes.ok()) return Error("psf load", bytes.status());
      info = client->LoadPsfFromBytes(*bytes, pos[1]);
    }
    if (!info.ok()) return Error("psf load", info.status());
    PrintPsf(*info);
    return 0;
  }
  if (verb == "list" && pos.size() == 1) {
    auto list = client->ListPsfs();
    if (!list.ok()) return Error("psf list", list.status());
    for (const v1::PsfInfo& p : list->psfs()) PrintPsf(p);
    std::printf("cache: %.1f MB of %.1f MB\n", static_cast<double>(list->cache_bytes()) / 1e6,
                static_cast<double>(list->cache_budget_bytes()) / 1e6);
    return 0;
  }
  if (verb == "unload" && pos.size() == 2) {
    auto freed = client->UnloadPsf(pos[1]);
    if (!freed.ok()) return Error("psf unload", freed.status());
    std::printf("unloaded %s (%.1f MB)\n", pos[1].c_str(),
                static_cast<double>(freed->freed_bytes()) / 1e6);
    return 0;
  }
  std::fprintf(stderr, "usage: %s\n", kUsage);
  return 2;
}

int RunHealthCommand(const std::vector<std::string>& args) {
  ParsedArgs parsed;
  int code = 0;
  auto client = Connect("health", "spexctl health --server host:port [SERVICE]", PlainFlagSpecs(),
                        args, &parsed, &code);
  if (client == nullptr) return code;
  const std::string service = parsed.positional().empty() ? "" : parsed.positional()[0];
  auto status = client->CheckHealth(service);
  if (!status.ok()) return Error("health", status.status());
  std::printf("%s\n", status->c_str());
  return *status == "SERVING" ? 0 : 1;
}

int RunInfoCommand(const std::vector<std::string>& args) {
  ParsedArgs parsed;
  int code = 0;
  auto client =
      Connect("info", "spexctl info --server host:port", PlainFlagSpecs(), args, &parsed, &code);
  if (client == nullptr) return code;
  auto info = client->GetServerInfo();
  if (!info.ok()) return Error("info", info.status());
  std::printf("spexd %s (%s), %s, uptime %.0f s\n", info->version().c_str(),
              info->api_version().c_str(), info->serving() ? "SERVING" : "NOT_SERVING",
              info->uptime_seconds());
  std::printf("backend: %s; %d GPU(s) visible\n", info->backend_choice().c_str(), info->gpu_count());
  for (const v1::WorkerInfo& w : info->workers()) {
    std::printf("  worker %d: %s%s%s\n", w.index(), w.description().c_str(),
                w.healthy() ? "" : " UNHEALTHY", w.busy() ? " (busy)" : "");
  }
  const v1::Limits& l = info->limits();
  std::printf("work: %d running, %d uploading (limit %d, +%d realtime; idle timeout %g s, "
              "write timeout %g s)\n",
              info->running(), info->uploads_in_progress(), l.max_uploads(), l.realtime_reserve(),
              l.upload_idle_seconds(), l.write_timeout_seconds());
  std::printf("queue: %d waiting (limit %d); message limit %lld B; upload limit %lld B; "
              "image limit %lld px; PSF cache budget %lld B; tls %s; auth %s\n",
              info->queue_depth(), l.max_queue(), static_cast<long long>(l.max_message_bytes()),
              static_cast<long long>(l.max_upload_bytes()),
              static_cast<long long>(l.max_image_pixels()),
              static_cast<long long>(l.psf_cache_budget_bytes()), info->tls() ? "on" : "off",
              info->auth_required() ? "required" : "off");
  return 0;
}

}  // namespace spexd::client
