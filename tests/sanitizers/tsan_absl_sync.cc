// TSan support for Debian's (uninstrumented) Abseil: without it ThreadSanitizer cannot see
// absl::Mutex, absl::CondVar or absl::Notification, because their lock operations run in
// libabsl_synchronization.so, which was not built with -fsanitize=thread. Every access
// guarded by an absl::Mutex would then be reported as a race.
//
// Linked only into the executables of a -DSPEXD_SANITIZE=thread build. The executable
// defines these member functions itself, so the dynamic linker binds every caller to
// them (our code, gRPC's grpc_core::Mutex and gpr_mu, and Abseil's own calls between its
// exported functions, which go through the PLT). Each one tells TSan what the lock does
// (sanitizer/tsan_interface.h) and calls the real function, found with dlsym(RTLD_NEXT).
//
// The model is the one an instrumented Abseil uses (its ABSL_TSAN_MUTEX_* annotations):
//  - every real call runs between a pre_ and a post_ annotation. TSan releases in
//    pre_unlock (before the real unlock) and acquires in post_lock (after the real lock),
//    and ignores the thread's memory accesses and synchronisation in between;
//  - Await* and CondVar::Wait* are called with the mutex held, release it while they wait
//    and hold it again on return: pre_unlock, the real call, post_unlock, pre_lock,
//    post_lock. Called with a reader lock, they stay in reader mode, as Abseil does;
//  - a Condition is evaluated by Abseil with the mutex really held, but possibly by
//    another thread (an unlocking one) and inside a pre_/post_ window. Each Condition our
//    callers pass is wrapped so that its evaluation is seen as done under the lock: the
//    wrapper steps out of the evaluating thread's window, takes the lock for TSan,
//    evaluates, and steps back in (the evaluating thread's window says which way);
//  - Abseil's functions call one another through the PLT (AwaitWithTimeout calls
//    AwaitWithDeadline, Notification's waits call LockWhen* and Unlock, ...). Only the
//    outermost call on a thread is annotated; nested ones go straight to the library.
//    Annotating them too made TSan see a second unlock of the same hold ("unlock of an
//    unlocked mutex") or a second lock.
//
// ~Mutex is not annotated (__tsan_mutex_destroy): gRPC destroys its mutexes after
// reference counts kept in uninstrumented code reach zero, an order TSan cannot see, so
// the destroy looked like a race with the last unlock. Freed heap memory drops its TSan
// state anyway.
//
// Not covered: Notification::HasBeenNotified() is inline and reads an atomic that the
// library writes; nothing in spexd relies on it.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

// The mangled names below carry Debian 12's inline namespace, absl::debian3 (Abseil
// 20220623, whose internals HeldFlags reads).
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

#define SPEXD_REAL(type, mangled) static const auto real = Real<type>(mangled)

constexpr unsigned kRead = __tsan_mutex_read_lock;

// How many annotated calls are running on this thread (Outermost).
thread_local int depth = 0;

// The annotation window the thread is in: inside the real call of an outermost
// annotated operation on `mu`, after pre_lock (kLocking) or pre_unlock (kUnlocking).
enum class Phase { kNone, kLocking, kUnlocking };
struct Window {
  const absl::Mutex* mu = nullptr;
  Phase phase = Phase::kNone;
  unsigned flags = 0;
};
thread_local Window window;

class Outermost {
 public:
  Outermost() : outermost_(depth++ == 0) {}
  ~Outermost() { --depth; }
  Outermost(const Outermost&) = delete;
  Outermost& operator=(const Outermost&) = delete;
  bool yes() const { return outermost_; }

 private:
  bool outermost_;
};

// Sets the thread's window for the duration of one real call.
class InWindow {
 public:
  InWindow(const absl::Mutex* mu, Phase phase, unsigned flags) { window = {mu, phase, flags}; }
  ~InWindow() { window = {}; }
  InWindow(const InWindow&) = delete;
  InWindow& operator=(const InWindow&) = delete;
};

// Reader flag for a mutex the calling thread holds, read the way Abseil's AwaitCommon and
// CondVar::WaitCommon decide it: the writer bit (kMuWriter, 0x08) of the mutex word.
unsigned HeldFlags(const absl::Mutex* mu) {
  static_assert(sizeof(absl::Mutex) == sizeof(std::atomic<intptr_t>), "Mutex is one word");
  constexpr intptr_t kMuWriter = 0x08;
  const auto* word = reinterpret_cast<const std::atomic<intptr_t>*>(mu);
  return (word->load(std::memory_order_relaxed) & kMuWriter) != 0 ? 0 : kRead;
}

// A caller's Condition, evaluated as under `mu` (see the top of the file).
struct Annotated {
  const absl::Condition* cond;
  const absl::Mutex* mu;
};

bool EvalAnnotated(const Annotated* a) {
  const Window w = window;
  void* mu = const_cast<absl::Mutex*>(a->mu);
  if (w.mu != a->mu || w.phase == Phase::kNone) return a->cond->Eval();  // not ours to mirror
  bool result;
  if (w.phase == Phase::kLocking) {
    // Finish the lock, evaluate, and start the same lock again.
    __tsan_mutex_post_lock(mu, w.flags, 0);
    result = a->cond->Eval();
    __tsan_mutex_pre_unlock(mu, w.flags);
    __tsan_mutex_post_unlock(mu, w.flags);
    __tsan_mutex_pre_lock(mu, w.flags);
  } else {
    // Finish the unlock, lock, evaluate, and start the unlock again.
    __tsan_mutex_post_unlock(mu, w.flags);
    __tsan_mutex_pre_lock(mu, w.flags);
    __tsan_mutex_post_lock(mu, w.flags, 0);
    result = a->cond->Eval();
    __tsan_mutex_pre_unlock(mu, w.flags);
  }
  return result;
}

// One outermost lock operation: `real` returns whether the lock was taken.
template <typename Call>
bool Locking(absl::Mutex* mu, unsigned flags, Call real) {
  __tsan_mutex_pre_lock(mu, flags);
  bool locked;
  {
    InWindow in(mu, Phase::kLocking, flags & kRead);
    locked = real();
  }
  unsigned post = flags;
  if (flags & __tsan_mutex_try_lock) {
    post = locked ? flags : (flags | __tsan_mutex_try_lock_failed);
  }
  __tsan_mutex_post_lock(mu, post, 0);
  return locked;
}

template <typename Call>
void Unlocking(absl::Mutex* mu, unsigned flags, Call real) {
  __tsan_mutex_pre_unlock(mu, flags);
  {
    InWindow in(mu, Phase::kUnlocking, flags);
    real();
  }
  __tsan_mutex_post_unlock(mu, flags);
}

// Await*/CondVar::Wait*: held on entry and on return, released while waiting.
template <typename Call>
auto Waiting(absl::Mutex* mu, Call real) {
  const unsigned flags = HeldFlags(mu);
  __tsan_mutex_pre_unlock(mu, flags);
  auto result = [&] {
    InWindow in(mu, Phase::kUnlocking, flags);
    return real();
  }();
  __tsan_mutex_post_unlock(mu, flags);
  __tsan_mutex_pre_lock(mu, flags);
  __tsan_mutex_post_lock(mu, flags, 0);
  return result;
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

// The condition arguments are wrapped only for an outermost call: a nested one runs
// inside another operation's window and is not annotated.
#define SPEXD_WRAP(cond)                                    \
  const Annotated annotated{&(cond), this};                 \
  const Condition wrapped(&EvalAnnotated, &annotated)

void Mutex::Lock() {
  SPEXD_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex4LockEv");
  Outermost o;
  if (!o.yes()) return real(this);
  Locking(this, 0, [&] { real(this); return true; });
}

void Mutex::ReaderLock() {
  SPEXD_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex10ReaderLockEv");
  Outermost o;
  if (!o.yes()) return real(this);
  Locking(this, kRead, [&] { real(this); return true; });
}

bool Mutex::TryLock() {
  SPEXD_REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex7TryLockEv");
  Outermost o;
  if (!o.yes()) return real(this);
  return Locking(this, __tsan_mutex_try_lock, [&] { return real(this); });
}

bool Mutex::ReaderTryLock() {
  SPEXD_REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex13ReaderTryLockEv");
  Outermost o;
  if (!o.yes()) return real(this);
  return Locking(this, __tsan_mutex_try_read_lock, [&] { return real(this); });
}

void Mutex::Unlock() {
  SPEXD_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex6UnlockEv");
  Outermost o;
  if (!o.yes()) return real(this);
  Unlocking(this, 0, [&] { real(this); });
}

void Mutex::ReaderUnlock() {
  SPEXD_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex12ReaderUnlockEv");
  Outermost o;
  if (!o.yes()) return real(this);
  Unlocking(this, kRead, [&] { real(this); });
}

void Mutex::LockWhen(const Condition& cond) {
  SPEXD_REAL(void (*)(Mutex*, const Condition&), "_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE");
  Outermost o;
  if (!o.yes()) return real(this, cond);
  SPEXD_WRAP(cond);
  Locking(this, 0, [&] { real(this, wrapped); return true; });
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  SPEXD_REAL(void (*)(Mutex*, const Condition&),
             "_ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE");
  Outermost o;
  if (!o.yes()) return real(this, cond);
  SPEXD_WRAP(cond);
  Locking(this, kRead, [&] { real(this, wrapped); return true; });
}

// The *LockWhenWith* calls return holding the mutex whether or not the condition holds.
bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  SPEXD_REAL(bool (*)(Mutex*, const Condition&, Duration),
             "_ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  Outermost o;
  if (!o.yes()) return real(this, cond, timeout);
  SPEXD_WRAP(cond);
  bool met = false;
  Locking(this, 0, [&] { met = real(this, wrapped, timeout); return true; });
  return met;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  SPEXD_REAL(bool (*)(Mutex*, const Condition&, Time),
             "_ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  Outermost o;
  if (!o.yes()) return real(this, cond, deadline);
  SPEXD_WRAP(cond);
  bool met = false;
  Locking(this, 0, [&] { met = real(this, wrapped, deadline); return true; });
  return met;
}

bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond, Duration timeout) {
  SPEXD_REAL(bool (*)(Mutex*, const Condition&, Duration),
             "_ZN4absl7debian35Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  Outermost o;
  if (!o.yes()) return real(this, cond, timeout);
  SPEXD_WRAP(cond);
  bool met = false;
  Locking(this, kRead, [&] { met = real(this, wrapped, timeout); return true; });
  return met;
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, Time deadline) {
  SPEXD_REAL(bool (*)(Mutex*, const Condition&, Time),
             "_ZN4absl7debian35Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  Outermost o;
  if (!o.yes()) return real(this, cond, deadline);
  SPEXD_WRAP(cond);
  bool met = false;
  Locking(this, kRead, [&] { met = real(this, wrapped, deadline); return true; });
  return met;
}

void Mutex::Await(const Condition& cond) {
  SPEXD_REAL(void (*)(Mutex*, const Condition&), "_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE");
  Outermost o;
  if (!o.yes()) return real(this, cond);
  SPEXD_WRAP(cond);
  Waiting(this, [&] { real(this, wrapped); return true; });
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  SPEXD_REAL(bool (*)(Mutex*, const Condition&, Duration),
             "_ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  Outermost o;
  if (!o.yes()) return real(this, cond, timeout);
  SPEXD_WRAP(cond);
  return Waiting(this, [&] { return real(this, wrapped, timeout); });
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  SPEXD_REAL(bool (*)(Mutex*, const Condition&, Time),
             "_ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  Outermost o;
  if (!o.yes()) return real(this, cond, deadline);
  SPEXD_WRAP(cond);
  return Waiting(this, [&] { return real(this, wrapped, deadline); });
}

void CondVar::Wait(Mutex* mu) {
  SPEXD_REAL(void (*)(CondVar*, Mutex*), "_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE");
  Outermost o;
  if (!o.yes()) return real(this, mu);
  Waiting(mu, [&] { real(this, mu); return true; });
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  SPEXD_REAL(bool (*)(CondVar*, Mutex*, Duration),
             "_ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  Outermost o;
  if (!o.yes()) return real(this, mu, timeout);
  return Waiting(mu, [&] { return real(this, mu, timeout); });
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  SPEXD_REAL(bool (*)(CondVar*, Mutex*, Time),
             "_ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  Outermost o;
  if (!o.yes()) return real(this, mu, deadline);
  return Waiting(mu, [&] { return real(this, mu, deadline); });
}

// Notification: Notify() happens-before every wait that returns notified. Its own mutex
// is used only inside these calls (nested, so not annotated), and by ~Notification.
void Notification::Notify() {
  SPEXD_REAL(void (*)(Notification*), "_ZN4absl7debian312Notification6NotifyEv");
  Outermost o;
  if (o.yes()) __tsan_release(this);
  real(this);
}

void Notification::WaitForNotification() const {
  SPEXD_REAL(void (*)(const Notification*),
             "_ZNK4absl7debian312Notification19WaitForNotificationEv");
  Outermost o;
  real(this);
  if (o.yes()) __tsan_acquire(const_cast<Notification*>(this));
}

bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  SPEXD_REAL(bool (*)(const Notification*, Duration),
             "_ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE");
  Outermost o;
  const bool notified = real(this, timeout);
  if (notified && o.yes()) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(Time deadline) const {
  SPEXD_REAL(bool (*)(const Notification*, Time),
             "_ZNK4absl7debian312Notification31WaitForNotificationWithDeadlineENS0_4TimeE");
  Outermost o;
  const bool notified = real(this, deadline);
  if (notified && o.yes()) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

#undef SPEXD_WRAP

ABSL_NAMESPACE_END
}  // namespace absl
