/* test_csv_write: CSV files written by rg_csv_writer read back field for
 * field through rg_csv_read (libcsv's RFC 4180 parser, an independent
 * reader), including fields that need quoting. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"
#include "util/csv_table.h"
#include "util/csv_write.h"
#include "util/error.h"
#include "util/fileio.h"

static void test_round_trip(void **state) {
  char *path = t_tmp_path("csv_write_round_trip.csv");
  unlink(path); /* left by an earlier run */
  const char *header[] = {"name", "count", "value"};
  const char *names[] = {"plain", "with, comma", "say \"hi\"", "two\nlines", " padded ", ""};
  const double values[] = {0.1, -1e-300, 1.0 / 3.0, 6.02214076e23, NAN, -INFINITY};
  rg_csv_writer w;
  assert_int_equal(rg_csv_writer_open(&w, path, header, 3), 0);
  for (int i = 0; i < 6; i++) {
    assert_int_equal(rg_csv_writer_str(&w, names[i]), 0);
    assert_int_equal(rg_csv_writer_int(&w, (long long)i * -1000000000000LL), 0);
    assert_int_equal(rg_csv_writer_double(&w, values[i]), 0);
    assert_int_equal(rg_csv_writer_end_row(&w), 0);
  }
  /* Nothing is visible before close: the data sits in the temp file. */
  assert_false(rg_path_exists(path));
  assert_int_equal(rg_csv_writer_close(&w), 0);

  rg_csv *t = rg_csv_read(path);
  if (!t) fail_msg("%s", rg_error_get());
  assert_int_equal(t->n_cols, 3);
  assert_string_equal(t->header[2], "value");
  assert_int_equal(t->n_rows, 6);
  for (int i = 0; i < 6; i++) {
    assert_string_equal(t->rows[i][0], names[i]);
    assert_int_equal(strtoll(t->rows[i][1], NULL, 10), (long long)i * -1000000000000LL);
    double v = strtod(t->rows[i][2], NULL);
    if (isnan(values[i]))
      assert_string_equal(t->rows[i][2], "nan");
    else
      assert_true(v == values[i]); /* %.17g round-trips exactly */
  }
  rg_csv_free(t);

  /* Plain fields stay unquoted; only the ones that need it get quotes. */
  char *text = rg_read_file(path, NULL);
  assert_non_null(text);
  assert_non_null(strstr(text, "\nplain,0,0.10000000000000001\n"));
  assert_non_null(strstr(text, "\"say \"\"hi\"\"\""));
  assert_non_null(strstr(text, ",-inf\n"));
  free(text);
  free(path);
}

static void test_row_width_errors(void **state) {
  char *path = t_tmp_path("csv_write_short.csv");
  const char *header[] = {"a", "b"};
  rg_csv_writer w;
  assert_int_equal(rg_csv_writer_open(&w, path, header, 2), 0);
  assert_int_equal(rg_csv_writer_int(&w, 1), 0);
  assert_int_equal(rg_csv_writer_end_row(&w), -1);
  assert_non_null(strstr(rg_error_get(), "row has 1 fields, header has 2"));
  assert_non_null(strstr(rg_error_get(), path));
  assert_int_equal(rg_csv_writer_int(&w, 2), 0);
  assert_int_equal(rg_csv_writer_int(&w, 3), -1); /* a third field */
  assert_int_equal(rg_csv_writer_end_row(&w), 0);
  assert_int_equal(rg_csv_writer_int(&w, 4), 0);
  /* Closing with a half row fails and leaves no file behind. */
  assert_int_equal(rg_csv_writer_close(&w), -1);
  assert_false(rg_path_exists(path));

  assert_int_equal(rg_csv_writer_open(&w, path, header, 2), 0);
  rg_csv_writer_abort(&w);
  assert_false(rg_path_exists(path));

  /* An unwritable place is an error naming the file. */
  assert_int_equal(rg_csv_writer_open(&w, "/nonexistent-dir/x.csv", header, 2), -1);
  assert_non_null(strstr(rg_error_get(), "/nonexistent-dir/x.csv"));
  free(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_row_width_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
