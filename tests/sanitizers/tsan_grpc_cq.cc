// TSan support for Debian's (uninstrumented) gRPC completion queues: a batch of call
// operations started with a tag happens-before the completion that returns that tag.
// gRPC keeps that order inside libgrpc (its completion queue, with atomics TSan cannot
// see), so without this every hand-over between the thread that starts a read, write or
// finish (grpc::internal::Call::PerformOps) and the thread that runs its completion (a
// reactor's OnReadDone, OnWriteDone, ..., or a sync call's return) looked like a race:
// e.g. ExtractReactor::Submit, its request reader's phase set, starts a read, and the
// next OnReadDone, on another thread, reads that phase.
//
// Linked only into the executables of a -DSPEXD_SANITIZE=thread build, which define and
// export these functions (CMakeLists.txt), so that gRPC's own calls (libgrpc++) bind to
// them; each calls the real one in libgrpc, found with dlsym(RTLD_NEXT).
#include <dlfcn.h>
#include <grpc/grpc.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>

namespace {

template <typename F>
F Real(const char* name) {
  void* fn = dlsym(RTLD_NEXT, name);
  if (fn == nullptr) {
    std::fprintf(stderr, "tsan_grpc_cq: %s not found in gRPC (%s)\n", name, dlerror());
    std::abort();
  }
  return reinterpret_cast<F>(fn);
}

void Acquired(const grpc_event& ev) {
  if (ev.type == GRPC_OP_COMPLETE && ev.tag != nullptr) __tsan_acquire(ev.tag);
}

}  // namespace

extern "C" {

grpc_call_error grpc_call_start_batch(grpc_call* call, const grpc_op* ops, size_t nops, void* tag,
                                      void* reserved) {
  using Fn = grpc_call_error (*)(grpc_call*, const grpc_op*, size_t, void*, void*);
  static const Fn real = Real<Fn>("grpc_call_start_batch");
  if (tag != nullptr) __tsan_release(tag);
  return real(call, ops, nops, tag, reserved);
}

grpc_event grpc_completion_queue_next(grpc_completion_queue* cq, gpr_timespec deadline,
                                      void* reserved) {
  using Fn = grpc_event (*)(grpc_completion_queue*, gpr_timespec, void*);
  static const Fn real = Real<Fn>("grpc_completion_queue_next");
  const grpc_event ev = real(cq, deadline, reserved);
  Acquired(ev);
  return ev;
}

grpc_event grpc_completion_queue_pluck(grpc_completion_queue* cq, void* tag, gpr_timespec deadline,
                                       void* reserved) {
  using Fn = grpc_event (*)(grpc_completion_queue*, void*, gpr_timespec, void*);
  static const Fn real = Real<Fn>("grpc_completion_queue_pluck");
  const grpc_event ev = real(cq, tag, deadline, reserved);
  Acquired(ev);
  return ev;
}

}  // extern "C"
