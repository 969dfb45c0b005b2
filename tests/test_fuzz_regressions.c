/* test_fuzz_regressions: the libFuzzer harnesses of tests/fuzz/ replayed in
 * the normal build on
 *   - every finding of a fuzzing campaign, kept as
 *     tests/data/bad/fuzz-<harness>/<what-it-is> (README, "Fuzzing");
 *   - every committed seed of tests/fuzz/corpus/<harness>/, so the harnesses
 *     and their inputs stay in working order between campaigns.
 * The harness code itself is compiled into this test, each entry point
 * renamed from LLVMFuzzerTestOneInput to fuzz_one_<harness>
 * (tests/CMakeLists.txt), so a finding is replayed through exactly the calls
 * that found it. An input passes when the replay returns: a crash fails the
 * test, and in the ASan + UBSan build so does any sanitizer report or leak.
 * A finding must also leave at most a one- or two-line error, and never
 * "out of memory" (issue 17: a file whose sizes contradict themselves is
 * refused for what it is, before anything proportional to them is
 * allocated). To make an allocation sized by the file fail here as it would
 * on a small machine, findings run under a 2 GiB address-space limit (the
 * issue's `prlimit --as`). Under ASan, which reserves terabytes of shadow
 * memory, the bound is per allocation instead, the campaign's own
 * (scripts/fuzz.sh): libFuzzer's -malloc_limit_mb=256 stops at allocations
 * of 256 MiB or more, ASan's max_allocation_size_mb refuses those above it,
 * hence 255. A finding of the campaign then fails here the same way (a
 * 256 MiB calloc of prompt descriptors for a 374-byte file passes the
 * address-space limit, not this one).
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "testlib.h"
#include "util/error.h"
#include "util/fileio.h"

#define ADDRESS_LIMIT_MB 2048
#define ALLOCATION_LIMIT_MB 255
#define STR(x) #x
#define XSTR(x) STR(x)

/* Read by ASan at startup when it is linked in (the sanitizer build); an
 * unused function otherwise. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
  return "max_allocation_size_mb=" XSTR(ALLOCATION_LIMIT_MB) ":allocator_may_return_null=1";
}

typedef int (*fuzz_entry)(const uint8_t *data, size_t size);

#define HARNESSES(X) \
  X(acts_h5) X(asr_curve) X(behaviors) X(chat_template) X(checkpoints) X(directions_h5) X(gguf) X(hf_dir) X(prompts) \
      X(r2d2_data) X(safetensors) X(test_cases) X(tokenizer) X(train_config)

#define DECLARE(name) int fuzz_one_##name(const uint8_t *data, size_t size);
HARNESSES(DECLARE)
#undef DECLARE

static const struct {
  const char *name;
  fuzz_entry run;
} HARNESS[] = {
#define ENTRY(name) {#name, fuzz_one_##name},
    HARNESSES(ENTRY)
#undef ENTRY
};
enum { N_HARNESS = sizeof HARNESS / sizeof HARNESS[0] };

static fuzz_entry entry_of(const char *name) {
  for (int i = 0; i < N_HARNESS; i++)
    if (strcmp(HARNESS[i].name, name) == 0) return HARNESS[i].run;
  return NULL;
}

/* Replays every file of DIR through RUN; returns how many. Findings also
 * have their error checked. */
static int replay_dir(const char *dir, fuzz_entry run, bool finding) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    char *path = rg_path_join(dir, e->d_name);
    size_t len;
    char *data = rg_read_file(path, &len);
    if (!data) fail_msg("%s: %s", path, rg_error_get());
    rg_error_clear();
    run((const uint8_t *)data, len);
    const char *err = rg_error_get();
    const char *nl = strchr(err, '\n');
    if (finding && nl && strchr(nl + 1, '\n')) fail_msg("%s: error of more than two lines:\n%s", path, err);
    if (finding && strstr(err, "out of memory")) fail_msg("%s: refused for lack of memory: %s", path, err);
    free(data);
    free(path);
    n++;
  }
  closedir(d);
  return n;
}

static void test_findings(void **state) {
  (void)state;
  char *bad = t_fixture_path("../data/bad");
  DIR *d = opendir(bad);
  assert_non_null(d);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (strncmp(e->d_name, "fuzz-", 5) != 0) continue;
    fuzz_entry run = entry_of(e->d_name + 5);
    if (!run) fail_msg("tests/data/bad/%s: no harness tests/fuzz/fuzz_%s.c in HARNESSES", e->d_name, e->d_name + 5);
    char *dir = rg_path_join(bad, e->d_name);
    n += replay_dir(dir, run, true);
    free(dir);
  }
  closedir(d);
  free(bad);
  print_message("replayed %d fuzzing findings\n", n);
}

static void test_seeds(void **state) {
  (void)state;
  char *corpus = t_fixture_path("../fuzz/corpus");
  for (int i = 0; i < N_HARNESS; i++) {
    char *dir = rg_path_join(corpus, HARNESS[i].name);
    int n = replay_dir(dir, HARNESS[i].run, false);
    if (n == 0) fail_msg("tests/fuzz/corpus/%s holds no seed", HARNESS[i].name);
    free(dir);
  }
  free(corpus);
}

int main(void) {
  if (!getenv("REFGEO_SANITIZED")) {
    struct rlimit lim = {(rlim_t)ADDRESS_LIMIT_MB << 20, (rlim_t)ADDRESS_LIMIT_MB << 20};
    if (setrlimit(RLIMIT_AS, &lim) != 0) perror("setrlimit");
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_findings),
      cmocka_unit_test(test_seeds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
