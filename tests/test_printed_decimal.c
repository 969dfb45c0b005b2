/* test_printed_decimal: the half unit in the last printed digit of a decimal
 * text. Expected values are hand facts: "0.0188" has 4 decimals, so it
 * stands for [0.01875, 0.01885] and its half unit is 0.5e-4. */
#include <math.h>
#include <string.h>

#include "testlib.h"
#include "util/error.h"
#include "util/printed_decimal.h"

typedef struct {
  const char *text;
  double value, half_unit;
} printed_case;

static void test_half_unit_of_the_last_digit(void **state) {
  static const printed_case cases[] = {
      {"0", 0.0, 0.5}, /* an integer: half of one */
      {"1", 1.0, 0.5},
      {"0.0", 0.0, 0.05},
      {"0.2500", 0.25, 5e-5}, /* trailing zeros are printed digits */
      {"0.25", 0.25, 5e-3},
      {"0.0188", 0.0188, 5e-5},
      {"1.88e-2", 0.0188, 5e-5}, /* the mantissa's decimals, shifted by the exponent */
      {"1.88E-02", 0.0188, 5e-5},
      {"188e-4", 0.0188, 5e-5},
      {"-0.5E+1", -5.0, 0.5},
      {"12.5e3", 12500.0, 50.0},
      {".5", 0.5, 0.05},
      {"5.", 5.0, 0.5},
      {"  0.035", 0.035, 5e-4}, /* leading blanks, as strtod allows */
      {"0.018845326377266575", 0.018845326377266575, 5e-19},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    double v = -1.0, h = -1.0;
    if (rg_parse_printed_decimal(cases[i].text, &v, &h) != 0) fail_msg("'%s': %s", cases[i].text, rg_error_get());
    /* pow(10, e) is within an ulp or two of the decimal half unit: 1e-12
     * relative tells 5e-5 from 5e-4 and from 5e-6 with room to spare. */
    if (v != cases[i].value || fabs(h - cases[i].half_unit) > 1e-12 * cases[i].half_unit)
      fail_msg("'%s': value %.17g half unit %.17g, want %.17g and %.17g", cases[i].text, v, h, cases[i].value,
               cases[i].half_unit);
  }
}

static void test_not_a_decimal_number(void **state) {
  static const char *const bad[] = {"", ".", "-", "e5", "1e", "1e+", "0.1.2", "0x1p-3", "nan", "inf",
                                    "0.25 ", "1,5", "25%", "1e999", "0e999"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    double v, h;
    if (rg_parse_printed_decimal(bad[i], &v, &h) != -1) fail_msg("'%s' was accepted", bad[i]);
    if (!strstr(rg_error_get(), "is not a decimal number")) fail_msg("'%s': error '%s'", bad[i], rg_error_get());
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_half_unit_of_the_last_digit),
      cmocka_unit_test(test_not_a_decimal_number),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
