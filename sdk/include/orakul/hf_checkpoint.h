/* orakul/hf_checkpoint.h — a Hugging Face checkpoint as plugins find it:
 * the services a component's create() takes, and where its weights and
 * config.json lie (a .safetensors file, a *.safetensors.index.json with its
 * shards, a transformers save_pretrained folder, or a diffusers pipeline
 * folder holding the component's subfolder: text_encoder/, transformer/ ...).
 * Header-only (static inline): a plugin that includes it links jansson
 * (config.json is parsed with it) and needs nothing else of the core than
 * the services. Not part of <orakul/orakul.h> for that reason.
 *
 * Why a header and not a host service: what is shared is a few lines of
 * path logic and config reading on top of two services the core already has
 * (orakul.safetensors/1 validates the index and the shards: a bad index, a
 * missing shard or a shard name outside the folder is refused there with
 * one line; orakul.platform/1 says what a path is); a new service would
 * freeze that logic into the ABI for no gain, and a header keeps the plugins
 * buildable from the SDK alone.
 *
 * Usage (a text encoder's create() and open(); a model for transformer/):
 *
 *   ork_hf_services sv;
 *   ORK_TRY(ork_hf_services_get(host, ORK_HF_NEED_TEXT_OPS, &sv));  // in create()
 *   ork_hf_checkpoint ck;
 *   ORK_TRY(ork_hf_checkpoint_open(&sv, name_or_path, "text_encoder", &ck));
 *   int layers = ork_hf_config_int(ck.text_config, "num_hidden_layers", 0);
 *   sv.st->find(ck.src, "model.embed_tokens.weight", &info);
 *   ...
 *   ork_hf_checkpoint_close(&sv, &ck);  // in destroy(); safe on a zeroed or failed one
 *
 * Every failure logs one line through host->log naming the path. [control-thread]
 *
 * It also holds the one resolution of a Hugging Face repo id to its folder
 * in the local cache (ork_hf_is_repo_id, ork_hf_hub_snapshot), which the
 * model plugins use: that part needs only orakul.platform/1. A plugin that
 * wants it alone, without jansson, defines ORK_HF_HUB_ONLY before including. */
#ifndef ORAKUL_HF_CHECKPOINT_H
#define ORAKUL_HF_CHECKPOINT_H

#include <orakul/abi.h>
#include <orakul/ops.h>
#include <orakul/platform.h>
#include <orakul/plugin.h>
#include <orakul/safetensors.h>
#include <orakul/tensor.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- a repo id in the local Hugging Face cache ---------------------------------- */

/* "org/name" with [A-Za-z0-9._-] parts, neither starting with '.', and not a
 * file name (*.safetensors, *.json): 1, else 0. */
static inline int ork_hf_is_repo_id(const char *s) {
    const char *slash = s ? strchr(s, '/') : NULL;
    if (!slash || slash == s || !slash[1] || strchr(slash + 1, '/') || s[0] == '.' || slash[1] == '.') return 0;
    for (const char *p = s; *p; p++)
        if (p != slash && !isalnum((unsigned char)*p) && *p != '.' && *p != '_' && *p != '-') return 0;
    size_t l = strlen(s);
    return !(l >= 12 && !strcmp(s + l - 12, ".safetensors")) && !(l >= 5 && !strcmp(s + l - 5, ".json"));
}

/* The cache's root: $HF_HUB_CACHE, else $HF_HOME/hub, else
 * $HOME/.cache/huggingface/hub (%USERPROFILE% where HOME is unset: Windows).
 * *from (when not NULL) names which, for error lines. */
static inline void ork_hf_hub_root(char *out, size_t n, const char **from) {
    const char *e = getenv("HF_HUB_CACHE"), *src;
    if (e && e[0]) {
        snprintf(out, n, "%s", e);
        src = "HF_HUB_CACHE";
    } else if ((e = getenv("HF_HOME")) && e[0]) {
        snprintf(out, n, "%s/hub", e);
        src = "HF_HOME/hub";
    } else {
        e = getenv("HOME");
        if (!e || !e[0]) e = getenv("USERPROFILE");
        snprintf(out, n, "%s/.cache/huggingface/hub", e && e[0] ? e : ".");
        src = "the default cache (~/.cache/huggingface/hub)";
    }
    if (from) *from = src;
}

/* The snapshot folder of repo id (ork_hf_is_repo_id) in the local cache:
 * <root>/models--org--name/snapshots/<the first line of refs/main>, or, with
 * no refs/main, the only snapshot there. Nothing is downloaded. A refs/main
 * that is not a regular file (a FIFO is refused before reading), a revision
 * holding a path separator or starting with '.', no such snapshot folder:
 * ORK_E_IO and one line through h->log that names `field` (the config field
 * that gave id, e.g. "model.name_or_path"), the folder looked in and which
 * variable chose the cache. */
static inline ork_status ork_hf_hub_snapshot(const ork_host *h, const ork_platform_api *pf, const char *field,
                                             const char *id, char *out, size_t n) {
    char root[1024], repo[1400], ref[1500], rev[128] = "";
    const char *from, *slash = id ? strchr(id, '/') : NULL;
    ork_file_info fi;
    if (!slash || !ork_hf_is_repo_id(id)) {
        h->log(h, ORK_LEVEL_ERROR, "%s '%s': not a Hugging Face repo id (org/name)", field, id ? id : "");
        return ORK_E_CONFIG;
    }
    ork_hf_hub_root(root, sizeof root, &from);
    snprintf(repo, sizeof repo, "%.1023s/models--%.*s--%s", root, (int)(slash - id), id, slash + 1);
    snprintf(ref, sizeof ref, "%s/refs/main", repo);
    out[0] = 0;
    int fd = -1, have_ref = pf->fd_open(ref, ORK_F_READ | ORK_F_NONBLOCK, &fd) == ORK_OK;
    if (!have_ref && pf->path_info(ref, &fi) == ORK_OK) { /* there but not openable: a folder on Windows */
        h->log(h, ORK_LEVEL_ERROR, "%s: not a regular file (the Hugging Face cache's revision of %s)", ref, id);
        return ORK_E_IO;
    }
    if (have_ref) {
        size_t got = 0;
        ork_status s = pf->fd_info(fd, &fi);
        if (s != ORK_OK || fi.kind != ORK_KIND_FILE) {
            pf->fd_close(fd);
            h->log(h, ORK_LEVEL_ERROR, "%s: not a regular file (the Hugging Face cache's revision of %s)", ref, id);
            return ORK_E_IO;
        }
        if (pf->fd_pread(fd, rev, sizeof rev - 1, 0, &got) != ORK_OK) got = 0;
        pf->fd_close(fd);
        rev[got] = 0;
        size_t l = strcspn(rev, "\r\n");
        rev[l] = 0;
        while (l && isspace((unsigned char)rev[l - 1])) rev[--l] = 0;
        if (l && rev[0] != '.' && !strpbrk(rev, "/\\")) snprintf(out, n, "%s/snapshots/%s", repo, rev);
    } else { /* no refs/main: the only snapshot */
        char sd[1520];
        snprintf(sd, sizeof sd, "%s/snapshots", repo);
        ork_dir *d = NULL;
        int k = 0;
        if (pf->dir_open(sd, &d) == ORK_OK) {
            for (const char *nm; (nm = pf->dir_next(d));)
                if (nm[0] != '.' && k++ == 0) snprintf(out, n, "%s/%s", sd, nm);
            pf->dir_close(d);
        }
        if (k != 1) out[0] = 0;
    }
    if (!out[0] || pf->path_info(out, &fi) != ORK_OK || fi.kind != ORK_KIND_DIR) {
        h->log(h, ORK_LEVEL_ERROR, "%s '%s': not a file or folder, and not in the Hugging Face cache (looked for "
               "%s/snapshots/%s, cache from %s); nothing is downloaded: download it first or give a path", field, id,
               repo, have_ref && rev[0] ? rev : "<refs/main>", from);
        out[0] = 0;
        return ORK_E_IO;
    }
    return ORK_OK;
}

#ifndef ORK_HF_HUB_ONLY
#include <jansson.h>

/* The services a weight-reading component uses. */
typedef struct ork_hf_services {
    const ork_host *host;
    const ork_ops *ops;               /* the ops service */
    const ork_tensor_api *ta;         /* the tensor service */
    const ork_safetensors_api *st;    /* the checkpoint reader */
    const ork_platform_api *pf;       /* files and folders */
} ork_hf_services;

#define ORK_HF_NEED_TEXT_OPS 1u /* the ops table must hold the text-encoder ops (ABI 1.3) */

/* Every service from host; ORK_E_ABI with one line ("upgrade orakul") when the
 * core lacks one (or, with ORK_HF_NEED_TEXT_OPS, the text-encoder ops). */
static inline ork_status ork_hf_services_get(const ork_host *host, uint32_t need, ork_hf_services *out) {
    memset(out, 0, sizeof *out);
    if (!host) return ORK_E_INVALID;
    out->host = host;
    out->ops = (const ork_ops *)host->get_service(host, ORK_SERVICE_OPS);
    out->ta = (const ork_tensor_api *)host->get_service(host, ORK_SERVICE_TENSOR);
    out->st = (const ork_safetensors_api *)host->get_service(host, ORK_SERVICE_SAFETENSORS);
    out->pf = (const ork_platform_api *)host->get_service(host, ORK_SERVICE_PLATFORM);
    int text_ok = !(need & ORK_HF_NEED_TEXT_OPS) || (out->ops && ork_ops_has_text(out->ops));
    if (!out->ops || !out->ta || !out->st || !out->pf || !text_ok) {
        host->log(host, ORK_LEVEL_ERROR, "the core lacks %s%s, %s, %s or %s: upgrade orakul", ORK_SERVICE_OPS,
                  (need & ORK_HF_NEED_TEXT_OPS) ? " with the text-encoder ops (ABI 1.3)" : "", ORK_SERVICE_TENSOR,
                  ORK_SERVICE_SAFETENSORS, ORK_SERVICE_PLATFORM);
        return ORK_E_ABI;
    }
    return ORK_OK;
}

typedef struct ork_hf_checkpoint {
    char path[1024];        /* what was opened: the file, the index json, or the folder */
    char dir[1024];         /* the folder holding it, where config.json is looked for */
    ork_st_set *src;        /* the open tensors (orakul.safetensors/1) */
    json_t *config;         /* config.json as read, or NULL when the folder has none */
    const json_t *text_config; /* config's "text_config" object when it has one (Mistral3,
                                * CLIPConfig), else config; NULL without a config. Borrowed */
} ork_hf_checkpoint;

/* What path names: 1 a regular file, 2 a folder, 0 nothing readable. */
static inline int ork_hf_path_kind(const ork_hf_services *sv, const char *path) {
    ork_file_info fi;
    if (!path || !*path || sv->pf->path_info(path, &fi) != ORK_OK) return 0;
    return fi.kind == ORK_KIND_FILE ? 1 : fi.kind == ORK_KIND_DIR ? 2 : 0;
}

static inline void ork_hf_checkpoint_close(const ork_hf_services *sv, ork_hf_checkpoint *ck) {
    if (!ck) return;
    if (ck->src && sv && sv->st) sv->st->close(ck->src);
    json_decref(ck->config);
    memset(ck, 0, sizeof *ck);
}

/* Open name_or_path: a .safetensors file or a *.safetensors.index.json (config.json
 * read beside it), or a folder holding one (or shards with their index); when
 * the folder holds subfolder/ (a diffusers pipeline folder: "text_encoder",
 * "transformer"; NULL: none tried) that subfolder is opened instead. config.json,
 * when present, must be a JSON object. On failure ck is left closed. */
static inline ork_status ork_hf_checkpoint_open(const ork_hf_services *sv, const char *name_or_path,
                                                const char *subfolder, ork_hf_checkpoint *ck) {
    const ork_host *h = sv->host;
    memset(ck, 0, sizeof *ck);
    if (!name_or_path || !*name_or_path) {
        h->log(h, ORK_LEVEL_ERROR, "no weights given (a .safetensors file, an index json or a folder)");
        return ORK_E_CONFIG;
    }
    if (strlen(name_or_path) >= 900) {
        h->log(h, ORK_LEVEL_ERROR, "%.80s...: path longer than 900 bytes", name_or_path);
        return ORK_E_CONFIG;
    }
    int kind = ork_hf_path_kind(sv, name_or_path);
    snprintf(ck->path, sizeof ck->path, "%s", name_or_path);
    if (kind == 2) {
        if (subfolder && *subfolder) {
            char sub[1024];
            snprintf(sub, sizeof sub, "%.900s/%.100s", name_or_path, subfolder);
            if (ork_hf_path_kind(sv, sub) == 2) snprintf(ck->path, sizeof ck->path, "%s", sub);
        }
        snprintf(ck->dir, sizeof ck->dir, "%s", ck->path);
    } else if (kind == 1) {
        snprintf(ck->dir, sizeof ck->dir, "%s", name_or_path);
        char *slash = strrchr(ck->dir, '/');
#ifdef _WIN32
        char *bs = strrchr(ck->dir, '\\');
        if (bs && (!slash || bs > slash)) slash = bs;
#endif
        if (slash) *slash = 0;
        else snprintf(ck->dir, sizeof ck->dir, ".");
    } else {
        h->log(h, ORK_LEVEL_ERROR, "%s: no such file or folder", name_or_path);
        return ORK_E_IO;
    }
    ork_status s = sv->st->open(ck->path, &ck->src); /* logs its own line */
    if (s != ORK_OK) {
        ck->src = NULL;
        ork_hf_checkpoint_close(sv, ck);
        return s;
    }
    char cfg[1100];
    snprintf(cfg, sizeof cfg, "%s/config.json", ck->dir);
    if (ork_hf_path_kind(sv, cfg) != 1) return ORK_OK;
    json_error_t err;
    json_t *j = json_load_file(cfg, 0, &err);
    if (!j || !json_is_object(j)) {
        if (j) h->log(h, ORK_LEVEL_ERROR, "%s: not a JSON object", cfg);
        else h->log(h, ORK_LEVEL_ERROR, "%s:%d: not JSON (%s)", cfg, err.line, err.text);
        json_decref(j);
        ork_hf_checkpoint_close(sv, ck);
        return ORK_E_FORMAT;
    }
    ck->config = j;
    json_t *tc = json_object_get(j, "text_config");
    ck->text_config = json_is_object(tc) ? tc : j;
    return ORK_OK;
}

/* A config value (obj: config or text_config; NULL reads as empty): the
 * number / integer / string under key, else dflt ("" for strings). */
static inline double ork_hf_config_num(const json_t *obj, const char *key, double dflt) {
    json_t *v = obj ? json_object_get(obj, key) : NULL;
    return json_is_number(v) ? json_number_value(v) : dflt;
}
static inline int ork_hf_config_int(const json_t *obj, const char *key, int dflt) {
    return (int)ork_hf_config_num(obj, key, dflt);
}
static inline const char *ork_hf_config_str(const json_t *obj, const char *key) {
    json_t *v = obj ? json_object_get(obj, key) : NULL;
    return json_is_string(v) ? json_string_value(v) : "";
}

#endif /* ORK_HF_HUB_ONLY */

#ifdef __cplusplus
}
#endif
#endif /* ORAKUL_HF_CHECKPOINT_H */
