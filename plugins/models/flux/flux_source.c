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
 * Owns nothing. */
#include "flux.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static int is_dir(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* dir holds diffusion_pytorch_model*.safetensors or its index */
static int has_diffusers_weights(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int found = 0;
    struct dirent *de;
    while (!found && (de = readdir(d)))
        found = strncmp(de->d_name, "diffusion_pytorch_model", 23) == 0 &&
                (ends_with(de->d_name, ".safetensors") || ends_with(de->d_name, ".safetensors.index.json"));
    closedir(d);
    return found;
}

static ork_status resolve_dir(flux_model *f, const char *dir, const char *shown, char *out, size_t n) {
    char sub[1200];
    snprintf(sub, sizeof sub, "%s/transformer", dir);
    if (is_dir(sub)) {
        if (!has_diffusers_weights(sub)) {
            FLUX_LOG(f, ORK_LEVEL_ERROR, "%s: no diffusion_pytorch_model*.safetensors in the transformer/ folder", shown);
            return ORK_E_IO;
        }
        snprintf(out, n, "%s", sub);
        return ORK_OK;
    }
    if (has_diffusers_weights(dir)) {
        snprintf(out, n, "%s", dir);
        return ORK_OK;
    }
    /* a single BFL file; with several, the one named flux* */
    DIR *d = opendir(dir);
    if (!d) {
        FLUX_LOG(f, ORK_LEVEL_ERROR, "%s: cannot open the folder", shown);
        return ORK_E_IO;
    }
    char first[256] = "", flux[256] = "";
    int count = 0, nflux = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *nm = de->d_name;
        if (!ends_with(nm, ".safetensors") || !strncasecmp(nm, "ae", 2) || !strncasecmp(nm, "vae", 3)) continue;
        if (count++ == 0) snprintf(first, sizeof first, "%s", nm);
        if (!strncasecmp(nm, "flux", 4) && nflux++ == 0) snprintf(flux, sizeof flux, "%s", nm);
    }
    closedir(d);
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

static ork_status resolve_hub(flux_model *f, const char *id, char *out, size_t n) {
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
        snprintf(root, sizeof root, "%s/.cache/huggingface/hub", e && e[0] ? e : ".");
        from = "the default cache";
    }
    const char *slash = strchr(id, '/');
    snprintf(repo, sizeof repo, "%s/models--%.*s--%s", root, (int)(slash - id), id, slash + 1);
    snap[0] = 0;
    snprintf(ref, sizeof ref, "%s/refs/main", repo);
    /* O_NONBLOCK + fstat: a FIFO or device there is refused before reading */
    int fd = open(ref, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    struct stat rs;
    if (fd >= 0 && (fstat(fd, &rs) != 0 || !S_ISREG(rs.st_mode))) {
        close(fd);
        FLUX_LOG(f, ORK_LEVEL_ERROR, "%s: not a regular file (the Hugging Face cache's revision of %s)", ref, id);
        return ORK_E_IO;
    }
    if (fd >= 0) {
        char rev[128] = ""; /* a commit hash: the first line, at most 127 bytes */
        ssize_t got = read(fd, rev, sizeof rev - 1);
        close(fd);
        size_t l = got > 0 ? (size_t)got : 0;
        rev[l] = 0;
        l = strcspn(rev, "\n");
        rev[l] = 0;
        while (l && isspace((unsigned char)rev[l - 1])) rev[--l] = 0;
        if (l) snprintf(snap, sizeof snap, "%s/snapshots/%s", repo, rev);
    } else {
        /* no refs/main: accept the only snapshot */
        char sd[1500];
        snprintf(sd, sizeof sd, "%s/snapshots", repo);
        DIR *d = opendir(sd);
        int k = 0;
        struct dirent *de;
        while (d && (de = readdir(d))) {
            if (de->d_name[0] == '.') continue;
            if (k++ == 0) snprintf(snap, sizeof snap, "%s/%s", sd, de->d_name);
        }
        if (d) closedir(d);
        if (k != 1) snap[0] = 0;
    }
    if (!snap[0] || !is_dir(snap)) {
        FLUX_LOG(f, ORK_LEVEL_ERROR, "model.name_or_path '%s': not a file or folder, and not in the Hugging Face cache "
                 "(looked for %s/snapshots/<refs/main>, cache from %s); nothing is downloaded: download it first or "
                 "give a path", id, repo, from);
        return ORK_E_IO;
    }
    char shown[3600];
    snprintf(shown, sizeof shown, "%s (%s)", id, snap);
    return resolve_dir(f, snap, shown, out, n);
}

ork_status flux_resolve_source(flux_model *f, const char *name_or_path, char *out, size_t n) {
    struct stat sb;
    if (!name_or_path || !name_or_path[0]) {
        FLUX_LOG(f, ORK_LEVEL_ERROR, "model.name_or_path is empty (a .safetensors file, a diffusers folder, a Hugging "
                 "Face repo id or preset:<name>)");
        return ORK_E_CONFIG;
    }
    if (stat(name_or_path, &sb) == 0) {
        if (S_ISDIR(sb.st_mode)) return resolve_dir(f, name_or_path, name_or_path, out, n);
        snprintf(out, n, "%s", name_or_path);
        return ORK_OK;
    }
    if (is_repo_id(name_or_path)) return resolve_hub(f, name_or_path, out, n);
    FLUX_LOG(f, ORK_LEVEL_ERROR, "%s: no such file or folder (model.name_or_path: a .safetensors file, a diffusers "
             "folder, a Hugging Face repo id org/name in the local cache, or preset:<name>)", name_or_path);
    return ORK_E_IO;
}
