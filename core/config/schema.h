/* config/schema.h — internal: the key tables the config reader walks (the core
 * schema in schema.c, and component ork_param tables translated at run time).
 * One row per key: adding a key is adding one line to its section's table.
 * Owns: nothing (the tables are static const). */
#ifndef ORK_CONFIG_SCHEMA_H
#define ORK_CONFIG_SCHEMA_H

#include <stddef.h>
#include <stdint.h>

typedef enum ork_ck_kind {
    ORK_CK_BOOL,   /* int32_t 0/1: true/false/yes/no (any case), plain scalars only */
    ORK_CK_INT,    /* int64_t, strtoll with end check */
    ORK_CK_FLOAT,  /* double, strtod with end check; finite */
    ORK_CK_STR,    /* const char * */
    ORK_CK_INTS,   /* ork_ints: an integer or a list of integers */
    ORK_CK_STRS,   /* ork_strs: a string or a list of strings */
    ORK_CK_MAP,    /* a mapping with its own table, a struct at off */
    ORK_CK_LIST,   /* a list of mappings with one table: {size_t n; T *v} at off */
    ORK_CK_PARAMS, /* a component's keys: a mapping checked in pass 2 */
    ORK_CK_ANY,    /* free-form (meta) */
} ork_ck_kind;

typedef enum ork_ck_class {
    ORK_CK_IMPL,  /* honoured */
    ORK_CK_KNOWN, /* ai-toolkit key, not implemented: one warning (silent when == def) */
    ORK_CK_ALIAS, /* another name for the key `alias` of the same table */
} ork_ck_class;

typedef struct ork_ck_table ork_ck_table;

typedef struct ork_ck {
    const char *key;
    uint8_t kind, cls, required;
    uint32_t count;         /* scalars only: n > 1 = a list of exactly n values, stored as an array */
    const char *def;        /* YAML text parsed like user input; NULL = unset. KNOWN: ai-toolkit's default */
    double min, max;        /* INT/FLOAT (and list items), LIST item count; ignored when min > max */
    const char *choices;    /* STR: '|'-separated allowed values */
    size_t off;             /* into the struct of the enclosing table */
    const ork_ck_table *sub;/* MAP / LIST */
    const char *alias;      /* ALIAS: the key this one stands for */
    const char *when;       /* KNOWN: warn only when this is in effect (NULL: always). "key": the
                             * sibling `key` is given and on (not null, false, 0 or ""); "key=v":
                             * the sibling's value is v; ".key": the value is a mapping whose `key`
                             * is on (train.ema_config: .use_ema). Else ai-toolkit does nothing
                             * with the key either, and orakul stays quiet. */
} ork_ck;

struct ork_ck_table {
    const ork_ck *keys;     /* terminated by {NULL} */
    size_t size;            /* sizeof the struct (LIST items) */
    int unimplemented;      /* the whole section: keys checked, one warning, nothing stored */
    int anonymous;          /* LIST items: paths below are written without this list's prefix */
};

extern const ork_ck_table ork_schema_root;

/* ai-toolkit keys of a component key section ("model.model_kwargs") that the
 * component may not declare: in pass 2, a key the component's table lacks but
 * this table lists is known-and-warned instead of refused. NULL: none. */
const ork_ck_table *ork_schema_component_known(const char *section);

#endif
