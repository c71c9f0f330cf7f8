/* platform/platform.h — the one place that knows the operating system. Every
 * call the core makes into the OS that C11 does not define goes through here:
 * shared libraries, threads, mutexes and condition variables, files by UTF-8
 * path (UTF-16 on Windows), 64-bit sizes and offsets, atomic replace, fsync,
 * folders, read-only memory maps, memory and process information, monotonic
 * time, the environment. Two implementations, one per OS family:
 * platform_posix.c (Linux) and platform_win32.c (Windows, MinGW-w64 or MSVC);
 * CMake compiles one of them. This header includes no OS header.
 *
 * Conventions. A fallible call returns ork_status: ORK_OK, or ORK_E_IO (an OS
 * call failed; errno holds the reason, mapped from GetLastError on Windows, so
 * that a caller can test errno == ENOENT and print strerror(errno)),
 * ORK_E_NOMEM or ORK_E_INVALID. The platform layer never logs: the caller
 * says what it was doing, in its one ORK_FAIL line.
 * File descriptors are ints on both systems (the C runtime's on Windows, whose
 * HANDLE the positioned reads, maps and syncs reach through _get_osfhandle),
 * so that callers keep one type. Owns nothing beyond each object it hands out
 * (ork_lib, ork_thread, ork_dir: each freed by its close/join call).
 * [any-thread] unless a call says otherwise. */
#ifndef ORK_PLATFORM_PLATFORM_H
#define ORK_PLATFORM_PLATFORM_H

#include <orakul/abi.h>      /* ork_status */
#include <orakul/platform.h> /* the types plugins share, the service table */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h> /* FILE */

/* ---- shared libraries ----------------------------------------------------- */

typedef struct ork_lib ork_lib;

/* Load the shared library at path (dlopen RTLD_NOW|RTLD_LOCAL; LoadLibraryExW
 * with the library's own folder searched for its dependencies). On failure
 * ORK_E_IO and err (when not NULL) holds "<path>: <the loader's reason>". */
ork_status ork_lib_open(const char *path, char *err, size_t errn, ork_lib **out);
/* The address of an exported symbol, or NULL when it has none. */
void *ork_lib_sym(ork_lib *lib, const char *name);
/* Unloads (NULL: nothing). */
void ork_lib_close(ork_lib *lib);
/* ".so" or ".dll": the suffix of a shared library (a plugin is
 * "orakul-<name>" + this suffix). */
const char *ork_lib_suffix(void);

/* 1 on Windows, 0 elsewhere: for the few conventions that differ (plugins
 * live beside orakul.exe; lists of folders are ';'-separated). */
int ork_os_windows(void);
/* The separator of a list of folders in one variable (PATH, ORAKUL_PLUGIN_PATH):
 * ':' (POSIX) or ';' (Windows, where ':' follows a drive letter). */
char ork_path_list_sep(void);
/* 1 for '/', and for '\\' on Windows: where a path's folders divide. */
int ork_path_is_sep(char c);

/* ---- threads ---------------------------------------------------------------- */

/* ork_thread: <orakul/platform.h> (opaque). */
/* Start fn(arg) on a new thread; *out until ork_thread_join. */
ork_status ork_thread_start(void (*fn)(void *arg), void *arg, ork_thread **out);
/* Wait for the thread to end and free it (NULL: nothing). */
void ork_thread_join(ork_thread *t);

/* A mutex and a condition variable: storage the caller owns (embed them in a
 * struct), made ready by _init and released by _destroy. Opaque: the bytes are
 * a pthread_mutex_t / pthread_cond_t or an SRWLOCK / CONDITION_VARIABLE. */
typedef struct ork_mutex {
    union { void *align_p; long long align_ll; double align_d; unsigned char b[64]; } u;
} ork_mutex;
typedef struct ork_cond {
    union { void *align_p; long long align_ll; double align_d; unsigned char b[64]; } u;
} ork_cond;

ork_status ork_mutex_init(ork_mutex *m);
void ork_mutex_destroy(ork_mutex *m);
void ork_mutex_lock(ork_mutex *m);
void ork_mutex_unlock(ork_mutex *m);

ork_status ork_cond_init(ork_cond *c);
void ork_cond_destroy(ork_cond *c);
/* Atomically unlocks m and waits; m is held again on return (spurious wakeups
 * happen: wait in a loop on the condition). */
void ork_cond_wait(ork_cond *c, ork_mutex *m);
/* As ork_cond_wait, for at most ms milliseconds: 1 when woken, 0 on timeout. */
int ork_cond_timedwait(ork_cond *c, ork_mutex *m, uint32_t ms);
void ork_cond_signal(ork_cond *c);
void ork_cond_broadcast(ork_cond *c);

/* Run init exactly once across all threads (the others wait for it).
 * static ork_once g = ORK_ONCE_INIT; ork_call_once(&g, init); */
typedef struct ork_once {
    union { void *align_p; long long align_ll; unsigned char b[16]; } u;
} ork_once;
#define ORK_ONCE_INIT {{0}}
void ork_call_once(ork_once *once, void (*init)(void));

/* ---- files by UTF-8 path ------------------------------------------------------ */

/* Flags of ork_fd_open: ORK_F_* of <orakul/platform.h>. */
ork_status ork_fd_open(const char *path, int flags, int *fd);
/* Closes (fd < 0: nothing). */
void ork_fd_close(int fd);
/* Clears O_NONBLOCK after an ORK_F_NONBLOCK open (no-op on Windows). */
ork_status ork_fd_set_blocking(int fd);
/* Up to n bytes at the file position into buf; *got 0 at the end of the file.
 * Interrupted calls are retried. */
ork_status ork_fd_read(int fd, void *buf, size_t n, size_t *got);
/* All n bytes at the file position (retrying short writes). */
ork_status ork_fd_write(int fd, const void *buf, size_t n);
/* Up to n bytes at offset off, without moving the file position; fewer only at
 * the end of the file (*got says how many). */
ork_status ork_fd_pread(int fd, void *buf, size_t n, uint64_t off, size_t *got);
/* All n bytes at offset off, without moving the file position. */
ork_status ork_fd_pwrite(int fd, const void *buf, size_t n, uint64_t off);
/* Sets the file's size (grows with zeros, or cuts). */
ork_status ork_fd_truncate(int fd, uint64_t size);
/* The file's data and size on the disk (fsync / FlushFileBuffers). */
ork_status ork_fd_sync(int fd);

/* fopen with a UTF-8 path (_wfopen on Windows); NULL and errno on failure.
 * Mode as fopen's; Windows always opens binary ("b" added). */
FILE *ork_fopen(const char *path, const char *mode);
/* An anonymous temporary file, read-write, removed when closed (tmpfile; on
 * Windows in GetTempPathW's folder, as the C runtime's tmpfile writes to the
 * drive's root); NULL and errno on failure. For text built through stdio and
 * read back (open_memstream is POSIX only). */
FILE *ork_tmpfile(void);
/* fflush, then the file's data to the disk; ORK_E_IO with errno on failure. */
ork_status ork_fsync_file(FILE *f);

/* ork_file_kind, ork_file_info: <orakul/platform.h>. */

/* Of an open descriptor / of a path (following links) / of a path (a link
 * itself: ORK_KIND_LINK). errno ENOENT when the path does not exist. */
ork_status ork_fd_info(int fd, ork_file_info *out);
ork_status ork_path_info(const char *path, ork_file_info *out);
ork_status ork_path_lstat(const char *path, ork_file_info *out);
/* "a regular file", "a folder", "a FIFO", ... for the line of a refusal. */
const char *ork_file_kind_str(ork_file_kind kind);
/* 1 when path exists (any kind), else 0. */
int ork_path_exists(const char *path);
/* 1 when this process may read (write 0) or write (write 1) path, else 0 with
 * errno (access R_OK / W_OK; _waccess on Windows, which sees only the
 * read-only attribute). */
int ork_path_access(const char *path, int write);

/* Atomically replace `to` by `from` (both in one folder) and make the rename
 * durable: rename + fsync of the folder (POSIX); MoveFileExW with
 * MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH (Windows, where a `to`
 * that another process holds open refuses it: retried for up to 5 s). */
ork_status ork_path_replace(const char *from, const char *to);
/* fsync of a folder, so that names created or renamed in it survive a crash
 * (POSIX; a no-op on Windows, where MOVEFILE_WRITE_THROUGH does it). */
ork_status ork_dir_sync(const char *dir);
/* Remove a file / an empty folder. */
ork_status ork_path_remove(const char *path);
ork_status ork_path_rmdir(const char *path);
/* Create one folder (EEXIST when it exists) / every missing folder of path
 * (mkdir -p: an existing folder is fine, an existing file is ENOTDIR). */
ork_status ork_mkdir(const char *path);
ork_status ork_mkdir_p(const char *path);
/* The absolute, canonical form of path (realpath / GetFullPathNameW) into buf. */
ork_status ork_path_real(const char *path, char *buf, size_t n);
/* The running executable's path (/proc/self/exe / GetModuleFileNameW). */
ork_status ork_exe_path(char *buf, size_t n);
/* Where temporary files go: $TMPDIR or /tmp; GetTempPathW (no trailing slash). */
ork_status ork_temp_dir(char *buf, size_t n);

/* Listing a folder: the names in it, "." and ".." left out, in the order the
 * system gives them. */
/* ork_dir: <orakul/platform.h> (opaque). */
ork_status ork_dir_open(const char *path, ork_dir **out);
/* The next name (valid until the next call or close), or NULL at the end. */
const char *ork_dir_next(ork_dir *d);
void ork_dir_close(ork_dir *d);

/* A read-only, private map of the first size bytes of fd (size > 0); the map
 * outlives fd. ork_map_close(p, size) unmaps. */
ork_status ork_map_fd(int fd, uint64_t size, const void **p);
void ork_map_close(const void *p, uint64_t size);
/* Ask the system to read the pages of [p, p + n) of a map in now (madvise
 * MADV_POPULATE_READ, else MADV_WILLNEED / PrefetchVirtualMemory): ORK_OK when
 * it took the request, ORK_E_UNSUPPORTED when the caller must touch the pages
 * itself. */
ork_status ork_map_prefetch(const void *p, size_t n);

/* ---- memory ------------------------------------------------------------------ */

/* size bytes aligned to align (a power of two, a multiple of sizeof(void *)),
 * or NULL; freed with ork_aligned_free only (aligned_alloc + free /
 * _aligned_malloc + _aligned_free: the Windows C runtime has no aligned_alloc). */
void *ork_aligned_alloc(size_t align, size_t size);
void ork_aligned_free(void *p);

/* ---- the machine and the process ------------------------------------------- */

/* Memory the system can give without swapping (MemAvailable of /proc/meminfo;
 * ullAvailPhys of GlobalMemoryStatusEx) and the installed total. */
ork_status ork_mem_available(uint64_t *bytes);
ork_status ork_mem_total(uint64_t *bytes);
/* The most physical memory this process has held so far (getrusage's
 * ru_maxrss; PeakWorkingSetSize of GetProcessMemoryInfo), in bytes. */
ork_status ork_peak_rss(uint64_t *bytes);
/* This process's id. */
long ork_pid(void);
/* 1 when a process with this id runs (or may: not ours to ask), 0 when none does. */
int ork_pid_alive(long pid);
/* Nanoseconds of a monotonic clock (only differences mean anything). */
uint64_t ork_time_ns(void);
/* Nanoseconds of CPU time this process has used, all its threads, user and
 * system (clock_gettime CLOCK_PROCESS_CPUTIME_ID; GetProcessTimes, in 100 ns
 * ticks); 0 when the system will not say. For benchmarks: next to the wall
 * time it tells a contended machine apart. */
uint64_t ork_process_cpu_ns(void);
/* Sleep at least us microseconds (Windows: whole milliseconds; under 1000 a yield). */
void ork_sleep_us(uint32_t us);
/* The environment: getenv (NULL when unset); set (value NULL: unset). */
const char *ork_env_get(const char *name);
ork_status ork_env_set(const char *name, const char *value);
size_t ork_page_size(void);
/* Online CPUs (at least 1). */
int ork_cpu_count(void);
/* 1 when the stream (stdout / stderr) is a terminal or console. */
int ork_isatty(FILE *f);
/* 1 when f is a terminal that takes ANSI escape codes ("\x1b[K"): POSIX, a
 * terminal whose TERM is not "dumb"; Windows, a console whose virtual-terminal
 * processing this call turned on (SetConsoleMode with
 * ENABLE_VIRTUAL_TERMINAL_PROCESSING: Windows 10 1511 on; an older console
 * refuses it). 0 otherwise, and always 0 when f is not a terminal. */
int ork_console_ansi(FILE *f);

/* ---- child processes (tests and tools) -------------------------------------- */

typedef struct ork_proc ork_proc;
/* Start the program at argv[0] (a path; argv NULL-terminated, arguments in
 * UTF-8) with this process's environment; its stdout / stderr into the files
 * out_path / err_path (created or truncated; NULL: this process's own).
 * posix_spawn; on Windows CreateProcessW with a UTF-16 command line quoted so
 * that the child's C runtime splits it back into the same argv. */
ork_status ork_proc_spawn(const char *const *argv, const char *out_path, const char *err_path, ork_proc **out);
/* Wait at most ms milliseconds (ORK_PROC_FOREVER: without limit) for it to
 * end: 1 and *code (its exit code; 128 + the signal that ended it on POSIX)
 * when it has ended, 0 when it still runs. */
#define ORK_PROC_FOREVER UINT32_MAX
int ork_proc_wait(ork_proc *p, uint32_t ms, int *code);
/* End it now (SIGKILL / TerminateProcess with code 137); wait to reap it. */
void ork_proc_kill(ork_proc *p);
long ork_proc_pid(const ork_proc *p);
/* Free it (NULL: nothing); one still running is killed and reaped first. */
void ork_proc_free(ork_proc *p);

/* The service "orakul.platform/1" (<orakul/platform.h>): these calls for
 * plugins; plugin/host.c offers it. */
const ork_platform_api *ork_platform_api_table(void);

#endif
