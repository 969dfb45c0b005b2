/* cli_data.c: the data folder rule of cli_data.h. */
#include "cli_data.h"

#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/error.h"
#include "util/fileio.h"

/* CMake sets these for the CLI (CMakeLists.txt); the defaults keep another
 * build compiling, without rule 5. */
#ifndef REFGEO_INSTALL_DATA_REL
#define REFGEO_INSTALL_DATA_REL "share/refgeo"
#endif
#ifndef REFGEO_SOURCE_DATA
#define REFGEO_SOURCE_DATA ""
#define REFGEO_BUILD_DIR ""
#endif

/* Whether DIR is the build folder this refgeo was built in (rule 5 holds for
 * that folder only, not for a copy of the executable elsewhere). */
static bool is_build_dir(const char *dir) {
  char a[PATH_MAX], b[PATH_MAX];
  return REFGEO_BUILD_DIR[0] && realpath(dir, a) && realpath(REFGEO_BUILD_DIR, b) && strcmp(a, b) == 0;
}

/* DIR joined with REL when that is a folder, else NULL (also out of memory). */
static char *dir_if_present(const char *dir, const char *rel) {
  char *path = rg_path_join(dir, rel);
  if (path && rg_is_dir(path)) return path;
  free(path);
  return NULL;
}

/* The data folder by rules 1 to 5, as a malloc'd path; EXE_DIR/../data when
 * none holds ("data" when the executable's path cannot be read, e.g.
 * without /proc). */
static char *data_dir(void) {
  char exe[PATH_MAX], *found = NULL;
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  char *slash = n > 0 ? (exe[n] = '\0', strrchr(exe, '/')) : NULL;
  char parent[PATH_MAX] = "";
  if (slash) {
    *slash = '\0'; /* exe is now EXE_DIR ("" for an executable in "/") */
    /* EXE_DIR/.., spelt without ".." so that error messages are plain */
    memcpy(parent, exe, strlen(exe) + 1);
    char *up = strrchr(parent, '/');
    if (up) *up = '\0';
    found = dir_if_present(parent, REFGEO_INSTALL_DATA_REL); /* 1 */
  }
  const char *env = getenv("REFGEO_DATA");
  if (!found && env && *env) return strdup(env); /* 2 */
  if (!found && slash && !(found = dir_if_present(exe, "data"))) found = dir_if_present(parent, "data"); /* 3, 4 */
  if (!found && slash && is_build_dir(exe)) found = strdup(REFGEO_SOURCE_DATA);                         /* 5 */
  if (found) return found;
  return slash ? rg_path_join(parent, "data") : strdup("data"); /* named in the error that follows */
}

char *cli_data_path(const char *name) {
  char *dir = data_dir();
  char *path = dir ? rg_path_join(dir, name) : NULL;
  free(dir);
  if (!path) rg_error_set("%s: out of memory finding refgeo's data folder", name);
  return path;
}
