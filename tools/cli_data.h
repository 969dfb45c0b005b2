/* cli_data.h: where the CLI finds refgeo's own data files (data/ in the
 * source tree: prompt sets, HarmBench, AdvBench, refusal_direction, XSTest),
 * so that every default path works from any current directory.
 *
 * The data folder is, in order:
 *   1. $REFGEO_DATA when it is set and not empty (taken as given);
 *   2. EXE_DIR/data, where EXE_DIR holds the running executable
 *      (/proc/self/exe): a refgeo installed next to its data;
 *   3. EXE_DIR/../data: build/refgeo (any build folder) in a source tree.
 * When neither 2 nor 3 is a folder, 3 is used anyway, so that the command
 * that opens the file fails naming the path it looked for. */
#ifndef RG_CLI_DATA_H
#define RG_CLI_DATA_H

/* NAME (e.g. "harmbench/refusal_substrings.json") inside the data folder, as
 * a malloc'd path the caller frees. NULL only when out of memory (error set). */
char *cli_data_path(const char *name);

#endif
