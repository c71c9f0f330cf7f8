/* flux_source.c — where a FLUX checkpoint comes from: model.name_or_path as
 *  - a .safetensors file or a *.safetensors.index.json (used as given);
 *  - a diffusers folder: <dir>/transformer/diffusion_pytorch_model*.safetensors
 *    [.index.json], or that transformer/ folder itself;
 *  - a folder holding one BFL file (flux1-dev.safetensors; ae*.safetensors
 *    and vae*.safetensors are not candidates);
 *  - a Hugging Face repo id "org/name" found in the local cache
 *    ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub):
 *    models--org--name/snapshots/<refs/main>/, then as a folder above.
 *    Nothing is ever downloaded.
 * Files and folders through the host service orakul.platform/1 (no OS header:
 * the same code on Linux and Windows). Owns nothing. */
#include "flux.h"

#include <orakul/platform.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_dir(const ork_platform_api *pl, const char *p) {
    ork_file_info fi;
    return pl->path_info(p, &fi) == ORK_OK && fi.kind == ORK_KIND_DIR;
}

/* s starts with the ASCII prefix pre, case ignored (strncasecmp is POSIX) */
static int starts_ci(const char *s, const char *pre) {
    for (; *pre; s++, pre++)
        if (tolower((unsigned char)*s) != tolower((unsigned char)*pre)) return 0;
    return 1;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* dir holds diffusion_pytorch_model*.safetensors or its index */
static int has_diffusers_weights(const ork_platform_api *pl, const char *dir) {
    ork_dir *d;
    if (pl->dir_open(dir, &d) != ORK_OK) return 0;
    int found = 0;
    for (const char *nm; !found && (nm = pl->dir_next(d));)
        found = strncmp(nm, "diffusion_pytorch_model", 23) == 0 &&
                (ends_with(nm, ".safetensors") || ends_with(nm, ".safetensors.index.json"));
    pl->dir_close(d);
    return found;
}

static ork_status resolve_dir(flux_model *f, const ork_platform_api *pl, const char *dir, const char *shown, char *out,
                              size_t n) {
    char sub[1200];
    snprintf(sub, sizeof sub, "%s/transformer", dir);
    if (is_dir(pl, sub)) {
        if (!has_diffusers_weights(pl, sub)) {
            FLUX_LOG(f, ORK_LEVEL_ERROR, "%s: no diffusion_pytorch_model*.safetensors in the transformer/ folder", shown);
            return ORK_E_IO;
        }
        snprintf(out, n, "%s", sub);
        return ORK_OK;
    }
    if (has_diffusers_weights(pl, dir)) {
        snprintf(out, n, "%s", dir);
        return ORK_OK;
    }
    /* a single BFL file; with several, the one named flux* */
    ork_dir *d;
    if (pl->dir_open(dir, &d) != ORK_OK) {
        FLUX_LOG(f, ORK_LEVEL_ERROR, "%s: cannot open the folder", shown);
        return ORK_E_IO;
    }
    char first[256] = "", flux[256] = "";
    int count = 0, nflux = 0;
    for (const char *nm; (nm = pl->dir_next(d));) {
        if (!ends_with(nm, ".safetensors") || starts_ci(nm, "ae") || starts_ci(nm, "vae")) continue;
        if (count++ == 0) snprintf(first, sizeof first, "%s", nm);
        if (starts_ci(nm, "flux") && nflux++ == 0) snprintf(flux, sizeof flux, "%s", nm);
    }
    pl->dir_close(d);
    const char *pick = count == 1 ? first : nflux == 1 ? flux : NULL;
    if (!pick) {
        if (count == 0)
            FLUX_LOG(f, ORK_LEVEL_ERROR, "%s: neither a diffusers folder (transformer/diffusion_pytorch_model*.safetensors) "
                     "nor a folder with a FLUX .safetensors file", shown);
        else
            FLUX_LOG(f, ORK_LEVEL_ERROR, "%s: %d .safetensors files and no single flux*.safetensors among them; "
                     "name the file in model.name_or_path", shown, count);
        return ORK_E_IO;
    }
    snprintf(out, n, "%s/%s", dir, pick);
    return ORK_OK;
}

/* "org/name" with [A-Za-z0-9._-] parts */
static int is_repo_id(const char *s) {
    const char *slash = strchr(s, '/');
    if (!slash || slash == s || !slash[1] || strchr(slash + 1, '/') || s[0] == '.') return 0;
    for (const char *p = s; *p; p++)
        if (p != slash && !isalnum((unsigned char)*p) && *p != '.' && *p != '_' && *p != '-') return 0;
    return !ends_with(s, ".safetensors") && !ends_with(s, ".json");
}

static ork_status resolve_hub(flux_model *f, const ork_platform_api *pl, const char *id, char *out, size_t n) {
    char root[1024], repo[1400], snap[2048], ref[1500];
    const char *from;
    const char *e = getenv("HF_HUB_CACHE");
    if (e && e[0]) {
        snprintf(root, sizeof root, "%s", e);
        from = "HF_HUB_CACHE";
    } else if ((e = getenv("HF_HOME")) && e[0]) {
        snprintf(root, sizeof root, "%s/hub", e);
        from = "HF_HOME/hub";
    } else {
        e = getenv("HOME");
        if (!e || !e[0]) e = getenv("USERPROFILE"); /* Windows: %USERPROFILE%\.cache\huggingface\hub */
        snprintf(root, sizeof root, "%s/.cache/huggingface/hub", e && e[0] ? e : ".");
        from = "the default cache";
    }
    const char *slash = strchr(id, '/');
    snprintf(repo, sizeof repo, "%s/models--%.*s--%s", root, (int)(slash - id), id, slash + 1);
    snap[0] = 0;
    snprintf(ref, sizeof ref, "%s/refs/main", repo);
    /* ORK_F_NONBLOCK + fd_info: a FIFO or device there is refused before reading */
    int fd = -1;
    ork_file_info rs;
    if (pl->fd_open(ref, ORK_F_READ | ORK_F_NONBLOCK, &fd) != ORK_OK) fd = -1;
    if (fd >= 0 && (pl->fd_info(fd, &rs) != ORK_OK || rs.kind != ORK_KIND_FILE)) {
        pl->fd_close(fd);
        FLUX_LOG(f, ORK_LEVEL_ERROR, "%s: not a regular file (the Hugging Face cache's revision of %s)", ref, id);
        return ORK_E_IO;
    }
    if (fd >= 0) {
        char rev[128] = ""; /* a commit hash: the first line, at most 127 bytes */
        size_t got = 0;
        if (pl->fd_pread(fd, rev, sizeof rev - 1, 0, &got) != ORK_OK) got = 0;
        pl->fd_close(fd);
        size_t l = got;
        rev[l] = 0;
        l = strcspn(rev, "\n");
        rev[l] = 0;
        while (l && isspace((unsigned char)rev[l - 1])) rev[--l] = 0;
        if (l) snprintf(snap, sizeof snap, "%s/snapshots/%s", repo, rev);
    } else {
        /* no refs/main: accept the only snapshot */
        char sd[1500];
        snprintf(sd, sizeof sd, "%s/snapshots", repo);
        ork_dir *d = NULL;
        if (pl->dir_open(sd, &d) != ORK_OK) d = NULL;
        int k = 0;
        for (const char *nm; d && (nm = pl->dir_next(d));) {
            if (nm[0] == '.') continue;
            if (k++ == 0) snprintf(snap, sizeof snap, "%s/%s", sd, nm);
        }
        if (d) pl->dir_close(d);
        if (k != 1) snap[0] = 0;
    }
    if (!snap[0] || !is_dir(pl, snap)) {
        FLUX_LOG(f, ORK_LEVEL_ERROR, "model.name_or_path '%s': not a file or folder, and not in the Hugging Face cache "
                 "(looked for %s/snapshots/<refs/main>, cache from %s); nothing is downloaded: download it first or "
                 "give a path", id, repo, from);
        return ORK_E_IO;
    }
    char shown[3600];
    snprintf(shown, sizeof shown, "%s (%s)", id, snap);
    return resolve_dir(f, pl, snap, shown, out, n);
}

ork_status flux_resolve_source(flux_model *f, const char *name_or_path, char *out, size_t n) {
    const ork_platform_api *pl = f->host->get_service ? f->host->get_service(f->host, ORK_SERVICE_PLATFORM) : NULL;
    if (!pl) {
        FLUX_LOG(f, ORK_LEVEL_ERROR, "this core offers no %s service (files and folders): upgrade orakul",
                 ORK_SERVICE_PLATFORM);
        return ORK_E_UNSUPPORTED;
    }
    ork_file_info sb;
    if (!name_or_path || !name_or_path[0]) {
        FLUX_LOG(f, ORK_LEVEL_ERROR, "model.name_or_path is empty (a .safetensors file, a diffusers folder, a Hugging "
                 "Face repo id or preset:<name>)");
        return ORK_E_CONFIG;
    }
    if (pl->path_info(name_or_path, &sb) == ORK_OK) {
        if (sb.kind == ORK_KIND_DIR) return resolve_dir(f, pl, name_or_path, name_or_path, out, n);
        snprintf(out, n, "%s", name_or_path);
        return ORK_OK;
    }
    if (is_repo_id(name_or_path)) return resolve_hub(f, pl, name_or_path, out, n);
    FLUX_LOG(f, ORK_LEVEL_ERROR, "%s: no such file or folder (model.name_or_path: a .safetensors file, a diffusers "
             "folder, a Hugging Face repo id org/name in the local cache, or preset:<name>)", name_or_path);
    return ORK_E_IO;
}
