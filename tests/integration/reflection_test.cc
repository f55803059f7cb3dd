// Server reflection is on: a generic client lists the services and fetches the spexd.v1
// descriptor, as grpcurl would. Messages are hand-encoded (grpc.reflection.v1alpha) so
// the test needs no reflection stubs.
#include <grpcpp/channel.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>

#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/service_fixture.h"

namespace spexd::testing {
namespace {

// Sends one ServerReflectionRequest (already encoded) and returns the encoded response.
std::string ReflectionCall(const std::shared_ptr<grpc::Channel>& channel, const std::string& request) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::CompletionQueue cq;
  auto call = stub.PrepareCall(&ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                               &cq);
  void* tag = nullptr;
  bool ok = false;
  auto step = [&](intptr_t expected) {
    return cq.Next(&tag, &ok) && tag == reinterpret_cast<void*>(expected) && ok;
  };
  call->StartCall(reinterpret_cast<void*>(1));
  if (!step(1)) return "";
  grpc::Slice slice(request);
  grpc::ByteBuffer out(&slice, 1);
  call->Write(out, reinterpret_cast<void*>(2));
  if (!step(2)) return "";
  call->WritesDone(reinterpret_cast<void*>(3));
  if (!step(3)) return "";
  grpc::ByteBuffer in;
  call->Read(&in, reinterpret_cast<void*>(4));
  if (!step(4)) return "";
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  cq.Next(&tag, &ok);
  std::vector<grpc::Slice> slices;
  if (!in.Dump(&slices).ok()) return "";
  std::string bytes;
  for (const grpc::Slice& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return bytes;
}

// A length-delimited proto field (wire type 2) with a one-byte length.
std::string Field(int number, const std::string& value) {
  return std::string(1, static_cast<char>((number << 3) | 2)) +
         std::string(1, static_cast<char>(value.size())) + value;
}

TEST(ReflectionTest, ListsServicesAndServesTheApiDescriptor) {
  auto server = StartServer(TestServerOptions());
  ASSERT_NE(server, nullptr);
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server->port()),
                                     grpc::InsecureChannelCredentials());
  // ServerReflectionRequest.list_services (field 7).
  const std::string services = ReflectionCall(channel, Field(7, ""));
  EXPECT_NE(services.find("spexd.v1.Extraction"), std::string::npos);
  EXPECT_NE(services.find("spexd.v1.Admin"), std::string::npos);
  EXPECT_NE(services.find("grpc.health.v1.Health"), std::string::npos);
  // file_containing_symbol (field 4): the FileDescriptorProto of the API.
  const std::string file = ReflectionCall(channel, Field(4, "spexd.v1.Extraction"));
  EXPECT_NE(file.find("spexd/v1/spexd.proto"), std::string::npos);
  EXPECT_NE(file.find("ExtractBundles"), std::string::npos);
}

}  // namespace
}  // namespace spexd::testing
