/* test_fileio: util/fileio.c against the contract in fileio.h and POSIX.
 *
 * The references are the file system itself (stat, a second read with
 * stdio) and errno's strerror text; nothing is compared with a value that
 * fileio produced. Every test works in its own directory under REFGEO_TMP.
 */
#include "testlib.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/error.h"
#include "util/fileio.h"

/* REFGEO_TMP/fileio-PID-NAME, created empty. */
static char *scratch_dir(const char *name) {
  char leaf[128];
  snprintf(leaf, sizeof leaf, "fileio-%ld-%s", (long)getpid(), name);
  char *dir = t_tmp_path(leaf);
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) fail_msg("%s: %s", dir, strerror(errno));
  return dir;
}

static char *join(const char *dir, const char *name) {
  char *p = rg_path_join(dir, name);
  assert_non_null(p);
  return p;
}

/* The file's bytes read with plain stdio, independent of rg_read_file. */
static char *slurp(const char *path, size_t *len) {
  FILE *fp = fopen(path, "rb");
  if (!fp) fail_msg("%s: %s", path, strerror(errno));
  char *buf = malloc(1 << 16);
  assert_non_null(buf);
  *len = fread(buf, 1, (1 << 16) - 1, fp);
  buf[*len] = '\0';
  fclose(fp);
  return buf;
}

static void write_plain(const char *path, const char *text) {
  FILE *fp = fopen(path, "wb");
  assert_non_null(fp);
  fputs(text, fp);
  fclose(fp);
}

/* The temp name the header documents: "PATH.tmp.PID". */
static char *tmp_name_of(const char *path) {
  size_t n = strlen(path) + 32;
  char *p = malloc(n);
  assert_non_null(p);
  snprintf(p, n, "%s.tmp.%ld", path, (long)getpid());
  return p;
}

static void test_write_then_read(void **state) {
  char *dir = scratch_dir("rw");
  char *path = join(dir, "out.bin");
  const char data[] = "line one\nline two\0with a NUL";
  assert_int_equal(rg_write_file_atomic(path, data, sizeof data), 0);
  size_t len = 0;
  char *got = slurp(path, &len);
  assert_int_equal(len, sizeof data);
  assert_memory_equal(got, data, sizeof data);
  free(got);

  char *back = rg_read_file(path, &len);
  assert_non_null(back);
  assert_int_equal(len, sizeof data);
  assert_memory_equal(back, data, sizeof data);
  assert_int_equal(back[len], '\0'); /* NUL-terminated past the data */
  free(back);

  /* Overwrites, and an empty write makes an empty file. */
  assert_int_equal(rg_write_file_atomic(path, "", 0), 0);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_size, 0);
  back = rg_read_file(path, &len);
  assert_non_null(back);
  assert_int_equal(len, 0);
  assert_string_equal(back, "");
  free(back);

  unlink(path);
  rmdir(dir);
  free(path);
  free(dir);
}

static void test_atomic_commit_renames(void **state) {
  char *dir = scratch_dir("commit");
  char *path = join(dir, "result.csv");
  char *tmp = tmp_name_of(path);
  write_plain(path, "old\n");

  rg_atomic_file f;
  assert_int_equal(rg_atomic_open(&f, path), 0);
  fputs("new,contents\n", f.fp);
  fflush(f.fp);
  /* Until commit the old file is intact and the data sits in the temp file. */
  size_t len;
  char *now = slurp(path, &len);
  assert_string_equal(now, "old\n");
  free(now);
  assert_true(rg_path_exists(tmp));

  assert_int_equal(rg_atomic_commit(&f), 0);
  assert_false(rg_path_exists(tmp));
  now = slurp(path, &len);
  assert_string_equal(now, "new,contents\n");
  free(now);
  assert_null(f.fp); /* released */

  unlink(path);
  rmdir(dir);
  free(tmp);
  free(path);
  free(dir);
}

static void test_atomic_abort_removes_temp(void **state) {
  char *dir = scratch_dir("abort");
  char *path = join(dir, "result.csv");
  char *tmp = tmp_name_of(path);
  write_plain(path, "keep me\n");

  rg_atomic_file f;
  assert_int_equal(rg_atomic_open(&f, path), 0);
  fputs("half-written", f.fp);
  assert_true(rg_path_exists(tmp));
  rg_atomic_abort(&f);
  assert_false(rg_path_exists(tmp));
  size_t len;
  char *now = slurp(path, &len);
  assert_string_equal(now, "keep me\n");
  free(now);

  /* Aborting a writer for a file that never existed leaves nothing behind. */
  char *fresh = join(dir, "never.csv");
  assert_int_equal(rg_atomic_open(&f, fresh), 0);
  rg_atomic_abort(&f);
  assert_false(rg_path_exists(fresh));

  unlink(path);
  rmdir(dir);
  free(fresh);
  free(tmp);
  free(path);
  free(dir);
}

/* rename() of a file over a directory fails (EISDIR): commit must report it,
 * name the target and remove the temp file. */
static void test_atomic_commit_failure_cleans_up(void **state) {
  char *dir = scratch_dir("commitfail");
  char *target = join(dir, "is_a_dir");
  char *tmp = tmp_name_of(target);
  assert_int_equal(mkdir(target, 0755), 0);

  rg_atomic_file f;
  assert_int_equal(rg_atomic_open(&f, target), 0);
  fputs("data", f.fp);
  rg_error_clear();
  assert_int_equal(rg_atomic_commit(&f), -1);
  assert_non_null(strstr(rg_error_get(), target));
  assert_false(rg_path_exists(tmp));
  assert_true(rg_is_dir(target));

  rmdir(target);
  rmdir(dir);
  free(tmp);
  free(target);
  free(dir);
}

static void test_atomic_open_missing_dir(void **state) {
  char *dir = scratch_dir("nodir");
  char *path = join(dir, "missing/sub/out.csv");
  rg_atomic_file f;
  rg_error_clear();
  assert_int_equal(rg_atomic_open(&f, path), -1);
  assert_non_null(strstr(rg_error_get(), path));             /* names the file */
  assert_non_null(strstr(rg_error_get(), strerror(ENOENT))); /* and the reason */
  assert_int_equal(rg_write_file_atomic(path, "x", 1), -1);
  assert_false(rg_path_exists(path));
  rmdir(dir);
  free(path);
  free(dir);
}

/* Bytes of a file with plain stdio, any size. */
static char *slurp_big(const char *path, size_t *len) {
  struct stat st;
  if (stat(path, &st) != 0) fail_msg("%s: %s", path, strerror(errno));
  char *buf = malloc((size_t)st.st_size + 1);
  assert_non_null(buf);
  FILE *fp = fopen(path, "rb");
  assert_non_null(fp);
  *len = fread(buf, 1, (size_t)st.st_size, fp);
  fclose(fp);
  return buf;
}

static void test_copy_file(void **state) {
  char *dir = scratch_dir("copy");
  char *src = join(dir, "src.bin"), *dst = join(dir, "dst.bin");
  /* 2.5 MiB, so the copy spans several of its 1 MiB chunks, with NULs. */
  size_t n = (5u << 20) / 2;
  unsigned char *data = malloc(n);
  assert_non_null(data);
  for (size_t i = 0; i < n; i++) data[i] = (unsigned char)(i * 2654435761u >> 13);
  FILE *fp = fopen(src, "wb");
  assert_non_null(fp);
  assert_int_equal(fwrite(data, 1, n, fp), n);
  fclose(fp);
  write_plain(dst, "an older, different file that the copy must replace");

  assert_int_equal(rg_copy_file(src, dst), 0);
  size_t len;
  char *got = slurp_big(dst, &len);
  assert_int_equal(len, n);
  assert_memory_equal(got, data, n);
  free(got);

  /* A shorter source truncates the destination. */
  write_plain(src, "short");
  assert_int_equal(rg_copy_file(src, dst), 0);
  got = slurp(dst, &len);
  assert_string_equal(got, "short");
  free(got);

  /* Errors name the file at fault. */
  char *missing = join(dir, "missing.bin"), *bad_dst = join(dir, "no-such-dir/dst.bin");
  assert_int_equal(rg_copy_file(missing, dst), -1);
  assert_non_null(strstr(rg_error_get(), missing));
  assert_int_equal(rg_copy_file(src, bad_dst), -1);
  assert_non_null(strstr(rg_error_get(), bad_dst));

  unlink(src), unlink(dst), rmdir(dir);
  free(data), free(src), free(dst), free(missing), free(bad_dst), free(dir);
}

static void test_fsync_rename(void **state) {
  char *dir = scratch_dir("fsync-rename");
  char *path = join(dir, "acts.h5"), *tmp = join(dir, "acts.h5.step_0.tmp");
  write_plain(path, "old");
  write_plain(tmp, "new");
  assert_int_equal(rg_fsync_rename(tmp, path), 0);
  assert_false(rg_path_exists(tmp));
  size_t len;
  char *got = slurp(path, &len);
  assert_string_equal(got, "new");
  free(got);

  /* A missing temp file: an error naming it, and PATH untouched. */
  assert_int_equal(rg_fsync_rename(tmp, path), -1);
  assert_non_null(strstr(rg_error_get(), tmp));
  got = slurp(path, &len);
  assert_string_equal(got, "new");
  free(got);

  unlink(path), rmdir(dir);
  free(path), free(tmp), free(dir);
}

static void test_read_file_errors_name_path(void **state) {
  char *dir = scratch_dir("readerr");
  char *path = join(dir, "absent.json");
  rg_error_clear();
  assert_null(rg_read_file(path, NULL));
  char want[1024];
  snprintf(want, sizeof want, "%s: %s", path, strerror(ENOENT));
  assert_string_equal(rg_error_get(), want);

  /* Unreadable file (skipped as root, who can read anything). */
  char *locked = join(dir, "locked.txt");
  write_plain(locked, "secret");
  chmod(locked, 0);
  if (geteuid() != 0) {
    assert_null(rg_read_file(locked, NULL));
    snprintf(want, sizeof want, "%s: %s", locked, strerror(EACCES));
    assert_string_equal(rg_error_get(), want);
  }
  unlink(locked);
  rmdir(dir);
  free(locked);
  free(path);
  free(dir);
}

static void test_mmap(void **state) {
  char *dir = scratch_dir("mmap");
  char *path = join(dir, "blob.bin");
  write_plain(path, "0123456789");
  rg_mmap m;
  assert_int_equal(rg_mmap_open(path, &m), 0);
  assert_int_equal(m.size, 10);
  assert_memory_equal(m.data, "0123456789", 10);
  rg_mmap_close(&m);
  assert_null(m.data);

  char *empty = join(dir, "empty.bin");
  write_plain(empty, "");
  rg_error_clear();
  assert_int_equal(rg_mmap_open(empty, &m), -1);
  assert_non_null(strstr(rg_error_get(), empty));
  rg_error_clear();
  assert_int_equal(rg_mmap_open(dir, &m), -1);
  assert_non_null(strstr(rg_error_get(), dir));
  char *absent = join(dir, "absent.bin");
  rg_error_clear();
  assert_int_equal(rg_mmap_open(absent, &m), -1);
  assert_non_null(strstr(rg_error_get(), absent));

  unlink(path);
  unlink(empty);
  rmdir(dir);
  free(absent);
  free(empty);
  free(path);
  free(dir);
}

static void test_mkdir_p(void **state) {
  char *dir = scratch_dir("mkdir");
  char *deep = join(dir, "a/b/c");
  assert_int_equal(rg_mkdir_p(deep), 0);
  struct stat st;
  assert_int_equal(stat(deep, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  assert_int_equal(rg_mkdir_p(deep), 0); /* existing: fine */

  char *slash = join(dir, "d/e/"); /* trailing slash */
  assert_int_equal(rg_mkdir_p(slash), 0);
  assert_true(rg_is_dir(slash));

  /* A component that is a file: fails and names that component. */
  char *file = join(dir, "plain");
  write_plain(file, "x");
  char *under = join(dir, "plain/sub/dir");
  rg_error_clear();
  assert_int_equal(rg_mkdir_p(under), -1);
  assert_non_null(strstr(rg_error_get(), file));
  assert_false(rg_path_exists(under));

  char *d = join(dir, "d/e"), *dd = join(dir, "d"), *b = join(dir, "a/b"), *a = join(dir, "a");
  rmdir(deep);
  rmdir(b);
  rmdir(a);
  rmdir(d);
  rmdir(dd);
  unlink(file);
  rmdir(dir);
  free(d);
  free(dd);
  free(b);
  free(a);
  free(under);
  free(file);
  free(slash);
  free(deep);
  free(dir);
}

static void test_path_helpers(void **state) {
  char *p = rg_path_join("/data/run", "acts.h5");
  assert_string_equal(p, "/data/run/acts.h5");
  free(p);
  char *dir = scratch_dir("paths");
  char *file = join(dir, "f");
  write_plain(file, "x");
  assert_true(rg_is_dir(dir));
  assert_false(rg_is_dir(file));
  assert_true(rg_path_exists(file));
  unlink(file);
  assert_false(rg_path_exists(file));
  assert_false(rg_is_dir(file));
  rmdir(dir);
  free(file);
  free(dir);
}

/* rg_path_relative against Python's os.path.relpath(to, from) on the same
 * folders (values computed with Python 3.11 for these layouts). */
/* Stale temp files: NAME.tmp.<pid> of a pid that is gone, or a zombie (its
 * files closed, its exit not yet collected: what a killed writer is for a
 * moment), is removed, in the folder and one below it; one of a live pid
 * (this test's), and names that only look alike, are kept. */
static void test_remove_stale_temps(void **state) {
  (void)state;
  char *dir = t_tmp_path("stale_temps"), cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s/sub'", dir, dir);
  assert_int_equal(system(cmd), 0);
  const pid_t gone = fork();
  if (gone == 0) _exit(0);
  assert_int_equal(waitpid(gone, NULL, 0), gone);
  const pid_t zombie = fork();
  if (zombie == 0) _exit(0);
  for (int i = 0; i < 200; i++) { /* until the child has exited (not collected) */
    char stat_path[64], text[256] = "";
    snprintf(stat_path, sizeof stat_path, "/proc/%ld/stat", (long)zombie);
    FILE *fp = fopen(stat_path, "r");
    if (fp) text[fread(text, 1, sizeof text - 1, fp)] = '\0', fclose(fp);
    if (strstr(text, ") Z ")) break;
    usleep(10000);
  }
  char names[6][96];
  snprintf(names[0], sizeof names[0], "a.csv.tmp.%ld", (long)gone);        /* removed */
  snprintf(names[1], sizeof names[1], "sub/b.json.tmp.%ld", (long)zombie); /* removed */
  snprintf(names[2], sizeof names[2], "c.ini.tmp.%ld", (long)getpid());    /* kept: live */
  snprintf(names[3], sizeof names[3], "d.tmp.%ldx", (long)gone);           /* kept: not a pid */
  snprintf(names[4], sizeof names[4], "e.tmp");                            /* kept */
  snprintf(names[5], sizeof names[5], "f.tmpx.%ld", (long)gone);           /* kept */
  for (int i = 0; i < 6; i++) {
    char *p = rg_path_join(dir, names[i]);
    FILE *fp = fopen(p, "w");
    assert_non_null(fp);
    fclose(fp);
    free(p);
  }
  int n = 0;
  assert_int_equal(rg_remove_stale_temps(dir, 1, &n), 0);
  assert_int_equal(n, 2);
  for (int i = 0; i < 6; i++) {
    char *p = rg_path_join(dir, names[i]);
    if (rg_path_exists(p) != (i >= 2)) fail_msg("%s: %s", names[i], i >= 2 ? "removed" : "kept");
    free(p);
  }
  assert_int_equal(waitpid(zombie, NULL, 0), zombie);
  free(dir);
}

static void test_path_relative(void **state) {
  char *root = scratch_dir("rel");
  const char *dirs[] = {"a", "a/b", "c", "c/d", "cx"};
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
    char *d = join(root, dirs[i]);
    assert_true(mkdir(d, 0755) == 0 || errno == EEXIST);
    free(d);
  }
  const char *cases[][3] = {{"a", "c/d", "../c/d"}, {"a/b", "a", ".."}, {"a", "a/b", "b"}, {"a", "a", "."},
                            {".", "c/d", "c/d"},     {"a/b", ".", "../.."}, {"c", "cx", "../cx"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *from = join(root, cases[i][0]), *to = join(root, cases[i][1]);
    char *rel = rg_path_relative(from, to);
    assert_non_null(rel);
    assert_string_equal(rel, cases[i][2]);
    free(rel), free(from), free(to);
  }
  char *missing = join(root, "nowhere");
  assert_null(rg_path_relative(root, missing));
  assert_non_null(strstr(rg_error_get(), "nowhere"));
  free(missing);
  free(root);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_write_then_read),
      cmocka_unit_test(test_remove_stale_temps),
      cmocka_unit_test(test_atomic_commit_renames),
      cmocka_unit_test(test_atomic_abort_removes_temp),
      cmocka_unit_test(test_atomic_commit_failure_cleans_up),
      cmocka_unit_test(test_atomic_open_missing_dir),
      cmocka_unit_test(test_copy_file),
      cmocka_unit_test(test_fsync_rename),
      cmocka_unit_test(test_read_file_errors_name_path),
      cmocka_unit_test(test_mmap),
      cmocka_unit_test(test_path_relative),
      cmocka_unit_test(test_mkdir_p),
      cmocka_unit_test(test_path_helpers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
