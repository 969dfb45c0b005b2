/* cli_classifier.h: --classifier and --refusal-substrings of `refgeo asr`
 * and `refgeo classify`: the library's classifier table
 * (harmbench/classifiers.h) with errors that name the flag at fault. */
#ifndef RG_CLI_CLASSIFIER_H
#define RG_CLI_CLASSIFIER_H

#include "harmbench/classifiers.h"

/* The classifier NAME given to --classifier; NULL with the error
 * "--classifier: unknown classifier 'NAME' (...)". */
const rg_classifier_info *cli_classifier_find(const char *name);

/* The refusal list of C, reading SUBSTRINGS (--refusal-substrings) when C
 * needs it; NULL with the error, prefixed by "--refusal-substrings: " when
 * that file is at fault. */
rg_refusal_list *cli_classifier_list(const rg_classifier_info *c, const char *substrings);

#endif
