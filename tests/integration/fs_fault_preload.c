/* Test-only LD_PRELOAD library: filesystem faults for files under one directory, for the
 * chaos tests of server-side output (tests/integration/chaos_test.cc). Works without
 * privileges (no tmpfs mount needed). Environment:
 *   SPEXD_FAULT_DIR   absolute directory; only writes to files under it are affected
 *   SPEXD_FAULT=enospc  such writes fail with ENOSPC (a full filesystem)
 *   SPEXD_FAULT=slow    such writes go 4 KiB at a time, 20 ms apart (a slow disk), so a
 *                       test can kill the process while a file is half written
 *   SPEXD_FAULT=kill_after_rename  the process SIGKILLs itself just after renameat2()
 *                       gave a file under the directory its (unhidden) name: a server
 *                       that wrote the frame and died before its reply (a lost reply,
 *                       tests/integration/idempotent_output_test.cc)
 *   SPEXD_FSYNC_LOG   a file: every fsync() appends the synced descriptor's path to it, one
 *                     per line (does the writer sync the directory after a rename?)
 * write() and pwrite() (the progressive frame file's) are both affected.
 * A file created with O_TMPFILE shows as "<dir>/#<inode> (deleted)" in /proc, so it counts
 * as under the directory. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef ssize_t (*write_fn)(int, const void*, size_t);
typedef ssize_t (*pwrite_fn)(int, const void*, size_t, off_t);

static int UnderFaultDir(int fd, const char* dir) {
  char link[64], target[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, target, sizeof target - 1);
  if (n <= 0) return 0;
  target[n] = '\0';
  const size_t len = strlen(dir);
  return strncmp(target, dir, len) == 0 && target[len] == '/';
}

/* How many bytes of `count` a write to `fd` may write now: -1 (errno set) for a full
 * filesystem, at most 4 KiB after a pause for a slow one. */
static ssize_t Allowed(int fd, size_t count) {
  const char* dir = getenv("SPEXD_FAULT_DIR");
  const char* fault = getenv("SPEXD_FAULT");
  if (dir == NULL || fault == NULL || fd <= 2 || !UnderFaultDir(fd, dir)) return (ssize_t)count;
  if (strcmp(fault, "enospc") == 0) {
    errno = ENOSPC;
    return -1;
  }
  if (strcmp(fault, "slow") == 0) {
    const struct timespec pause = {0, 20 * 1000 * 1000};
    nanosleep(&pause, NULL);
    return (ssize_t)(count < 4096 ? count : 4096);
  }
  return (ssize_t)count;
}

ssize_t write(int fd, const void* buf, size_t count) {
  static write_fn real = NULL;
  if (real == NULL) real = (write_fn)dlsym(RTLD_NEXT, "write");
  const ssize_t n = Allowed(fd, count);
  return n < 0 ? -1 : real(fd, buf, (size_t)n);
}

ssize_t pwrite(int fd, const void* buf, size_t count, off_t offset) {
  static pwrite_fn real = NULL;
  if (real == NULL) real = (pwrite_fn)dlsym(RTLD_NEXT, "pwrite");
  const ssize_t n = Allowed(fd, count);
  return n < 0 ? -1 : real(fd, buf, (size_t)n, offset);
}

ssize_t pwrite64(int fd, const void* buf, size_t count, off_t offset) {
  return pwrite(fd, buf, count, offset);
}

typedef int (*renameat2_fn)(int, const char*, int, const char*, unsigned);

int renameat2(int olddirfd, const char* oldpath, int newdirfd, const char* newpath,
              unsigned flags) {
  static renameat2_fn real = NULL;
  if (real == NULL) real = (renameat2_fn)dlsym(RTLD_NEXT, "renameat2");
  const int rc = real(olddirfd, oldpath, newdirfd, newpath, flags);
  const char* dir = getenv("SPEXD_FAULT_DIR");
  const char* fault = getenv("SPEXD_FAULT");
  if (rc == 0 && dir != NULL && fault != NULL && strcmp(fault, "kill_after_rename") == 0 &&
      newpath[0] != '.' && strchr(newpath, '/') == NULL) {
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", newdirfd);
    const ssize_t n = readlink(link, target, sizeof target - 1);
    if (n > 0) {
      target[n] = '\0';
      if (strcmp(target, dir) == 0) raise(SIGKILL);
    }
  }
  return rc;
}

typedef int (*fsync_fn)(int);

int fsync(int fd) {
  static fsync_fn real = NULL;
  if (real == NULL) real = (fsync_fn)dlsym(RTLD_NEXT, "fsync");
  const char* log = getenv("SPEXD_FSYNC_LOG");
  if (log != NULL) {
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    const ssize_t n = readlink(link, target, sizeof target - 1);
    const int out = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (n > 0 && out >= 0) {
      target[n] = '\0';
      dprintf(out, "%s\n", target);
    }
    if (out >= 0) close(out);
  }
  return real(fd);
}
