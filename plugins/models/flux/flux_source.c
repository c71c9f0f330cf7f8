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
#define ORK_HF_HUB_ONLY /* the repo-id resolution alone: no jansson */
#include <orakul/hf_checkpoint.h>

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

/* A repo id in the local Hugging Face cache (sdk/include/orakul/hf_checkpoint.h
 * finds the snapshot and logs the one line when it is absent), then as a folder. */
static ork_status resolve_hub(flux_model *f, const ork_platform_api *pl, const char *id, char *out, size_t n) {
    char snap[2048], shown[2200];
    ork_status s = ork_hf_hub_snapshot(f->host, pl, "model.name_or_path", id, snap, sizeof snap);
    if (s != ORK_OK) return s;
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
    if (ork_hf_is_repo_id(name_or_path)) return resolve_hub(f, pl, name_or_path, out, n);
    FLUX_LOG(f, ORK_LEVEL_ERROR, "%s: no such file or folder (model.name_or_path: a .safetensors file, a diffusers "
             "folder, a Hugging Face repo id org/name in the local cache, or preset:<name>)", name_or_path);
    return ORK_E_IO;
}
