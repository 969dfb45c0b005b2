/* run_lock.c: one writer at a time per run directory (run_lock.h). */
#include "util/run_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"
#include "util/fileio.h"

void rg_run_lock_note(int fd, const char *holder) {
  const size_t n = strlen(holder);
  /* best effort: the text only names the holder in a refusal */
  if (ftruncate(fd, 0) == 0 && pwrite(fd, holder, n, 0) == (ssize_t)n) return;
}

void rg_run_lock_claim(int fd) {
  char pid[32];
  snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
  rg_run_lock_note(fd, pid);
}

/* The inherited descriptor of the same file as FD, or -1. */
static int inherited(int fd) {
  const char *v = getenv("REFGEO_RUN_LOCK_FD");
  char *end;
  if (!v || !*v) return -1;
  const long parent = strtol(v, &end, 10);
  struct stat a, b;
  if (*end || parent < 0 || parent == fd || fstat((int)parent, &a) != 0 || fstat(fd, &b) != 0) return -1;
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino ? (int)parent : -1;
}

int rg_run_lock(const char *run_dir) {
  char *path = rg_path_join(run_dir, RG_RUN_LOCK_NAME);
  if (!path) return rg_error_set("out of memory");
  const int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    rg_error_set("%s: cannot open: %s", path, strerror(errno));
    free(path);
    return -1;
  }
  const int parent = inherited(fd);
  /* a stage of `refgeo run`: the descriptor it inherited holds the lock
   * already (flock on it again is a no-op that proves so) */
  if (parent >= 0 && flock(parent, LOCK_EX | LOCK_NB) == 0) {
    close(fd);
    free(path);
    return parent; /* the parent's note names this process already */
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char pid[96] = "";
    const ssize_t n = err == EWOULDBLOCK ? pread(fd, pid, sizeof pid - 1, 0) : -1;
    pid[n > 0 ? n : 0] = '\0';
    pid[strcspn(pid, "\n")] = '\0';
    if (err == EWOULDBLOCK)
      rg_error_set("%s: in use by another refgeo (pid %s) writing this run directory; wait for it to end, or stop "
                   "it (lock %s)",
                   run_dir, pid[0] ? pid : "unknown", path);
    else
      rg_error_set("%s: cannot lock: %s", path, strerror(err));
    close(fd);
    free(path);
    return -1;
  }
  free(path);
  rg_run_lock_claim(fd);
  return fd;
}

int rg_run_lock_share(int fd) {
  const int flags = fcntl(fd, F_GETFD);
  if (flags < 0 || fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC) != 0)
    return rg_error_set("the run directory's lock: %s", strerror(errno));
  char v[16];
  snprintf(v, sizeof v, "%d", fd);
  return setenv("REFGEO_RUN_LOCK_FD", v, 1) == 0 ? 0 : rg_error_set("out of memory");
}

void rg_run_unlock(int fd) {
  const char *v = getenv("REFGEO_RUN_LOCK_FD");
  if (v && strtol(v, NULL, 10) == fd) return; /* the parent's, inherited: it stays the parent's */
  close(fd);
}
