/*
 * xpuprof_plugin.h -- the C ABI for xpuprof profiler plugins (shared libraries).
 *
 * A plugin is a shared library placed in a directory named by XPUPROF_PLUGIN_PATH (or the
 * config key `plugin_paths`). xpuprof dlopen()s it and calls the one exported function
 *
 *     int xpuprof_plugin_register(XpuprofPluginInterface *table);
 *
 * which fills the table of function pointers below and returns 0 (anything else: the plugin
 * is refused and reported). One library provides one backend.
 *
 * Versioning
 *   - Every struct starts with `size_t struct_size`. The side that fills a struct sets it to
 *     sizeof() of the struct as it was compiled. Fields are only ever appended, so a reader
 *     treats every field past `struct_size` as absent (NULL / 0). Old plugins keep working as
 *     the structs grow; new plugins keep working with an older xpuprof for the fields it knows.
 *   - `abi_version` is the major version: xpuprof refuses a plugin whose major version differs
 *     from XPUPROF_PLUGIN_ABI_VERSION (a breaking change bumps it; appending fields does not).
 *
 * Life cycle (the enabled activity types are known at configure time, before start):
 *     query -> [probe] -> create(enabled types, config) -> start -> stop
 *           -> process_events(trace builder) -> destroy
 *
 * Return codes: 0 = success; a negative value = error (xpuprof then calls `last_error`, when
 * provided, reports the plugin once with its file and that message, and writes the rest of the
 * trace without it). `create` may return XPUPROF_PLUGIN_DECLINE (1) to take no part in this
 * run (none of the enabled types is the plugin's).
 *
 * Memory ownership: no memory allocated by one side is ever freed by the other.
 *   - Strings and arrays the plugin passes to xpuprof (names, args JSON, metric names) are
 *     only read during the call; xpuprof copies what it keeps. The plugin frees them later.
 *   - Buffers xpuprof passes to the plugin (name, reason and error buffers) are owned by
 *     xpuprof; the plugin writes a NUL-terminated string of at most `len` bytes into them.
 *   - The plugin's profiler handle is created by `create` and released only by `destroy`.
 *
 * Threads: every call comes from one thread at a time. The trace-builder functions may only be
 * called from inside `process_events`, on the calling thread.
 *
 * Timestamps are int64 nanoseconds since the Unix epoch (CLOCK_REALTIME), like every xpuprof
 * producer. Rows: `device_id` is the Chrome process row (pid), `resource_id` the thread row
 * (tid), as in Kineto.
 */
#ifndef XPUPROF_PLUGIN_H
#define XPUPROF_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define XPUPROF_PLUGIN_ABI_VERSION 1u
#define XPUPROF_PLUGIN_REGISTER_SYMBOL "xpuprof_plugin_register"

#define XPUPROF_PLUGIN_OK 0
#define XPUPROF_PLUGIN_DECLINE 1
#define XPUPROF_PLUGIN_ERROR (-1)

#if defined(_WIN32)
#define XPUPROF_PLUGIN_EXPORT __declspec(dllexport)
#else
#define XPUPROF_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* Activity types (stable numbering: values are never reused or renumbered). */
typedef enum XpuprofActivityType {
    XPUPROF_ACTIVITY_INVALID = 0,
    XPUPROF_ACTIVITY_CPU_OP = 1,
    XPUPROF_ACTIVITY_USER_ANNOTATION = 2,
    XPUPROF_ACTIVITY_GPU_USER_ANNOTATION = 3,
    XPUPROF_ACTIVITY_GPU_MEMCPY = 4,
    XPUPROF_ACTIVITY_GPU_MEMSET = 5,
    XPUPROF_ACTIVITY_CONCURRENT_KERNEL = 6,
    XPUPROF_ACTIVITY_EXTERNAL_CORRELATION = 7,
    XPUPROF_ACTIVITY_RUNTIME = 8,
    XPUPROF_ACTIVITY_DRIVER = 9,
    XPUPROF_ACTIVITY_CPU_INSTANT_EVENT = 10,
    XPUPROF_ACTIVITY_PYTHON_FUNCTION = 11,
    XPUPROF_ACTIVITY_OVERHEAD = 12,
    XPUPROF_ACTIVITY_COLLECTIVE_COMM = 13,
    XPUPROF_ACTIVITY_GPU_PM_COUNTER = 14,
    XPUPROF_ACTIVITY_MTIA_INSIGHT = 15,
    XPUPROF_ACTIVITY_CUDA_SYNC = 16,
    XPUPROF_ACTIVITY_CUDA_EVENT = 17,
    XPUPROF_ACTIVITY_CUDA_PROFILER_RANGE = 18,
    XPUPROF_ACTIVITY_XPU_SCOPE_PROFILER = 19,
    XPUPROF_ACTIVITY_XPU_SYNC = 20,
    XPUPROF_ACTIVITY_HARDWARE_COUNTERS = 21
} XpuprofActivityType;

/* Flow kinds (Kineto's link types). */
#define XPUPROF_FLOW_FWD_BWD 1       /* category "fwdbwd" */
#define XPUPROF_FLOW_ASYNC_CPU_GPU 2 /* category "ac2g" */

/* ------------------------------------------------------------------ events (plugin -> xpuprof) */

/* A complete ("X") event. */
typedef struct XpuprofSlice {
    size_t struct_size;
    int32_t activity_type;   /* XpuprofActivityType; sets the `cat` */
    int32_t reserved;
    int64_t start_ns;
    int64_t end_ns;          /* >= start_ns */
    int64_t device_id;       /* pid row */
    int64_t resource_id;     /* tid row */
    int64_t external_id;     /* "External id" arg; 0 = none */
    const char *name;        /* UTF-8, not NULL */
    const char *args_json;   /* NULL or a JSON object text, e.g. "{\"bytes\": 64}" */
} XpuprofSlice;

/* One sample of a counter track ("C" event) carrying `num_values` metrics. */
typedef struct XpuprofCounter {
    size_t struct_size;
    int32_t activity_type;   /* usually XPUPROF_ACTIVITY_GPU_PM_COUNTER */
    int32_t reserved;
    int64_t ts_ns;
    int64_t device_id;
    int64_t resource_id;
    const char *name;                 /* track name, UTF-8, not NULL */
    size_t num_values;                /* >= 1 */
    const char *const *metric_names;  /* num_values UTF-8 names */
    const double *values;             /* num_values finite values */
} XpuprofCounter;

/* One end of a flow arrow. */
typedef struct XpuprofFlow {
    size_t struct_size;
    uint64_t flow_id;
    int64_t ts_ns;
    int64_t device_id;
    int64_t resource_id;
    int32_t flow_type;       /* XPUPROF_FLOW_* */
    int32_t is_start;        /* 1: "s", 0: "f" (binds to the enclosing slice) */
} XpuprofFlow;

/* A process row (a device). */
typedef struct XpuprofDeviceRow {
    size_t struct_size;
    int64_t device_id;
    int64_t sort_index;
    const char *name;        /* not NULL */
    const char *label;       /* NULL = none */
} XpuprofDeviceRow;

/* A thread row (a resource: queue, stream, engine, sampler...). */
typedef struct XpuprofResourceRow {
    size_t struct_size;
    int64_t device_id;
    int64_t resource_id;
    int64_t sort_index;
    const char *name;        /* not NULL */
} XpuprofResourceRow;

/* The trace builder (xpuprof -> plugin, valid only during process_events). `builder` is an
 * opaque handle passed back as the first argument of every function. Each returns 0 when the
 * item was accepted and -1 when it was malformed (it is then dropped, counted and reported
 * once; later items are still accepted). */
typedef struct XpuprofTraceBuilder XpuprofTraceBuilder;

typedef struct XpuprofTraceBuilderApi {
    size_t struct_size;
    XpuprofTraceBuilder *builder;
    int64_t window_start_ns;  /* the capture window; records outside it should be skipped */
    int64_t window_end_ns;
    int (*add_slice)(XpuprofTraceBuilder *builder, const XpuprofSlice *slice);
    int (*add_counter)(XpuprofTraceBuilder *builder, const XpuprofCounter *counter);
    int (*add_flow)(XpuprofTraceBuilder *builder, const XpuprofFlow *flow);
    int (*add_device_row)(XpuprofTraceBuilder *builder, const XpuprofDeviceRow *row);
    int (*add_resource_row)(XpuprofTraceBuilder *builder, const XpuprofResourceRow *row);
    /* A top-level trace key; value_json must be valid JSON ("\"text\"", "42", "[1, 2]"). */
    int (*set_metadata)(XpuprofTraceBuilder *builder, const char *key, const char *value_json);
    /* The fast path for many events: `count` slices from one contiguous array (each element's
     * struct_size is its stride). Malformed elements are dropped and counted, the others kept;
     * returns 0 when all were accepted, -1 when any was dropped. */
    int (*add_slices)(XpuprofTraceBuilder *builder, const XpuprofSlice *slices, size_t count);
} XpuprofTraceBuilderApi;

/* ------------------------------------------------------------------ the plugin's table */

typedef struct XpuprofPluginProfiler XpuprofPluginProfiler; /* the plugin's own state */

typedef struct XpuprofPluginInterface {
    size_t struct_size;      /* set by the plugin: sizeof(XpuprofPluginInterface) it was built with */
    uint32_t abi_version;    /* set by the plugin: XPUPROF_PLUGIN_ABI_VERSION */
    uint32_t reserved;

    /* Required. The backend name (lowercase letters, digits, '_', '-', '.') into name_buf, and
     * up to max_types supported XpuprofActivityType values into types (count in *num_types). */
    int (*query)(char *name_buf, size_t name_len, int32_t *types, size_t max_types, size_t *num_types);

    /* Required. Configure a run: the enabled activity types (only those the plugin supports)
     * and the run's configuration as a JSON object text. On success *out holds the handle. */
    int (*create)(const int32_t *enabled_types, size_t num_enabled, const char *config_json,
                  XpuprofPluginProfiler **out);
    int (*destroy)(XpuprofPluginProfiler *profiler);   /* required */
    int (*start)(XpuprofPluginProfiler *profiler);     /* required, synchronous */
    int (*stop)(XpuprofPluginProfiler *profiler);      /* required, synchronous */
    int (*process_events)(XpuprofPluginProfiler *profiler, const XpuprofTraceBuilderApi *api); /* required */

    /* Optional. 1 = can run here, 0 = cannot (reason into reason_buf). NULL = always available. */
    int (*probe)(char *reason_buf, size_t reason_len);
    /* Optional. The message of the last failed call (profiler may be NULL after a failed
     * create) into buf. */
    int (*last_error)(XpuprofPluginProfiler *profiler, char *buf, size_t len);

    /* Optional, appended in ABI 1.1 (older plugins leave them out; struct_size says so).
     * Activity types this plugin declares: `num_declared_activity_types` (at most 256) names in
     * lowercase letters, digits and '_' (not a built-in name, not another plugin's). xpuprof gives
     * the plugin its own id range; the names then parse in activity lists, Kineto ACTIVITY_TYPES
     * and YAML like built-in names, and events of that type carry the name as category. The
     * plugin writes declared type i as XPUPROF_DECLARED_TYPE(i): in query()'s types, in the
     * enabled list create() receives, and in events' activity_type. The array must stay valid
     * until the library is unloaded (a static array). */
    const char *const *declared_activity_types;
    size_t num_declared_activity_types;
} XpuprofPluginInterface;

#define XPUPROF_DECLARED_TYPE(i) ((int32_t)(0x40000000 + (i)))

/* The one symbol a plugin exports. xpuprof passes a zeroed table whose struct_size is the size
 * xpuprof knows; the plugin fills at most that many bytes. */
typedef int (*XpuprofPluginRegisterFn)(XpuprofPluginInterface *table);
XPUPROF_PLUGIN_EXPORT int xpuprof_plugin_register(XpuprofPluginInterface *table);

#ifdef __cplusplus
}
#endif

#endif /* XPUPROF_PLUGIN_H */
