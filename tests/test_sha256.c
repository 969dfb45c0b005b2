/* test_sha256: SHA-256 against FIPS 180-2's published examples (Appendix B:
 * "abc", the 448-bit two-block message, one million 'a') and against
 * Python's hashlib for messages whose lengths straddle the padding
 * boundaries (55, 56, 63, 64 bytes ...), fed whole, byte by byte and from a
 * file. Any wrong constant, rotation or padding rule changes every digest.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/sha256.h"

static void hex_of(const uint8_t d[32], char hex[65]) {
  for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

static void digest_whole(const void *msg, size_t len, char hex[65]) {
  rg_sha256 s;
  uint8_t d[32];
  rg_sha256_init(&s);
  rg_sha256_update(&s, msg, len);
  rg_sha256_final(&s, d);
  hex_of(d, hex);
}

static void test_fips_examples(void **state) {
  char hex[65];
  digest_whole("abc", 3, hex);
  assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const char *two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  digest_whole(two_blocks, strlen(two_blocks), hex);
  assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  char *million = malloc(1000000);
  assert_non_null(million);
  memset(million, 'a', 1000000);
  digest_whole(million, 1000000, hex);
  assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  free(million);
}

/* python3 -c 'import hashlib; print(hashlib.sha256(bytes(i % 251 for i in range(n))).hexdigest())' */
static const struct {
  size_t n;
  const char *hex;
} BOUNDARIES[] = {
    {0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
    {1, "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"},
    {55, "463eb28e72f82e0a96c0a4cc53690c571281131f672aa229e0d45ae59b598b59"},
    {56, "da2ae4d6b36748f2a318f23e7ab1dfdf45acdc9d049bd80e59de82a60895f562"},
    {57, "2fe741af801cc238602ac0ec6a7b0c3a8a87c7fc7d7f02a3fe03d1c12eac4d8f"},
    {63, "29af2686fd53374a36b0846694cc342177e428d1647515f078784d69cdb9e488"},
    {64, "fdeab9acf3710362bd2658cdc9a29e8f9c757fcf9811603a8c447cd1d9151108"},
    {65, "4bfd2c8b6f1eec7a2afeb48b934ee4b2694182027e6d0fc075074f2fabb31781"},
    {119, "da18797ed7c3a777f0847f429724a2d8cd5138e6ed2895c3fa1a6d39d18f7ec6"},
    {120, "f52b23db1fbb6ded89ef42a23ce0c8922c45f25c50b568a93bf1c075420bbb7c"},
    {127, "92ca0fa6651ee2f97b884b7246a562fa71250fedefe5ebf270d31c546bfea976"},
    {128, "471fb943aa23c511f6f72f8d1652d9c880cfa392ad80503120547703e56a2be5"},
    {1000, "4e4c294b331f7a2099a379bec34b9f9fc03dc46ab465d998f4d683da53487e6d"},
};

static void test_padding_boundaries_whole_bytewise_and_file(void **state) {
  uint8_t msg[1000];
  for (size_t i = 0; i < sizeof msg; i++) msg[i] = (uint8_t)(i % 251);
  char *path = t_tmp_path("sha256.bin");
  for (size_t k = 0; k < sizeof BOUNDARIES / sizeof BOUNDARIES[0]; k++) {
    size_t n = BOUNDARIES[k].n;
    char hex[65];
    digest_whole(msg, n, hex);
    if (strcmp(hex, BOUNDARIES[k].hex) != 0) fail_msg("%zu bytes whole: %s", n, hex);
    rg_sha256 s; /* one byte at a time: every partial-block path */
    uint8_t d[32];
    rg_sha256_init(&s);
    for (size_t i = 0; i < n; i++) rg_sha256_update(&s, &msg[i], 1);
    rg_sha256_final(&s, d);
    hex_of(d, hex);
    if (strcmp(hex, BOUNDARIES[k].hex) != 0) fail_msg("%zu bytes one at a time: %s", n, hex);
    assert_int_equal(rg_write_file_atomic(path, msg, n), 0);
    assert_int_equal(rg_sha256_file(path, hex), 0);
    if (strcmp(hex, BOUNDARIES[k].hex) != 0) fail_msg("%zu bytes from a file: %s", n, hex);
  }
  free(path);
}

static void test_missing_file_is_one_line_naming_it(void **state) {
  char hex[65];
  assert_int_equal(rg_sha256_file("/nonexistent/model.gguf", hex), -1);
  assert_non_null(strstr(rg_error_get(), "/nonexistent/model.gguf: "));
}

/* A 3 MB pseudo-random message fed in uneven pieces (1, 63, 64, 65, 4097
 * bytes ...: runs of whole blocks and partial ones) against coreutils'
 * sha256sum of the same bytes. CTest runs this binary twice: on the CPU's
 * SHA extensions where it has them, and with REFGEO_SHA256_PORTABLE=1 on
 * the C loop. */
static void test_long_message_against_sha256sum(void **state) {
  enum { N = 3 << 20 };
  uint8_t *msg = malloc(N);
  assert_non_null(msg);
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < N; i++) x = x * 6364136223846793005ull + 1442695040888963407ull, msg[i] = (uint8_t)(x >> 56);
  char *path = t_write_tmp("sha256_long.bin", msg, N), cmd[1200], want[65] = "", hex[65];
  snprintf(cmd, sizeof cmd, "sha256sum '%s'", path);
  FILE *fp = popen(cmd, "r");
  assert_non_null(fp);
  assert_int_equal(fscanf(fp, "%64s", want), 1);
  pclose(fp);
  static const size_t PIECES[] = {1, 63, 64, 65, 4097, 127, 128, 1 << 16, 3};
  rg_sha256 s;
  uint8_t d[32];
  rg_sha256_init(&s);
  for (size_t at = 0, k = 0; at < N; k++) {
    size_t n = PIECES[k % (sizeof PIECES / sizeof PIECES[0])];
    if (n > N - at) n = N - at;
    rg_sha256_update(&s, msg + at, n);
    at += n;
  }
  rg_sha256_final(&s, d);
  rg_sha256_hex(d, hex);
  assert_string_equal(hex, want);
  assert_int_equal(rg_sha256_file(path, hex), 0);
  assert_string_equal(hex, want);
  free(path), free(msg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fips_examples),
      cmocka_unit_test(test_padding_boundaries_whole_bytewise_and_file),
      cmocka_unit_test(test_missing_file_is_one_line_naming_it),
      cmocka_unit_test(test_long_message_against_sha256sum),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
