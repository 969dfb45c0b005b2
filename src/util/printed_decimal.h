/* printed_decimal.h: a number as someone printed it, with the precision its
 * text carries.
 *
 * A value typed from a paper or exported by a spreadsheet is rounded to the
 * digits shown: "0.0188" stands for anything in [0.01875, 0.01885]. Comparing
 * it with a recomputed value needs that half unit in the last digit, which
 * the double alone has lost ("0.25" and "0.2500" parse to the same double).
 */
#ifndef RG_PRINTED_DECIMAL_H
#define RG_PRINTED_DECIMAL_H

/* Parses TEXT, which must be a whole decimal number: optional leading blanks,
 * an optional sign, digits with at most one '.', an optional exponent
 * (e/E, optional sign, digits). Sets *value to the number and *half_unit to
 * half a unit in its last printed digit: 0.5 * 10^(exponent - decimals),
 * where decimals counts the mantissa's digits after the '.'. So "0.0188",
 * "1.88e-2" and "188e-4" give 5e-5, "0.2500" 5e-5, "0.0" 0.05, "0" and "1"
 * 0.5. Returns 0, or -1 with the error "'TEXT' is not a decimal number" for
 * anything else (hex, inf, nan, trailing characters) or a value a double
 * cannot hold. */
int rg_parse_printed_decimal(const char *text, double *value, double *half_unit);

#endif
