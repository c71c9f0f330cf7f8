/* platform/platform_win32.c — platform.h on Windows (MinGW-w64 or MSVC, the
 * UCRT or msvcrt): LoadLibraryExW, _beginthreadex, SRW locks and condition
 * variables, the C runtime's descriptors (_wopen) with their HANDLE for
 * positioned reads/writes, maps and syncs, MoveFileExW, FindFirstFileW,
 * CreateFileMapping, GlobalMemoryStatusEx. Every path is UTF-8 and converted
 * to UTF-16 (MultiByteToWideChar) before it reaches the system; every name the
 * system gives back is converted to UTF-8. errno carries each failure's reason
 * (GetLastError mapped). Owns each ork_lib, ork_thread and ork_dir it hands
 * out. */
#ifndef _WIN32_WINNT
#define _WIN32_WINNT 0x0A00 /* Windows 10: LOAD_LIBRARY_SEARCH_*, GetActiveProcessorCount */
#endif
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include "platform/platform.h"

#include <windows.h>
/* GetProcessMemoryInfo from kernel32 (K32*, Windows 7 on): no psapi.lib */
#ifndef PSAPI_VERSION
#define PSAPI_VERSION 2
#endif
#include <psapi.h>

#include <errno.h>
#include <fcntl.h>
#include <io.h>
#include <limits.h>
#include <malloc.h> /* _aligned_malloc */
#include <process.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <wchar.h>

_Static_assert(sizeof(SRWLOCK) <= sizeof(((ork_mutex *)0)->u.b), "ork_mutex too small");
_Static_assert(sizeof(CONDITION_VARIABLE) <= sizeof(((ork_cond *)0)->u.b), "ork_cond too small");
_Static_assert(sizeof(INIT_ONCE) <= sizeof(((ork_once *)0)->u.b), "ork_once too small");

/* ---- errors and UTF-16 ------------------------------------------------------ */

static int errno_of(DWORD e) {
    switch (e) {
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND:
    case ERROR_INVALID_NAME:
    case ERROR_INVALID_DRIVE:
    case ERROR_BAD_NETPATH:
    case ERROR_MOD_NOT_FOUND: return ENOENT;
    case ERROR_ACCESS_DENIED:
    case ERROR_SHARING_VIOLATION:
    case ERROR_LOCK_VIOLATION: return EACCES;
    case ERROR_ALREADY_EXISTS:
    case ERROR_FILE_EXISTS: return EEXIST;
    case ERROR_DIRECTORY: return ENOTDIR;
    case ERROR_DIR_NOT_EMPTY: return ENOTEMPTY;
    case ERROR_NOT_ENOUGH_MEMORY:
    case ERROR_OUTOFMEMORY: return ENOMEM;
    case ERROR_DISK_FULL:
    case ERROR_HANDLE_DISK_FULL: return ENOSPC;
    case ERROR_FILENAME_EXCED_RANGE: return ENAMETOOLONG;
    case ERROR_INVALID_PARAMETER:
    case ERROR_INVALID_HANDLE: return EINVAL;
    case ERROR_NOT_SAME_DEVICE: return EXDEV;
    default: return EIO;
    }
}

/* errno from GetLastError; ORK_E_IO for `return os_fail();` */
static ork_status os_fail(void) {
    errno = errno_of(GetLastError());
    return ORK_E_IO;
}

/* A malloc'd UTF-16 copy of a UTF-8 string, or NULL (errno EINVAL for bytes
 * that are not UTF-8, ENOMEM). */
static wchar_t *wide(const char *s) {
    int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, NULL, 0);
    if (n <= 0) return errno = EINVAL, NULL;
    wchar_t *w = malloc((size_t)n * sizeof *w);
    if (!w) return errno = ENOMEM, NULL;
    MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, w, n);
    return w;
}

/* UTF-16 into a UTF-8 buffer of n bytes; 0 (errno ENAMETOOLONG) when it does not fit. */
static int narrow(const wchar_t *w, char *buf, size_t n) {
    int need = WideCharToMultiByte(CP_UTF8, 0, w, -1, NULL, 0, NULL, NULL);
    if (need <= 0 || (size_t)need > n || n > INT_MAX) return errno = ENAMETOOLONG, 0;
    WideCharToMultiByte(CP_UTF8, 0, w, -1, buf, (int)n, NULL, NULL);
    return 1;
}

/* ---- shared libraries ---------------------------------------------------------- */

struct ork_lib {
    HMODULE h;
};

static int is_absolute(const char *p) {
    return (p[0] && p[1] == ':' && (p[2] == '/' || p[2] == '\\')) || (p[0] == '\\' && p[1] == '\\') ||
           (p[0] == '/' && p[1] == '/');
}

/* A path as the system takes it: wide(), and for an absolute path too long for
 * the classic MAX_PATH limit (CreateDirectoryW's is MAX_PATH - 12) its "\\?\"
 * form (GetFullPathNameW's canonical path, backslashes: the prefix turns the
 * system's own normalization off), which reaches 32767 characters without the
 * LongPathsEnabled setting; "\\server\share\..." becomes "\\?\UNC\server\...". */
static wchar_t *wpath(const char *s) {
    wchar_t *w = wide(s);
    if (!w || wcslen(w) < MAX_PATH - 12 || !is_absolute(s) || (w[0] == L'\\' && w[1] == L'\\' && w[2] == L'?'))
        return w;
    DWORD need = GetFullPathNameW(w, 0, NULL, NULL);
    wchar_t *full = need ? malloc(((size_t)need + 8) * sizeof *full) : NULL;
    if (!full || !GetFullPathNameW(w, need, full + 8, NULL)) { /* keep the plain form */
        free(full);
        return w;
    }
    free(w);
    const wchar_t *f = full + 8;
    int unc = f[0] == L'\\' && f[1] == L'\\';
    const wchar_t *pre = unc ? L"\\\\?\\UNC\\" : L"\\\\?\\";
    size_t pl = wcslen(pre), skip = unc ? 2 : 0;
    memmove(full + pl, f + skip, (wcslen(f + skip) + 1) * sizeof *full);
    memcpy(full, pre, pl * sizeof *full);
    return full;
}

ork_status ork_lib_open(const char *path, char *err, size_t errn, ork_lib **out) {
    *out = NULL;
    if (err && errn) err[0] = '\0';
    ork_lib *l = malloc(sizeof *l);
    wchar_t *w = wide(path);
    if (!l || !w) {
        if (err && errn) snprintf(err, errn, "%s: %s", path, strerror(errno));
        free(l), free(w);
        return w ? ORK_E_NOMEM : ORK_E_IO;
    }
    for (wchar_t *c = w; *c; c++)
        if (*c == L'/') *c = L'\\'; /* LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR wants backslashes */
    /* an absolute path: its own folder is searched for the libraries it needs
     * (a plugin's, or cuDNN's sublibraries); a bare name: the usual search */
    l->h = is_absolute(path)
               ? LoadLibraryExW(w, NULL, LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR | LOAD_LIBRARY_SEARCH_DEFAULT_DIRS)
               : LoadLibraryW(w);
    DWORD e = GetLastError();
    free(w);
    if (!l->h) {
        if (err && errn) {
            wchar_t msg[512];
            char m8[1024] = "";
            DWORD k = FormatMessageW(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, NULL, e, 0, msg,
                                     (DWORD)(sizeof msg / sizeof msg[0]), NULL);
            while (k > 0 && (msg[k - 1] == L'\r' || msg[k - 1] == L'\n' || msg[k - 1] == L'.')) msg[--k] = 0;
            if (k == 0 || !narrow(msg, m8, sizeof m8)) snprintf(m8, sizeof m8, "error %lu", (unsigned long)e);
            snprintf(err, errn, "%s: %s", path, m8);
        }
        free(l);
        errno = errno_of(e);
        return ORK_E_IO;
    }
    *out = l;
    return ORK_OK;
}

void *ork_lib_sym(ork_lib *lib, const char *name) {
    if (!lib) return NULL;
    FARPROC f = GetProcAddress(lib->h, name);
    void *p;
    _Static_assert(sizeof p == sizeof f, "function and data pointers differ");
    memcpy(&p, &f, sizeof p); /* a data symbol's address comes back as a FARPROC too */
    return p;
}

void ork_lib_close(ork_lib *lib) {
    if (!lib) return;
    FreeLibrary(lib->h);
    free(lib);
}

const char *ork_lib_suffix(void) { return ".dll"; }
int ork_os_windows(void) { return 1; }
char ork_path_list_sep(void) { return ';'; }
int ork_path_is_sep(char c) { return c == '/' || c == '\\'; }

/* ---- threads -------------------------------------------------------------------- */

struct ork_thread {
    HANDLE h;
    void (*fn)(void *);
    void *arg;
};

static unsigned __stdcall thread_main(void *p) {
    ork_thread *t = p;
    t->fn(t->arg);
    return 0;
}

ork_status ork_thread_start(void (*fn)(void *arg), void *arg, ork_thread **out) {
    *out = NULL;
    ork_thread *t = malloc(sizeof *t);
    if (!t) return ORK_E_NOMEM;
    t->fn = fn, t->arg = arg;
    /* _beginthreadex, not CreateThread: the C runtime's per-thread state is set up */
    uintptr_t h = _beginthreadex(NULL, 0, thread_main, t, 0, NULL);
    if (h == 0) {
        free(t);
        return ORK_E_IO; /* errno set by _beginthreadex */
    }
    t->h = (HANDLE)h;
    *out = t;
    return ORK_OK;
}

void ork_thread_join(ork_thread *t) {
    if (!t) return;
    WaitForSingleObject(t->h, INFINITE);
    CloseHandle(t->h);
    free(t);
}

#define MU(m) ((SRWLOCK *)(void *)(m)->u.b)
#define CV(c) ((CONDITION_VARIABLE *)(void *)(c)->u.b)

ork_status ork_mutex_init(ork_mutex *m) {
    InitializeSRWLock(MU(m));
    return ORK_OK;
}
void ork_mutex_destroy(ork_mutex *m) { (void)m; /* an SRW lock holds no resources */ }
void ork_mutex_lock(ork_mutex *m) { AcquireSRWLockExclusive(MU(m)); }
void ork_mutex_unlock(ork_mutex *m) { ReleaseSRWLockExclusive(MU(m)); }

ork_status ork_cond_init(ork_cond *c) {
    InitializeConditionVariable(CV(c));
    return ORK_OK;
}
void ork_cond_destroy(ork_cond *c) { (void)c; }
void ork_cond_wait(ork_cond *c, ork_mutex *m) { SleepConditionVariableSRW(CV(c), MU(m), INFINITE, 0); }
int ork_cond_timedwait(ork_cond *c, ork_mutex *m, uint32_t ms) {
    return SleepConditionVariableSRW(CV(c), MU(m), ms == INFINITE ? INFINITE - 1 : ms, 0) != 0;
}
void ork_cond_signal(ork_cond *c) { WakeConditionVariable(CV(c)); }
void ork_cond_broadcast(ork_cond *c) { WakeAllConditionVariable(CV(c)); }

struct once_fn {
    void (*init)(void);
};
static BOOL CALLBACK once_main(PINIT_ONCE o, PVOID param, PVOID *ctx) {
    (void)o, (void)ctx;
    ((struct once_fn *)param)->init();
    return TRUE;
}
/* INIT_ONCE_STATIC_INIT is all zeros, as ORK_ONCE_INIT */
void ork_call_once(ork_once *once, void (*init)(void)) {
    struct once_fn f = {init};
    InitOnceExecuteOnce((PINIT_ONCE)(void *)once->u.b, once_main, &f, NULL);
}

/* ---- files -------------------------------------------------------------------------- */

static HANDLE handle_of(int fd) { return (HANDLE)_get_osfhandle(fd); }

ork_status ork_fd_open(const char *path, int flags, int *fd) {
    *fd = -1;
    int o = _O_BINARY | _O_NOINHERIT;
    if ((flags & ORK_F_READ) && (flags & ORK_F_WRITE)) o |= _O_RDWR;
    else if (flags & ORK_F_WRITE) o |= _O_WRONLY;
    else o |= _O_RDONLY;
    if (flags & ORK_F_CREATE) o |= _O_CREAT;
    if (flags & ORK_F_TRUNC) o |= _O_TRUNC;
    if (flags & ORK_F_EXCL) o |= _O_EXCL;
    if (flags & ORK_F_APPEND) o |= _O_APPEND;
    wchar_t *w = wpath(path);
    if (!w) return ORK_E_IO;
    int d = _wopen(w, o, _S_IREAD | _S_IWRITE);
    if (d < 0 && errno == EACCES) { /* _wopen says EACCES for a folder: say what it is */
        DWORD a = GetFileAttributesW(w);
        if (a != INVALID_FILE_ATTRIBUTES && (a & FILE_ATTRIBUTE_DIRECTORY)) errno = EISDIR;
    }
    free(w);
    if (d < 0) return ORK_E_IO; /* errno set by _wopen */
    *fd = d;
    return ORK_OK;
}

void ork_fd_close(int fd) {
    if (fd >= 0) _close(fd);
}

ork_status ork_fd_set_blocking(int fd) {
    (void)fd;
    return ORK_OK;
}

ork_status ork_fd_read(int fd, void *buf, size_t n, size_t *got) {
    *got = 0;
    unsigned chunk = n > (size_t)INT_MAX ? (unsigned)INT_MAX : (unsigned)n;
    int r = _read(fd, buf, chunk);
    if (r < 0) return ORK_E_IO;
    *got = (size_t)r;
    return ORK_OK;
}

ork_status ork_fd_write(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n > 0) {
        unsigned chunk = n > (size_t)(1u << 30) ? (1u << 30) : (unsigned)n;
        int w = _write(fd, p, chunk);
        if (w < 0) return ORK_E_IO;
        p += w, n -= (size_t)w;
    }
    return ORK_OK;
}

/* ReadFile/WriteFile with an OVERLAPPED offset on a synchronous handle: one
 * positioned transfer (it moves the handle's position, which no caller of
 * pread/pwrite relies on). */
ork_status ork_fd_pread(int fd, void *buf, size_t n, uint64_t off, size_t *got) {
    *got = 0;
    HANDLE h = handle_of(fd);
    if (h == INVALID_HANDLE_VALUE) return errno = EBADF, ORK_E_IO;
    char *p = buf;
    while (*got < n) {
        DWORD chunk = n - *got > (1u << 30) ? (1u << 30) : (DWORD)(n - *got), r = 0;
        uint64_t at = off + *got;
        OVERLAPPED ov;
        memset(&ov, 0, sizeof ov);
        ov.Offset = (DWORD)at, ov.OffsetHigh = (DWORD)(at >> 32);
        if (!ReadFile(h, p + *got, chunk, &r, &ov)) {
            if (GetLastError() == ERROR_HANDLE_EOF) break;
            return os_fail();
        }
        if (r == 0) break;
        *got += r;
    }
    return ORK_OK;
}

ork_status ork_fd_pwrite(int fd, const void *buf, size_t n, uint64_t off) {
    HANDLE h = handle_of(fd);
    if (h == INVALID_HANDLE_VALUE) return errno = EBADF, ORK_E_IO;
    const char *p = buf;
    while (n > 0) {
        DWORD chunk = n > (1u << 30) ? (1u << 30) : (DWORD)n, w = 0;
        OVERLAPPED ov;
        memset(&ov, 0, sizeof ov);
        ov.Offset = (DWORD)off, ov.OffsetHigh = (DWORD)(off >> 32);
        if (!WriteFile(h, p, chunk, &w, &ov)) return os_fail();
        if (w == 0) return errno = EIO, ORK_E_IO;
        p += w, n -= w, off += w;
    }
    return ORK_OK;
}

ork_status ork_fd_truncate(int fd, uint64_t size) {
    if (size > (uint64_t)INT64_MAX) return errno = EINVAL, ORK_E_IO;
    int e = _chsize_s(fd, (__int64)size);
    if (e) return errno = e, ORK_E_IO;
    return ORK_OK;
}

ork_status ork_fd_sync(int fd) {
    HANDLE h = handle_of(fd);
    if (h == INVALID_HANDLE_VALUE) return errno = EBADF, ORK_E_IO;
    return FlushFileBuffers(h) ? ORK_OK : os_fail();
}

FILE *ork_fopen(const char *path, const char *mode) {
    wchar_t wm[16];
    size_t k = 0;
    int has_b = 0;
    for (const char *c = mode; *c; c++) {
        if (k + 3 > sizeof wm / sizeof wm[0]) return errno = EINVAL, NULL;
        if (*c == 'e') continue; /* POSIX's close-on-exec: Windows descriptors are not inherited here anyway */
        has_b |= *c == 'b';
        wm[k++] = (wchar_t)(unsigned char)*c;
    }
    if (!has_b) wm[k++] = L'b'; /* never text mode: files are the same bytes on both systems */
    wm[k] = 0;
    wchar_t *w = wpath(path);
    if (!w) return NULL;
    FILE *f = _wfopen(w, wm);
    free(w);
    return f;
}

FILE *ork_tmpfile(void) {
    wchar_t dir[MAX_PATH + 2], path[MAX_PATH + 16];
    DWORD k = GetTempPathW((DWORD)(sizeof dir / sizeof dir[0]), dir);
    if (k == 0 || k >= sizeof dir / sizeof dir[0]) return os_fail(), NULL;
    if (!GetTempFileNameW(dir, L"ork", 0, path)) return os_fail(), NULL;
    /* T: kept in memory when it can be; D: deleted when closed */
    FILE *f = _wfopen(path, L"w+bTD");
    if (!f) DeleteFileW(path);
    return f;
}

ork_status ork_fsync_file(FILE *f) {
    if (fflush(f) != 0) return ORK_E_IO;
    return ork_fd_sync(_fileno(f));
}

/* FILETIME (100 ns since 1601) to ns since 1970. */
static int64_t unix_ns(FILETIME ft) {
    uint64_t t = ((uint64_t)ft.dwHighDateTime << 32) | ft.dwLowDateTime;
    return ((int64_t)t - 116444736000000000LL) * 100;
}

static ork_status info_path(const char *path, int follow, ork_file_info *out) {
    wchar_t *w = wpath(path);
    if (!w) return ORK_E_IO;
    WIN32_FILE_ATTRIBUTE_DATA a;
    BOOL ok = GetFileAttributesExW(w, GetFileExInfoStandard, &a);
    DWORD e = GetLastError();
    if (ok && follow && (a.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT)) {
        /* a link: the attributes of what it names */
        HANDLE h = CreateFileW(w, 0, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL, OPEN_EXISTING,
                               FILE_FLAG_BACKUP_SEMANTICS, NULL);
        BY_HANDLE_FILE_INFORMATION bi;
        ok = h != INVALID_HANDLE_VALUE && GetFileInformationByHandle(h, &bi);
        e = GetLastError();
        if (h != INVALID_HANDLE_VALUE) CloseHandle(h);
        if (ok) {
            a.dwFileAttributes = bi.dwFileAttributes;
            a.nFileSizeHigh = bi.nFileSizeHigh, a.nFileSizeLow = bi.nFileSizeLow;
            a.ftLastWriteTime = bi.ftLastWriteTime;
        }
    }
    free(w);
    if (!ok) return errno = errno_of(e), ORK_E_IO;
    if (!follow && (a.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT)) out->kind = ORK_KIND_LINK;
    else out->kind = (a.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) ? ORK_KIND_DIR : ORK_KIND_FILE;
    out->size = out->kind == ORK_KIND_FILE ? ((uint64_t)a.nFileSizeHigh << 32) | a.nFileSizeLow : 0;
    out->mtime_ns = unix_ns(a.ftLastWriteTime);
    return ORK_OK;
}

ork_status ork_fd_info(int fd, ork_file_info *out) {
    HANDLE h = handle_of(fd);
    if (h == INVALID_HANDLE_VALUE) return errno = EBADF, ORK_E_IO;
    memset(out, 0, sizeof *out);
    switch (GetFileType(h)) {
    case FILE_TYPE_CHAR: out->kind = ORK_KIND_CHAR; return ORK_OK;
    case FILE_TYPE_PIPE: out->kind = ORK_KIND_FIFO; return ORK_OK;
    case FILE_TYPE_DISK: break;
    default: out->kind = ORK_KIND_OTHER; return ORK_OK;
    }
    BY_HANDLE_FILE_INFORMATION bi;
    if (!GetFileInformationByHandle(h, &bi)) return os_fail();
    out->kind = (bi.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) ? ORK_KIND_DIR : ORK_KIND_FILE;
    out->size = out->kind == ORK_KIND_FILE ? ((uint64_t)bi.nFileSizeHigh << 32) | bi.nFileSizeLow : 0;
    out->mtime_ns = unix_ns(bi.ftLastWriteTime);
    return ORK_OK;
}

ork_status ork_path_info(const char *path, ork_file_info *out) { return info_path(path, 1, out); }
ork_status ork_path_lstat(const char *path, ork_file_info *out) { return info_path(path, 0, out); }

int ork_path_exists(const char *path) {
    ork_file_info fi;
    return info_path(path, 0, &fi) == ORK_OK;
}

int ork_path_access(const char *path, int write) {
    wchar_t *w = wpath(path);
    int ok = w && _waccess(w, write ? 2 : 4) == 0;
    free(w);
    return ok;
}

ork_status ork_dir_sync(const char *dir) {
    (void)dir; /* MOVEFILE_WRITE_THROUGH makes the rename durable; NTFS has no folder fsync */
    return ORK_OK;
}

/* MoveFileExW refuses to replace a file that another process holds open
 * (the C runtime's and most programs' opens do not share delete access) or
 * maps: a reader of the checkpoint, a virus scanner or the search indexer
 * looking at the file for a moment. Those refusals (access denied, sharing or
 * lock violation) are retried for up to REPLACE_WAIT_MS, with waits of 1, 2,
 * 4 ... 64 ms; any other failure, or one that lasts, is returned. */
#define REPLACE_WAIT_MS 5000u
ork_status ork_path_replace(const char *from, const char *to) {
    wchar_t *a = wpath(from), *b = a ? wpath(to) : NULL;
    BOOL ok = FALSE;
    for (DWORD waited = 0, nap = 1; a && b; waited += nap, nap = nap < 64 ? nap * 2 : 64) {
        if ((ok = MoveFileExW(a, b, MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH))) break;
        DWORD e = GetLastError();
        if ((e != ERROR_ACCESS_DENIED && e != ERROR_SHARING_VIOLATION && e != ERROR_LOCK_VIOLATION) ||
            waited >= REPLACE_WAIT_MS)
            break;
        Sleep(nap);
        SetLastError(e);
    }
    ork_status s = ok ? ORK_OK : (a && b ? os_fail() : ORK_E_IO);
    free(a), free(b);
    return s;
}

#define W_CALL(path, call)                              \
    do {                                                \
        wchar_t *w_ = wpath(path);                       \
        if (!w_) return ORK_E_IO;                       \
        BOOL ok_ = call;                                \
        ork_status s_ = ok_ ? ORK_OK : os_fail();       \
        free(w_);                                       \
        return s_;                                      \
    } while (0)

ork_status ork_path_remove(const char *path) { W_CALL(path, DeleteFileW(w_)); }
ork_status ork_path_rmdir(const char *path) { W_CALL(path, RemoveDirectoryW(w_)); }
ork_status ork_mkdir(const char *path) { W_CALL(path, CreateDirectoryW(w_, NULL)); }

ork_status ork_mkdir_p(const char *path) {
    size_t n = strlen(path);
    if (n == 0) return errno = ENOENT, ORK_E_IO;
    char *p = malloc(n + 1);
    if (!p) return ORK_E_NOMEM;
    memcpy(p, path, n + 1);
    ork_status s = ORK_OK;
    for (size_t i = 1; i <= n && s == ORK_OK; i++) {
        if (p[i] != '/' && p[i] != '\\' && p[i] != '\0') continue;
        if (p[i - 1] == ':' || p[i - 1] == '/' || p[i - 1] == '\\') continue; /* "C:", "//server" */
        char c = p[i];
        p[i] = '\0';
        wchar_t *w = wpath(p);
        if (!w) s = ORK_E_IO;
        else if (!CreateDirectoryW(w, NULL)) {
            DWORD e = GetLastError();
            if (e != ERROR_ALREADY_EXISTS && e != ERROR_ACCESS_DENIED) errno = errno_of(e), s = ORK_E_IO;
        }
        free(w);
        p[i] = c;
    }
    free(p);
    ork_file_info fi;
    if (s == ORK_OK && ork_path_info(path, &fi) != ORK_OK) s = ORK_E_IO;
    else if (s == ORK_OK && fi.kind != ORK_KIND_DIR) errno = ENOTDIR, s = ORK_E_IO;
    return s;
}

ork_status ork_path_real(const char *path, char *buf, size_t n) {
    wchar_t *w = wide(path);
    if (!w) return ORK_E_IO;
    if (GetFileAttributesW(w) == INVALID_FILE_ATTRIBUTES) { /* realpath fails on a missing path too */
        free(w);
        return os_fail();
    }
    DWORD need = GetFullPathNameW(w, 0, NULL, NULL);
    wchar_t *full = need ? malloc((size_t)need * sizeof *full) : NULL;
    ork_status s = ORK_OK;
    if (!need) s = os_fail();
    else if (!full) errno = ENOMEM, s = ORK_E_NOMEM;
    else if (!GetFullPathNameW(w, need, full, NULL)) s = os_fail();
    else if (!narrow(full, buf, n)) s = ORK_E_IO;
    free(full), free(w);
    return s;
}

ork_status ork_exe_path(char *buf, size_t n) {
    static wchar_t w[32768];
    DWORD k = GetModuleFileNameW(NULL, w, (DWORD)(sizeof w / sizeof w[0]));
    if (k == 0 || k >= sizeof w / sizeof w[0]) return os_fail();
    return narrow(w, buf, n) ? ORK_OK : ORK_E_IO;
}

ork_status ork_temp_dir(char *buf, size_t n) {
    wchar_t w[MAX_PATH + 2];
    DWORD k = GetTempPathW((DWORD)(sizeof w / sizeof w[0]), w);
    if (k == 0 || k >= sizeof w / sizeof w[0]) return os_fail();
    while (k > 3 && (w[k - 1] == L'\\' || w[k - 1] == L'/')) w[--k] = 0;
    return narrow(w, buf, n) ? ORK_OK : ORK_E_IO;
}

struct ork_dir {
    HANDLE h;
    WIN32_FIND_DATAW fd;
    int have; /* fd holds an entry not yet returned */
    char name[MAX_PATH * 4];
};

ork_status ork_dir_open(const char *path, ork_dir **out) {
    *out = NULL;
    size_t n = strlen(path);
    char *pat = malloc(n + 3);
    if (!pat) return ORK_E_NOMEM;
    memcpy(pat, path, n);
    size_t k = n;
    if (k > 0 && pat[k - 1] != '/' && pat[k - 1] != '\\') pat[k++] = '\\';
    pat[k++] = '*';
    pat[k] = '\0';
    wchar_t *w = wpath(pat);
    free(pat);
    if (!w) return ORK_E_IO;
    ork_dir *d = calloc(1, sizeof *d);
    if (!d) {
        free(w);
        return ORK_E_NOMEM;
    }
    d->h = FindFirstFileW(w, &d->fd);
    free(w);
    if (d->h == INVALID_HANDLE_VALUE) {
        DWORD e = GetLastError();
        free(d);
        /* a file, not a folder: ERROR_DIRECTORY or ERROR_PATH_NOT_FOUND; the
         * latter also for a missing folder */
        ork_file_info fi;
        if (ork_path_info(path, &fi) == ORK_OK && fi.kind != ORK_KIND_DIR) return errno = ENOTDIR, ORK_E_IO;
        return errno = errno_of(e), ORK_E_IO;
    }
    d->have = 1;
    *out = d;
    return ORK_OK;
}

const char *ork_dir_next(ork_dir *d) {
    for (;;) {
        if (!d->have && !FindNextFileW(d->h, &d->fd)) return NULL;
        d->have = 0;
        const wchar_t *n = d->fd.cFileName;
        if (wcscmp(n, L".") == 0 || wcscmp(n, L"..") == 0) continue;
        if (!narrow(n, d->name, sizeof d->name)) continue;
        return d->name;
    }
}

void ork_dir_close(ork_dir *d) {
    if (!d) return;
    FindClose(d->h);
    free(d);
}

ork_status ork_map_fd(int fd, uint64_t size, const void **p) {
    *p = NULL;
    if (size == 0 || size > (uint64_t)SIZE_MAX) return errno = EINVAL, ORK_E_IO;
    HANDLE h = handle_of(fd);
    if (h == INVALID_HANDLE_VALUE) return errno = EBADF, ORK_E_IO;
    HANDLE m = CreateFileMappingW(h, NULL, PAGE_READONLY, (DWORD)(size >> 32), (DWORD)size, NULL);
    if (!m) return os_fail();
    void *v = MapViewOfFile(m, FILE_MAP_READ, 0, 0, (SIZE_T)size);
    ork_status s = v ? ORK_OK : os_fail();
    CloseHandle(m); /* the view keeps the mapping alive */
    *p = v;
    return s;
}

void ork_map_close(const void *p, uint64_t size) {
    (void)size;
    if (p) UnmapViewOfFile(p);
}

ork_status ork_map_prefetch(const void *p, size_t n) {
    if (n == 0) return ORK_OK;
    WIN32_MEMORY_RANGE_ENTRY r = {(PVOID)p, n};
    /* asynchronous (a hint): the caller's own reads then find the pages in */
    return PrefetchVirtualMemory(GetCurrentProcess(), 1, &r, 0) ? ORK_OK : ORK_E_UNSUPPORTED;
}

/* ---- memory ---------------------------------------------------------------------- */

void *ork_aligned_alloc(size_t align, size_t size) { return _aligned_malloc(size ? size : 1, align); }
void ork_aligned_free(void *p) { _aligned_free(p); }

/* ---- the machine and the process ------------------------------------------------ */

ork_status ork_mem_available(uint64_t *bytes) {
    MEMORYSTATUSEX m;
    m.dwLength = sizeof m;
    *bytes = 0;
    if (!GlobalMemoryStatusEx(&m)) return os_fail();
    *bytes = (uint64_t)m.ullAvailPhys;
    return ORK_OK;
}

ork_status ork_mem_total(uint64_t *bytes) {
    MEMORYSTATUSEX m;
    m.dwLength = sizeof m;
    *bytes = 0;
    if (!GlobalMemoryStatusEx(&m)) return os_fail();
    *bytes = (uint64_t)m.ullTotalPhys;
    return ORK_OK;
}

ork_status ork_peak_rss(uint64_t *bytes) {
    PROCESS_MEMORY_COUNTERS pmc;
    *bytes = 0;
    if (!GetProcessMemoryInfo(GetCurrentProcess(), &pmc, sizeof pmc)) return os_fail();
    *bytes = (uint64_t)pmc.PeakWorkingSetSize;
    return ORK_OK;
}

long ork_pid(void) { return (long)GetCurrentProcessId(); }

int ork_pid_alive(long pid) {
    if (pid <= 0) return 0;
    HANDLE h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, (DWORD)pid);
    if (!h) return GetLastError() == ERROR_ACCESS_DENIED; /* someone else's: it exists */
    DWORD code = 0;
    int alive = GetExitCodeProcess(h, &code) && code == STILL_ACTIVE;
    CloseHandle(h);
    return alive;
}

uint64_t ork_time_ns(void) {
    static LARGE_INTEGER freq; /* set once; a benign race writes the same value */
    if (freq.QuadPart == 0) QueryPerformanceFrequency(&freq);
    LARGE_INTEGER c;
    QueryPerformanceCounter(&c);
    uint64_t f = (uint64_t)freq.QuadPart, t = (uint64_t)c.QuadPart;
    return t / f * 1000000000u + t % f * 1000000000u / f;
}

uint64_t ork_process_cpu_ns(void) {
    FILETIME c, e, k, u;
    if (!GetProcessTimes(GetCurrentProcess(), &c, &e, &k, &u)) return 0;
    uint64_t kt = (uint64_t)k.dwHighDateTime << 32 | k.dwLowDateTime;
    uint64_t ut = (uint64_t)u.dwHighDateTime << 32 | u.dwLowDateTime;
    return (kt + ut) * 100u; /* 100 ns ticks */
}

void ork_sleep_us(uint32_t us) { Sleep(us / 1000); /* Sleep(0) yields */ }

/* getenv gives values in the ANSI code page; these are _wgetenv's in UTF-8,
 * kept for the life of the process (a value that changes gets a new copy, so a
 * pointer handed out stays valid; environments are small and rarely change). */
typedef struct env_val {
    struct env_val *next;
    char *name, *value;
} env_val;
static env_val *g_env;
static SRWLOCK g_env_lock = SRWLOCK_INIT;

const char *ork_env_get(const char *name) {
    wchar_t *wn = wide(name);
    const wchar_t *wv = wn ? _wgetenv(wn) : NULL;
    free(wn);
    if (!wv) return NULL;
    int need = WideCharToMultiByte(CP_UTF8, 0, wv, -1, NULL, 0, NULL, NULL);
    char *v = need > 0 ? malloc((size_t)need) : NULL;
    if (!v) return NULL;
    WideCharToMultiByte(CP_UTF8, 0, wv, -1, v, need, NULL, NULL);
    const char *out = NULL;
    AcquireSRWLockExclusive(&g_env_lock);
    for (env_val *e = g_env; e && !out; e = e->next)
        if (strcmp(e->name, name) == 0 && strcmp(e->value, v) == 0) out = e->value;
    env_val *e = out ? NULL : malloc(sizeof *e);
    if (e && (e->name = _strdup(name))) {
        e->value = v, v = NULL;
        e->next = g_env, g_env = e;
        out = e->value;
    } else if (e) {
        free(e);
    }
    ReleaseSRWLockExclusive(&g_env_lock);
    free(v);
    return out;
}

ork_status ork_env_set(const char *name, const char *value) {
    /* through the C runtime, so that getenv sees it (SetEnvironmentVariableW alone would not) */
    wchar_t *n = wide(name), *v = n ? wide(value ? value : "") : NULL;
    int e = n && v ? _wputenv_s(n, v) : EINVAL;
    free(n), free(v);
    if (e) return errno = e, ORK_E_IO;
    return ORK_OK;
}

size_t ork_page_size(void) {
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    return si.dwPageSize ? (size_t)si.dwPageSize : 4096;
}

int ork_cpu_count(void) {
    DWORD n = GetActiveProcessorCount(ALL_PROCESSOR_GROUPS);
    if (n == 0) {
        SYSTEM_INFO si;
        GetSystemInfo(&si);
        n = si.dwNumberOfProcessors;
    }
    return n > 0 ? (int)(n > 4096 ? 4096 : n) : 1;
}

int ork_isatty(FILE *f) { return f && _isatty(_fileno(f)); }

#ifndef ENABLE_VIRTUAL_TERMINAL_PROCESSING
#define ENABLE_VIRTUAL_TERMINAL_PROCESSING 0x0004
#endif

int ork_console_ansi(FILE *f) {
    if (!ork_isatty(f)) return 0;
    HANDLE h = (HANDLE)_get_osfhandle(_fileno(f));
    DWORD mode;
    if (h == INVALID_HANDLE_VALUE || !GetConsoleMode(h, &mode)) return 0; /* not a console (a mintty pipe) */
    if (mode & ENABLE_VIRTUAL_TERMINAL_PROCESSING) return 1;
    return SetConsoleMode(h, mode | ENABLE_VIRTUAL_TERMINAL_PROCESSING) != 0;
}

/* ---- child processes ------------------------------------------------------- */

struct ork_proc {
    HANDLE h;
    DWORD pid;
};

/* argv[i] quoted for the C runtime's command-line parser (what
 * CommandLineToArgvW and the CRT's startup do): bare when it has no blank and
 * no quote; else in quotes, a quote escaped by a backslash, the backslashes
 * before a quote or the closing quote doubled. Appends to b (cap bytes). */
static int quote_arg(const char *a, char *b, size_t cap, size_t *k) {
#define PUT(c) do { if (*k + 1 >= cap) return 0; b[(*k)++] = (c); } while (0)
    if (*a && !strpbrk(a, " \t\n\v\"")) {
        for (; *a; a++) PUT(*a);
        return 1;
    }
    PUT('"');
    for (;; a++) {
        size_t bs = 0;
        while (*a == '\\') a++, bs++;
        if (!*a) {
            for (size_t i = 0; i < 2 * bs; i++) PUT('\\');
            break;
        }
        if (*a == '"') {
            for (size_t i = 0; i < 2 * bs + 1; i++) PUT('\\');
        } else {
            for (size_t i = 0; i < bs; i++) PUT('\\');
        }
        PUT(*a);
    }
    PUT('"');
    return 1;
#undef PUT
}

/* An inheritable handle for the child's stdout/stderr: the file at path
 * (created or truncated) or a copy of ours (std: STD_OUTPUT_HANDLE, ...). */
static HANDLE child_handle(const char *path, DWORD std) {
    HANDLE h = INVALID_HANDLE_VALUE;
    if (path) {
        wchar_t *w = wpath(path);
        if (!w) return INVALID_HANDLE_VALUE;
        SECURITY_ATTRIBUTES sa = {sizeof sa, NULL, TRUE};
        h = CreateFileW(w, GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, &sa, CREATE_ALWAYS,
                        FILE_ATTRIBUTE_NORMAL, NULL);
        if (h == INVALID_HANDLE_VALUE) os_fail();
        free(w);
        return h;
    }
    HANDLE s = GetStdHandle(std);
    if (s && s != INVALID_HANDLE_VALUE &&
        !DuplicateHandle(GetCurrentProcess(), s, GetCurrentProcess(), &h, 0, TRUE, DUPLICATE_SAME_ACCESS))
        h = INVALID_HANDLE_VALUE;
    return h; /* INVALID_HANDLE_VALUE without a console: the child has none either */
}

ork_status ork_proc_spawn(const char *const *argv, const char *out_path, const char *err_path, ork_proc **out) {
    *out = NULL;
    if (!argv || !argv[0]) return errno = EINVAL, ORK_E_INVALID;
    size_t cap = 1;
    for (int i = 0; argv[i]; i++) cap += 2 * strlen(argv[i]) + 3;
    char *line = malloc(cap);
    if (!line) return ORK_E_NOMEM;
    size_t k = 0;
    for (int i = 0; argv[i]; i++) {
        if (i) line[k++] = ' ';
        quote_arg(argv[i], line, cap, &k); /* cap is the worst case: never short */
    }
    line[k] = '\0';
    wchar_t *wl = wide(line);
    free(line);
    if (!wl) return ORK_E_IO;
    ork_proc *p = calloc(1, sizeof *p);
    HANDLE ho = child_handle(out_path, STD_OUTPUT_HANDLE);
    HANDLE he = (out_path && ho == INVALID_HANDLE_VALUE) ? INVALID_HANDLE_VALUE : child_handle(err_path, STD_ERROR_HANDLE);
    ork_status s = ORK_OK;
    if (!p) s = ORK_E_NOMEM, errno = ENOMEM;
    else if ((out_path && ho == INVALID_HANDLE_VALUE) || (err_path && he == INVALID_HANDLE_VALUE)) s = ORK_E_IO;
    if (s == ORK_OK) {
        STARTUPINFOW si;
        memset(&si, 0, sizeof si);
        si.cb = sizeof si;
        si.dwFlags = STARTF_USESTDHANDLES;
        si.hStdInput = GetStdHandle(STD_INPUT_HANDLE);
        si.hStdOutput = ho;
        si.hStdError = he;
        PROCESS_INFORMATION pi;
        if (CreateProcessW(NULL, wl, NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi)) {
            CloseHandle(pi.hThread);
            p->h = pi.hProcess;
            p->pid = pi.dwProcessId;
        } else {
            s = os_fail();
        }
    }
    if (ho != INVALID_HANDLE_VALUE) CloseHandle(ho); /* the child holds its own copies */
    if (he != INVALID_HANDLE_VALUE) CloseHandle(he);
    free(wl);
    if (s != ORK_OK) {
        free(p);
        return s;
    }
    *out = p;
    return ORK_OK;
}

int ork_proc_wait(ork_proc *p, uint32_t ms, int *code) {
    DWORD r = WaitForSingleObject(p->h, ms == ORK_PROC_FOREVER ? INFINITE : (DWORD)ms);
    if (r != WAIT_OBJECT_0) return 0;
    DWORD c = 0;
    if (code) *code = GetExitCodeProcess(p->h, &c) ? (int)c : -1;
    return 1;
}

void ork_proc_kill(ork_proc *p) {
    if (p) TerminateProcess(p->h, 137);
}

long ork_proc_pid(const ork_proc *p) { return (long)p->pid; }

void ork_proc_free(ork_proc *p) {
    if (!p) return;
    if (WaitForSingleObject(p->h, 0) != WAIT_OBJECT_0) {
        TerminateProcess(p->h, 137);
        WaitForSingleObject(p->h, INFINITE);
    }
    CloseHandle(p->h);
    free(p);
}
