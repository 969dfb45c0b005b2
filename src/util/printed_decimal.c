/* printed_decimal.c: a number as printed, with the precision its text carries (printed_decimal.h). */
#include "util/printed_decimal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "util/error.h"

static const char *skip_digits(const char *s) {
  while (isdigit((unsigned char)*s)) s++;
  return s;
}

int rg_parse_printed_decimal(const char *text, double *value, double *half_unit) {
  /* Walk the grammar first: strtod alone would also take hex floats, "inf"
   * and "nan", whose digits say nothing about decimal precision. */
  const char *s = text;
  while (*s == ' ' || *s == '\t') s++;
  if (*s == '+' || *s == '-') s++;
  const char *int_end = skip_digits(s);
  long decimals = 0;
  const char *mant_end = int_end;
  if (*int_end == '.') {
    mant_end = skip_digits(int_end + 1);
    decimals = (long)(mant_end - (int_end + 1));
  }
  int has_digit = int_end > s || decimals > 0;
  double exponent = 0.0;
  const char *end = mant_end;
  if (has_digit && (*end == 'e' || *end == 'E')) {
    const char *e = end + 1;
    if (*e == '+' || *e == '-') e++;
    const char *e_end = skip_digits(e);
    if (e_end > e) {
      exponent = strtod(end + 1, NULL); /* a double: an absurd exponent cannot overflow an int */
      end = e_end;
    }
  }
  if (!has_digit || *end) return rg_error_set("'%s' is not a decimal number", text);
  errno = 0;
  double v = strtod(text, NULL);
  int value_out_of_range = errno != 0 || !isfinite(v);
  double half = 0.5 * pow(10.0, exponent - (double)decimals);
  /* "1e999" overflows the value; "0e999" the precision, which would
   * otherwise make the number agree with anything. */
  if (value_out_of_range || !isfinite(half))
    return rg_error_set("'%s' is not a decimal number a double can hold", text);
  *value = v;
  *half_unit = half;
  return 0;
}
