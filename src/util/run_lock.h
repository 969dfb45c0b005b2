/* run_lock.h: one writer at a time per run directory.
 *
 * `refgeo train` and `refgeo run` hold an advisory lock (flock) on
 * RUN/.lock for their whole life; the file holds the pid of the process
 * that writes the directory now. A second writer is refused with one line
 * naming that pid. The lock belongs to the open file, not to a process: a
 * process that inherits the descriptor holds it too, so `refgeo run` hands
 * it to its stage children (REFGEO_RUN_LOCK_FD names the descriptor), and a
 * stage child that outlives a killed `run` still keeps a rerun out. The
 * kernel drops the lock when the last holder exits, however it ends.
 */
#ifndef RG_UTIL_RUN_LOCK_H
#define RG_UTIL_RUN_LOCK_H

/* The name of the lock file in a run directory. */
#define RG_RUN_LOCK_NAME ".lock"

/* Takes the lock of RUN_DIR (which must exist) for this process and writes
 * its pid into the lock file, or finds it inherited (REFGEO_RUN_LOCK_FD on
 * the same file; the parent wrote who holds it). Returns the descriptor (kept open for
 * the process's life; not inherited by children unless
 * rg_run_lock_share), or -1 with the error set: "RUN_DIR: in use by
 * another refgeo (pid N) ...". */
int rg_run_lock(const char *run_dir);

/* Releases a lock that rg_run_lock took (closes FD); an inherited one is
 * left to its holder. */
void rg_run_unlock(int fd);

/* Lets children started from now on inherit the lock FD: clears its
 * close-on-exec flag and sets REFGEO_RUN_LOCK_FD. Returns 0 or -1. */
int rg_run_lock_share(int fd);

/* Writes this process's pid into the lock file again (a parent once its
 * child, which wrote its own, has ended). */
void rg_run_lock_claim(int fd);
/* Writes HOLDER (one line, e.g. "812 (refgeo run; stage child 815)") into
 * the lock file: what a refused writer is told. */
void rg_run_lock_note(int fd, const char *holder);

#endif
