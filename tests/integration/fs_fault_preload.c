/* Test-only LD_PRELOAD library: filesystem faults for files under one directory, for the
 * chaos tests of server-side output (tests/integration/chaos_test.cc). Works without
 * privileges (no tmpfs mount needed). Environment:
 *   SPEXD_FAULT_DIR   absolute directory; only writes to files under it are affected
 *   SPEXD_FAULT=enospc  such writes fail with ENOSPC (a full filesystem)
 *   SPEXD_FAULT=slow    such writes go 4 KiB at a time, 20 ms apart (a slow disk), so a
 *                       test can kill the process while a file is half written
 * A file created with O_TMPFILE shows as "<dir>/#<inode> (deleted)" in /proc, so it counts
 * as under the directory. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef ssize_t (*write_fn)(int, const void*, size_t);

static int UnderFaultDir(int fd, const char* dir) {
  char link[64], target[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, target, sizeof target - 1);
  if (n <= 0) return 0;
  target[n] = '\0';
  const size_t len = strlen(dir);
  return strncmp(target, dir, len) == 0 && target[len] == '/';
}

ssize_t write(int fd, const void* buf, size_t count) {
  static write_fn real = NULL;
  if (real == NULL) real = (write_fn)dlsym(RTLD_NEXT, "write");
  const char* dir = getenv("SPEXD_FAULT_DIR");
  const char* fault = getenv("SPEXD_FAULT");
  if (dir == NULL || fault == NULL || fd <= 2 || !UnderFaultDir(fd, dir)) {
    return real(fd, buf, count);
  }
  if (strcmp(fault, "enospc") == 0) {
    errno = ENOSPC;
    return -1;
  }
  if (strcmp(fault, "slow") == 0) {
    const struct timespec pause = {0, 20 * 1000 * 1000};
    nanosleep(&pause, NULL);
    return real(fd, buf, count < 4096 ? count : 4096);
  }
  return real(fd, buf, count);
}
