/* cli/cmd_plugins.c — `orakul plugins [--keys]`: every plugin found along the
 * search path (its path, version and ABI), its components, and with --keys
 * every config key each component documents (name, type, default, range,
 * doc). Refused plugins are reported on stderr and make the exit code 2. */
#include "cli/cli.h"

#include "util/log.h" /* ORK_ERROR */

#include <stdio.h>
#include <string.h>

static const char *type_name(ork_param_type t) {
    switch (t) {
    case ORK_PARAM_BOOL: return "bool";
    case ORK_PARAM_INT: return "int";
    case ORK_PARAM_FLOAT: return "float";
    case ORK_PARAM_STRING: return "string";
    }
    return "?";
}

static void print_key(const ork_param *k) {
    char type[32], def[96], range[96] = "";
    if (k->count > 1) snprintf(type, sizeof type, "%s[%u]", type_name(k->type), k->count);
    else snprintf(type, sizeof type, "%s", type_name(k->type));
    if (k->flags & ORK_PARAM_REQUIRED) snprintf(def, sizeof def, "required");
    else snprintf(def, sizeof def, "default %s", k->def ? k->def : "(none)");
    if ((k->type == ORK_PARAM_INT || k->type == ORK_PARAM_FLOAT) && k->min <= k->max)
        snprintf(range, sizeof range, "range [%g, %g]", k->min, k->max);
    else if (k->type == ORK_PARAM_STRING && k->choices)
        snprintf(range, sizeof range, "one of %s", k->choices);
    printf("      %-22s %-10s %-24s %-20s %s\n", k->key, type, def, range, k->doc ? k->doc : "");
}

static void print_plugin(const ork_plugin *p, int keys) {
    const ork_plugin_entry *e = p->entry;
    printf("%s %s (ABI %u.%u)  %s\n", p->name, e->version ? e->version : "", p->built.major,
           p->built.minor, p->path);
    if (e->description) printf("  %s\n", e->description);
    for (int i = 0; i < p->n_components; i++) {
        const ork_component *c = p->components[i].c;
        printf("  %-9s %s", ork_kind_name(c->kind), c->id);
        for (const char *const *a = c->aliases; a && *a; a++)
            printf("%s%s", a == c->aliases ? " (alias: " : ", ", *a);
        if (c->aliases && c->aliases[0]) printf(")");
        printf("%s%s\n", c->description ? "  " : "", c->description ? c->description : "");
        if (!keys) continue;
        if (!c->params || !c->params[0].key) {
            printf("      (no keys)\n");
            continue;
        }
        for (const ork_param *k = c->params; k->key; k++) print_key(k);
    }
}

int ork_cmd_plugins(int argc, char **argv) {
    int keys = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--keys")) keys = 1;
        else {
            fprintf(stderr, "orakul plugins: unknown argument '%s' (usage: orakul plugins [--keys])\n",
                    argv[i]);
            return ORK_EXIT_USAGE;
        }
    }
    char **dirs;
    int n;
    if (ork_plugin_search_dirs(NULL, 0, NULL, &dirs, &n) != ORK_OK) return ORK_EXIT_USAGE;
    printf("plugin search path:\n");
    for (int i = 0; i < n; i++) printf("  %s\n", dirs[i]);
    ork_plugin_dirs_free(dirs, n);

    ork_registry *r;
    ork_status s = ork_cli_open_registry(NULL, &r);
    if (!r) return ork_cli_exit_code(s, 0);
    int count = ork_registry_count(r);
    printf("\n%d plugin%s\n", count, count == 1 ? "" : "s");
    for (int i = 0; i < count; i++) {
        printf("\n");
        print_plugin(ork_registry_plugin(r, i), keys);
    }
    ork_registry_destroy(r);
    if (s != ORK_OK) ORK_ERROR("some plugins were refused (see above)");
    return ork_cli_exit_code(s, 0);
}
