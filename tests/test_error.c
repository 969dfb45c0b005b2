/* test_error: util/error.c against the contract in error.h. Expected
 * strings are built here with memcpy/memset, independently of error.c;
 * the 1024-byte buffer (1023 characters + NUL) is the cap documented in error.h. */
#include "testlib.h"

#include <pthread.h>
#include <string.h>

#include "util/error.h"

enum { CAP = 1023 }; /* longest message kept */

static void test_set_get_clear(void **state) {
  rg_error_clear();
  assert_string_equal(rg_error_get(), "");
  assert_int_equal(rg_error_set("%s: bad magic 0x%08x", "m.gguf", 0x46554747u), -1);
  assert_string_equal(rg_error_get(), "m.gguf: bad magic 0x46554747");
  rg_error_set("second");
  assert_string_equal(rg_error_get(), "second");
  rg_error_clear();
  assert_string_equal(rg_error_get(), "");
}

static void test_prefix_adds_context(void **state) {
  rg_error_set("row 3: not a number");
  assert_int_equal(rg_error_prefix("%s", "asr.csv"), -1);
  assert_string_equal(rg_error_get(), "asr.csv: row 3: not a number");
  rg_error_prefix("step %d", 100);
  assert_string_equal(rg_error_get(), "step 100: asr.csv: row 3: not a number");
}

/* Over-long messages are cut at the cap, never overflow, and stay
 * NUL-terminated; with a prefix it is the old message's tail that goes. */
static void test_truncation(void **state) {
  char big[3000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  rg_error_set("%s", big);
  assert_int_equal(strlen(rg_error_get()), CAP);

  char want[CAP + 1];
  rg_error_set("%.*s", 1020, big); /* 10 + 1020 characters: over the cap */
  rg_error_prefix("file.csv");
  memcpy(want, "file.csv: ", 10);
  memset(want + 10, 'x', CAP - 10);
  want[CAP] = '\0';
  assert_string_equal(rg_error_get(), want);
  assert_int_equal(strlen(rg_error_get()), CAP);

  rg_error_set("old");
  rg_error_prefix("%s", big); /* the prefix alone fills the buffer */
  assert_int_equal(strlen(rg_error_get()), CAP);
  assert_null(strstr(rg_error_get(), "old"));
}

static void *set_in_thread(void *arg) {
  (void)arg;
  rg_error_set("other thread");
  return NULL;
}

/* The buffer is thread-local: another thread's error does not replace ours. */
/* A message quoting a file's text with control characters stays one line. */
static void test_one_line(void **state) {
  (void)state;
  rg_error_set("tok.json: unknown type '%s'", "Byte\nLevel\r\tx\x7f");
  assert_string_equal(rg_error_get(), "tok.json: unknown type 'Byte?Level??x?'");
  rg_error_prefix("dir\n%d", 1);
  assert_string_equal(rg_error_get(), "dir?1: tok.json: unknown type 'Byte?Level??x?'");
}

static void test_thread_local(void **state) {
  rg_error_set("main thread");
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, set_in_thread, NULL), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_string_equal(rg_error_get(), "main thread");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_set_get_clear),
      cmocka_unit_test(test_prefix_adds_context),
      cmocka_unit_test(test_truncation),
      cmocka_unit_test(test_one_line),
      cmocka_unit_test(test_thread_local),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
