/* fault.h: named kill points, so that tests can kill a process at an exact
 * place (a checkpoint half written, a state between two files) and check
 * what a restart finds.
 *
 * REFGEO_KILL_AT="NAME:N" makes the N-th call (1-based) of
 * rg_fault_point("NAME") raise SIGKILL: no handler, no atexit, no flush, as
 * a power cut or the OOM killer would. Unset (every user's case), a point
 * costs one string comparison against a cached empty name.
 */
#ifndef RG_UTIL_FAULT_H
#define RG_UTIL_FAULT_H

void rg_fault_point(const char *name);

#endif
