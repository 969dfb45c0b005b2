/* cli_data.h: where the CLI finds refgeo's own data files (data/ in the
 * source tree: prompt sets, HarmBench, AdvBench, refusal_direction, XSTest),
 * so that every default path works from any current directory.
 *
 * The data folder is the first of these that is a folder:
 *   1. EXE_DIR/../share/refgeo, where EXE_DIR holds the running executable
 *      (/proc/self/exe): a refgeo installed by `cmake --install` (PREFIX/bin
 *      and PREFIX/share/refgeo; relative, so the prefix may move);
 *   2. $REFGEO_DATA when it is set and not empty (taken as given, folder or
 *      not);
 *   3. EXE_DIR/data: a refgeo copied next to its data;
 *   4. EXE_DIR/../data: build/refgeo (a build folder inside the source tree);
 *   5. the data/ of the source tree this refgeo was built from, when
 *      EXE_DIR is the build folder it was built in (a build folder anywhere:
 *      cmake -S SRC -B /elsewhere; not a copy of the executable elsewhere).
 * When none holds, 4 is used anyway, so that the command that opens a file
 * fails naming the path it looked for. */
#ifndef RG_CLI_DATA_H
#define RG_CLI_DATA_H

/* NAME (e.g. "harmbench/refusal_substrings.json") inside the data folder, as
 * a malloc'd path the caller frees. NULL only when out of memory (error set). */
char *cli_data_path(const char *name);

#endif
