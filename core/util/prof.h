/* util/prof.h — an opt-in phase/op profiler for finding where a training step's
 * time goes: ORAKUL_PROFILE=1 makes the runner and the tape synchronise the
 * device around each phase and each backward node and add up the wall time by
 * name; the trainer prints the table at the end. Off (the default) it costs one
 * branch per call. Process-wide, [control-thread] only. */
#ifndef ORK_UTIL_PROF_H
#define ORK_UTIL_PROF_H

#include <stdio.h>

int ork_prof_enabled(void);
double ork_prof_now(void); /* monotonic seconds */
/* Add seconds under (kind, name); name is copied. */
void ork_prof_add(const char *kind, const char *name, double seconds);
/* The table, sorted by time, per step. */
void ork_prof_report(FILE *f, double steps);

#endif
