/* fault.h: named kill points, so that tests can kill a process at an exact
 * place (a checkpoint half written, a state between two files) and check
 * what a restart finds.
 *
 * REFGEO_KILL_AT="NAME:N" makes the N-th call (1-based) of
 * rg_fault_point("NAME") raise SIGKILL: no handler, no atexit, no flush, as
 * a power cut or the OOM killer would. REFGEO_STOP_AT="NAME:N" raises
 * SIGSTOP there instead: the process stays, holding what it holds (a run
 * directory's lock), until a test kills or continues it. Unset (every
 * user's case), a point costs a check of two cached counts.
 */
#ifndef RG_UTIL_FAULT_H
#define RG_UTIL_FAULT_H

void rg_fault_point(const char *name);

#endif
