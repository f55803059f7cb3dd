// TSan support for Debian's (uninstrumented) Abseil: without it ThreadSanitizer cannot see
// absl::Mutex, absl::CondVar or absl::Notification, because their lock operations run in
// libabsl_synchronization.so, which was not built with -fsanitize=thread. Every access
// guarded by an absl::Mutex would then be reported as a race.
//
// Linked only into the executables of a -DSPEXD_SANITIZE=thread build. The executable
// defines these member functions itself, so the dynamic linker binds every caller to
// them (our code, and gRPC, whose grpc_core::Mutex wraps absl::Mutex); each one tells
// TSan what the lock does (tsan_interface.h's mutex annotations) and calls the real
// function, found with dlsym(RTLD_NEXT). Abseil's own lock-free internals stay invisible,
// which is what the annotations are for.
//
// Not covered: Notification::HasBeenNotified() is inline and reads an atomic that the
// library writes; nothing in spexd relies on it.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

// The mangled names below carry Debian 12's inline namespace, absl::debian3.
static_assert(ABSL_OPTION_USE_INLINE_NAMESPACE == 1, "mangled names assume absl::debian3");

namespace {

template <typename F>
F Real(const char* mangled) {
  void* fn = dlsym(RTLD_NEXT, mangled);
  if (fn == nullptr) {
    std::fprintf(stderr, "tsan_absl_sync: %s not found in Abseil (%s)\n", mangled, dlerror());
    std::abort();
  }
  return reinterpret_cast<F>(fn);
}

#define SPEXD_REAL(type, mangled)              \
  static const auto real = Real<type>(mangled)

constexpr unsigned kRead = __tsan_mutex_read_lock;

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  SPEXD_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex4LockEv");
  __tsan_mutex_pre_lock(this, 0);
  real(this);
  __tsan_mutex_post_lock(this, 0, 0);
}

void Mutex::ReaderLock() {
  SPEXD_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex10ReaderLockEv");
  __tsan_mutex_pre_lock(this, kRead);
  real(this);
  __tsan_mutex_post_lock(this, kRead, 0);
}

bool Mutex::TryLock() {
  SPEXD_REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex7TryLockEv");
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_lock);
  const bool locked = real(this);
  __tsan_mutex_post_lock(this, locked ? __tsan_mutex_try_lock : __tsan_mutex_try_lock_failed, 0);
  return locked;
}

bool Mutex::ReaderTryLock() {
  SPEXD_REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex13ReaderTryLockEv");
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_read_lock);
  const bool locked = real(this);
  __tsan_mutex_post_lock(this, locked ? __tsan_mutex_try_read_lock
                                      : __tsan_mutex_try_read_lock_failed, 0);
  return locked;
}

void Mutex::Unlock() {
  SPEXD_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex6UnlockEv");
  __tsan_mutex_pre_unlock(this, 0);
  real(this);
  __tsan_mutex_post_unlock(this, 0);
}

void Mutex::ReaderUnlock() {
  SPEXD_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex12ReaderUnlockEv");
  __tsan_mutex_pre_unlock(this, kRead);
  real(this);
  __tsan_mutex_post_unlock(this, kRead);
}

void Mutex::LockWhen(const Condition& cond) {
  SPEXD_REAL(void (*)(Mutex*, const Condition&), "_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE");
  __tsan_mutex_pre_lock(this, 0);
  real(this, cond);
  __tsan_mutex_post_lock(this, 0, 0);
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  SPEXD_REAL(void (*)(Mutex*, const Condition&),
             "_ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE");
  __tsan_mutex_pre_lock(this, kRead);
  real(this, cond);
  __tsan_mutex_post_lock(this, kRead, 0);
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  SPEXD_REAL(bool (*)(Mutex*, const Condition&, Duration),
             "_ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  __tsan_mutex_pre_lock(this, 0);
  const bool met = real(this, cond, timeout);
  __tsan_mutex_post_lock(this, 0, 0);  // held on return whether or not cond holds
  return met;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  SPEXD_REAL(bool (*)(Mutex*, const Condition&, Time),
             "_ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_mutex_pre_lock(this, 0);
  const bool met = real(this, cond, deadline);
  __tsan_mutex_post_lock(this, 0, 0);
  return met;
}

// Await* release and re-acquire the (held) mutex while they wait: seen by TSan as an
// unlock followed by a lock, so that the waiter synchronises with the waking thread.
void Mutex::Await(const Condition& cond) {
  SPEXD_REAL(void (*)(Mutex*, const Condition&), "_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE");
  __tsan_mutex_pre_unlock(this, 0);
  __tsan_mutex_post_unlock(this, 0);
  real(this, cond);
  __tsan_mutex_pre_lock(this, 0);
  __tsan_mutex_post_lock(this, 0, 0);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  SPEXD_REAL(bool (*)(Mutex*, const Condition&, Duration),
             "_ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  __tsan_mutex_pre_unlock(this, 0);
  __tsan_mutex_post_unlock(this, 0);
  const bool met = real(this, cond, timeout);
  __tsan_mutex_pre_lock(this, 0);
  __tsan_mutex_post_lock(this, 0, 0);
  return met;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  SPEXD_REAL(bool (*)(Mutex*, const Condition&, Time),
             "_ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_mutex_pre_unlock(this, 0);
  __tsan_mutex_post_unlock(this, 0);
  const bool met = real(this, cond, deadline);
  __tsan_mutex_pre_lock(this, 0);
  __tsan_mutex_post_lock(this, 0, 0);
  return met;
}

// CondVar waits: the mutex is released for the wait and held again on return.
void CondVar::Wait(Mutex* mu) {
  SPEXD_REAL(void (*)(CondVar*, Mutex*), "_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE");
  __tsan_mutex_pre_unlock(mu, 0);
  __tsan_mutex_post_unlock(mu, 0);
  real(this, mu);
  __tsan_mutex_pre_lock(mu, 0);
  __tsan_mutex_post_lock(mu, 0, 0);
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  SPEXD_REAL(bool (*)(CondVar*, Mutex*, Duration),
             "_ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  __tsan_mutex_pre_unlock(mu, 0);
  __tsan_mutex_post_unlock(mu, 0);
  const bool timed_out = real(this, mu, timeout);
  __tsan_mutex_pre_lock(mu, 0);
  __tsan_mutex_post_lock(mu, 0, 0);
  return timed_out;
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  SPEXD_REAL(bool (*)(CondVar*, Mutex*, Time),
             "_ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  __tsan_mutex_pre_unlock(mu, 0);
  __tsan_mutex_post_unlock(mu, 0);
  const bool timed_out = real(this, mu, deadline);
  __tsan_mutex_pre_lock(mu, 0);
  __tsan_mutex_post_lock(mu, 0, 0);
  return timed_out;
}

// Notification: Notify() happens-before every wait that returns notified.
void Notification::Notify() {
  SPEXD_REAL(void (*)(Notification*), "_ZN4absl7debian312Notification6NotifyEv");
  __tsan_release(this);
  real(this);
}

void Notification::WaitForNotification() const {
  SPEXD_REAL(void (*)(const Notification*),
             "_ZNK4absl7debian312Notification19WaitForNotificationEv");
  real(this);
  __tsan_acquire(const_cast<Notification*>(this));
}

bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  SPEXD_REAL(bool (*)(const Notification*, Duration),
             "_ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE");
  const bool notified = real(this, timeout);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(Time deadline) const {
  SPEXD_REAL(bool (*)(const Notification*, Time),
             "_ZNK4absl7debian312Notification31WaitForNotificationWithDeadlineENS0_4TimeE");
  const bool notified = real(this, deadline);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

ABSL_NAMESPACE_END
}  // namespace absl
