/* cli_data.c: the data folder rule of cli_data.h. */
#include "cli_data.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/error.h"
#include "util/fileio.h"

/* The data folder next to the executable (rule 2) or next to its folder
 * (rule 3), as a malloc'd path; "data" (relative to the current directory)
 * when the executable's path cannot be read, e.g. without /proc. */
static char *data_dir_near_exe(void) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  char *slash = n > 0 ? (exe[n] = '\0', strrchr(exe, '/')) : NULL;
  if (!slash) return strdup("data");
  *slash = '\0'; /* exe is now EXE_DIR ("" for an executable in "/") */
  char *beside = rg_path_join(exe, "data");
  if (!beside || rg_is_dir(beside)) return beside;
  free(beside);
  /* EXE_DIR/../data, spelt without ".." so that error messages are plain */
  slash = strrchr(exe, '/');
  if (slash) *slash = '\0';
  return rg_path_join(exe, "data");
}

char *cli_data_path(const char *name) {
  const char *env = getenv("REFGEO_DATA");
  char *dir = env && *env ? strdup(env) : data_dir_near_exe();
  char *path = dir ? rg_path_join(dir, name) : NULL;
  free(dir);
  if (!path) rg_error_set("%s: out of memory finding refgeo's data folder", name);
  return path;
}
