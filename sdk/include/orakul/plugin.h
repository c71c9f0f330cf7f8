/* orakul/plugin.h — the plugin ABI: the one exported entry symbol, the host
 * table plugins receive, components and their declared config keys.
 *
 * A plugin is a shared object `orakul-<name>.so` (`orakul-<name>.dll` on
 * Windows) built with hidden visibility that exports exactly one symbol:
 *
 *     ORK_EXPORT const ork_plugin_entry *orakul_plugin_entry(void);
 *
 * It returns a pointer to a static const table owned by the plugin, valid
 * until dlclose. Plugins never link the core: every host service arrives
 * through ork_host (get_service by string id with a revision), so one plugin
 * binary works with every 1.x core.
 *
 * Every struct here starts with ork_abi filled by ORK_ABI_INIT(T). Growth
 * rule: append fields, bump ORK_ABI_MINOR. The core copies each struct into a
 * zero-filled one of its own size, so appended fields read as NULL/0 for
 * plugins built against an older minor.
 *
 * Thread tags: [control-thread] = the core's main thread; [stream-ordered] =
 * only enqueues on the stream it is given, never synchronises the device. */
#ifndef ORAKUL_PLUGIN_H
#define ORAKUL_PLUGIN_H

#include <orakul/abi.h>   /* ork_abi, ork_status, ORK_EXPORT */
#include <orakul/dtype.h> /* ork_dtype, ork_device */

#ifdef __cplusplus
extern "C" {
#endif

#define ORK_ENTRY_SYMBOL "orakul_plugin_entry"

typedef enum ork_log_level_abi {
    ORK_LEVEL_DEBUG = 0,
    ORK_LEVEL_INFO = 1,
    ORK_LEVEL_WARN = 2,
    ORK_LEVEL_ERROR = 3,
} ork_log_level_abi;

/* ---- Config keys a component accepts -------------------------------------
 * The core validates the user's YAML against this table (unknown key -> error
 * with file:line:col and the nearest known key), fills defaults, range-checks,
 * and writes the values into a zeroed buffer of params_size bytes at each
 * offset, then passes it to create(). `orakul plugins --keys` prints it. */
typedef enum ork_param_type {
    ORK_PARAM_BOOL = 0,   /* stored as int32_t (0/1) */
    ORK_PARAM_INT = 1,    /* stored as int64_t */
    ORK_PARAM_FLOAT = 2,  /* stored as double */
    ORK_PARAM_STRING = 3, /* stored as const char *, owned by the core, valid during create() */
} ork_param_type;

enum {
    ORK_PARAM_REQUIRED = 1u << 0, /* no default: the user must give it */
};

typedef struct ork_param {
    const char *key;     /* NULL terminates the table */
    ork_param_type type;
    uint32_t count;      /* 0 or 1: a scalar; n > 1: a YAML list of exactly n values, stored as an array */
    uint32_t flags;      /* ORK_PARAM_* */
    const char *def;     /* default as YAML text ("0.9", "[0.9, 0.999]", "true"); NULL when required */
    double min, max;     /* inclusive range for INT and FLOAT; ignored when min > max */
    const char *choices; /* STRING only: '|'-separated allowed values, or NULL for any */
    size_t offset;       /* where the value goes in the params buffer */
    const char *doc;     /* one line */
} ork_param;

/* ---- Components ------------------------------------------------------------ */
typedef enum ork_component_kind {
    ORK_KIND_MODEL = 0,
    ORK_KIND_LOSS = 1,
    ORK_KIND_OPTIMIZER = 2,
    ORK_KIND_QUANT = 3,
    ORK_KIND_TEXT_ENCODER = 4, /* ABI 1.3: ork_text_encoder_vtable (orakul/text_encoder.h) */
    ORK_KIND_CODEC = 5,        /* ABI 1.3: ork_codec_vtable (orakul/codec.h): pixels <-> latents */
    ORK_KIND_COUNT
} ork_component_kind;

typedef struct ork_component {
    ork_abi abi;
    ork_component_kind kind;
    const char *id;                /* reverse-DNS, unique across all plugins: "org.orakul.adamw8bit" */
    const char *const *aliases;    /* NULL-terminated short names the YAML may use ("adamw8bit"), or NULL */
    const char *description;       /* one line */
    const ork_param *params;       /* key table terminated by {NULL}, or NULL for none */
    size_t params_size;            /* bytes of the params buffer create() receives */
    const void *vtable;            /* ork_model_vtable / ork_loss_vtable / ork_optimizer_vtable / ork_quant_vtable /
                                      ork_text_encoder_vtable / ork_codec_vtable */
} ork_component;

/* ---- The host table -------------------------------------------------------- */
typedef struct ork_host ork_host;
struct ork_host {
    ork_abi abi;
    const char *core_version;      /* "1.0.0" */
    void *host_data;               /* core-private */
    /* One line to the user's log, prefixed with the plugin name. [any-thread] */
    void (*log)(const ork_host *h, ork_log_level_abi lvl, const char *fmt, ...);
    /* An optional service by string id with a revision, e.g. ORK_SERVICE_OPS
     * ("orakul.ops/1"). NULL when the core does not provide it. The returned
     * table is owned by the core and valid for the plugin's lifetime. */
    const void *(*get_service)(const ork_host *h, const char *id);
};

/* ---- The entry table ------------------------------------------------------- */
typedef struct ork_plugin_entry {
    ork_abi abi;
    const char *name;        /* short name, matches orakul-<name>.so */
    const char *version;     /* the plugin's own version, free-form */
    const char *description; /* one line */
    /* Optional. Called once after loading, before any component is created.
     * The host table is valid until deinit. [control-thread] */
    ork_status (*init)(const ork_host *host);
    /* Optional. [control-thread] */
    void (*deinit)(void);
    /* NULL-terminated list of components, owned by the plugin. */
    const ork_component *const *components;
} ork_plugin_entry;

typedef const ork_plugin_entry *(*ork_plugin_entry_fn)(void);

/* The one exported symbol. */
ORK_EXPORT const ork_plugin_entry *orakul_plugin_entry(void);

/* Plugins define exactly this: */
#define ORK_PLUGIN_ENTRY(table) \
    ORK_EXPORT const ork_plugin_entry *orakul_plugin_entry(void) { return &(table); }

#ifdef __cplusplus
}
#endif
#endif /* ORAKUL_PLUGIN_H */
