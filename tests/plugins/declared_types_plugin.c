/* A C plugin (ABI 1.1) declaring its own activity types "acmec_dma" and "acmec_fence"; it
 * supports both and the built-in kernel type, records which types create() enabled, and writes one
 * slice per enabled type (its declared types as XPUPROF_DECLARED_TYPE(i)). Built without
 * WITH_DECLARED it is an ABI 1.0-shaped plugin: it fills the table only up to last_error. */
#include <stdio.h>
#include <string.h>
#include "xpuprof_plugin.h"

struct XpuprofPluginProfiler { int32_t enabled[8]; size_t n; };
static struct XpuprofPluginProfiler state;
static const char *const DECLARED[] = {"acmec_dma", "acmec_fence"};

static int query(char *name, size_t len, int32_t *types, size_t max, size_t *n) {
    snprintf(name, len, "%s", PLUGIN_NAME);
    if (max < 3) return -1;
    types[0] = XPUPROF_ACTIVITY_CONCURRENT_KERNEL;
#ifdef WITH_DECLARED
    types[1] = XPUPROF_DECLARED_TYPE(0);
    types[2] = XPUPROF_DECLARED_TYPE(1);
    *n = 3;
#else
    *n = 1;
#endif
    return 0;
}
static int create(const int32_t *enabled, size_t n, const char *config, XpuprofPluginProfiler **out) {
    (void)config;
    state.n = n < 8 ? n : 8;
    memcpy(state.enabled, enabled, state.n * sizeof(int32_t));
    *out = &state;
    return 0;
}
static int noop(XpuprofPluginProfiler *p) { (void)p; return 0; }
static int process(XpuprofPluginProfiler *p, const XpuprofTraceBuilderApi *api) {
    for (size_t i = 0; i < p->n; i++) {
        char name[64];
        snprintf(name, sizeof name, "type %d", (int)p->enabled[i]);
        XpuprofSlice s = {sizeof(XpuprofSlice), p->enabled[i], 0, api->window_start_ns + 10, api->window_start_ns + 20,
                          0, 0, 0, name, NULL};
        if (api->add_slice(api->builder, &s) != 0) return -1;
    }
    return 0;
}

int xpuprof_plugin_register(XpuprofPluginInterface *t) {
    XpuprofPluginInterface mine;
    memset(&mine, 0, sizeof mine);
#ifdef WITH_DECLARED
    mine.struct_size = sizeof mine;
    mine.declared_activity_types = DECLARED;
    mine.num_declared_activity_types = 2;
#else
    mine.struct_size = offsetof(XpuprofPluginInterface, last_error) + sizeof(mine.last_error);
    (void)DECLARED;
#endif
    mine.abi_version = XPUPROF_PLUGIN_ABI_VERSION;
    mine.query = query; mine.create = create; mine.destroy = noop; mine.start = noop; mine.stop = noop;
    mine.process_events = process;
    size_t n = mine.struct_size < t->struct_size ? mine.struct_size : t->struct_size;
    memcpy(t, &mine, n);
    t->struct_size = n;
    return 0;
}
