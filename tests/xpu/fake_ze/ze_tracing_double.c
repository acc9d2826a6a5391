/* A Level Zero loader double for the kernel-resources tests: the loader's tracing layer API
 * (zelTracer*, zelEnableTracingLayer; layers/zel_tracing_api.h, zel_tracing_register_cb.h of loader
 * v1.32) and the module/kernel calls it traces, with structs mirroring ze_api.h (x86-64).
 *
 * zeModuleCreate / zeModuleDestroy / zeKernelCreate call the epilogues registered on every enabled
 * tracer, as the tracing layer does once zelEnableTracingLayer (or ZE_ENABLE_TRACING_LAYER=1) has
 * switched it on. zeKernelGetProperties fills what zed_set_properties scripted (and the Intel
 * register-file-size extension when it is chained), or, in "silent" mode, nothing (the null driver).
 * Built with -DNO_TRACER it lacks the tracer API (a loader older than 1.6). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct { uint32_t stype; const void *pNext; void *pUserData; } tracer_desc_t;
typedef struct { uint8_t kid[16], mid[16]; } kernel_uuid_t;
typedef struct {
    uint32_t stype; void *pNext; uint32_t numKernelArgs, requiredGroupSizeX, requiredGroupSizeY, requiredGroupSizeZ,
        requiredNumSubGroups, requiredSubgroupSize, maxSubgroupSize, maxNumSubgroups, localMemSize, privateMemSize,
        spillMemSize;
    kernel_uuid_t uuid;
} kernel_properties_t;
typedef struct { uint32_t stype; const void *pNext; uint32_t registerFileSize; } register_file_size_t;
typedef struct {
    uint32_t stype; const void *pNext; uint32_t format; size_t inputSize; const uint8_t *pInputModule;
    const char *pBuildFlags; const void *pConstants;
} module_desc_t;
typedef struct { uint32_t stype; const void *pNext; uint32_t flags; const char *pKernelName; } kernel_desc_t;
typedef struct { void **phContext; void **phDevice; const module_desc_t **pdesc; void ***pphModule; void ***pphLog; }
    module_create_params_t;
typedef struct { void **phModule; } module_destroy_params_t;
typedef struct { void **phModule; const kernel_desc_t **pdesc; void ***pphKernel; } kernel_create_params_t;
typedef void (*cb_t)(void *params, int result, void *user, void **inst);

typedef struct { void *user; int enabled; cb_t module_create, module_destroy, kernel_create; } tracer_t;

static tracer_t tracers[4];
static int layer_on, silent, props_result;
static const uint32_t default_props[12] = {3, 0, 0, 0, 0, 0, 16, 32, 4096, 256, 128, 0};
static uint32_t props[12], grf;
static uintptr_t next_handle = 0x5000;
static uint32_t module_format[256];

size_t zed_sizeof(const char *what) {
    if (!strcmp(what, "kernel_properties")) return sizeof(kernel_properties_t);
    if (!strcmp(what, "register_file_size")) return sizeof(register_file_size_t);
    if (!strcmp(what, "module_desc")) return sizeof(module_desc_t);
    if (!strcmp(what, "kernel_desc")) return sizeof(kernel_desc_t);
    return 0;
}
size_t zed_offset(const char *what) {
#define F(T, f) if (!strcmp(what, #T "." #f)) return offsetof(T, f)
    F(kernel_properties_t, numKernelArgs); F(kernel_properties_t, requiredGroupSizeX);
    F(kernel_properties_t, requiredSubgroupSize); F(kernel_properties_t, maxSubgroupSize);
    F(kernel_properties_t, maxNumSubgroups); F(kernel_properties_t, localMemSize);
    F(kernel_properties_t, privateMemSize); F(kernel_properties_t, spillMemSize); F(kernel_properties_t, uuid);
    F(register_file_size_t, registerFileSize); F(module_desc_t, format); F(module_desc_t, inputSize);
    F(kernel_desc_t, pKernelName);
#undef F
    return (size_t)-1;
}

/* numKernelArgs, requiredGroupSizeX/Y/Z, requiredNumSubGroups, requiredSubgroupSize, maxSubgroupSize,
 * maxNumSubgroups, localMemSize, privateMemSize, spillMemSize, (unused), register file size. */
void zed_set_properties(const uint32_t *values, uint32_t register_file_size) {
    memcpy(props, values, sizeof props);
    grf = register_file_size;
}
void zed_set_silent(int on) { silent = on; }
void zed_set_result(int result) { props_result = result; }
void zed_reset(void) {
    memcpy(props, default_props, sizeof props);
    grf = 256;
    memset(tracers, 0, sizeof tracers);
    layer_on = silent = props_result = 0;
}

int zeInit(uint32_t flags) { return 0; }
int zesInit(uint32_t flags) { return 0; }
int zeDriverGet(uint32_t *count, void **drivers) {
    if (drivers && *count) drivers[0] = (void *)0x10;
    *count = 1;
    return 0;
}

#ifndef NO_TRACER
int zelEnableTracingLayer(void) { layer_on = 1; return 0; }
int zelTracerCreate(const tracer_desc_t *desc, void **out) {
    if (!desc || !out || !desc->pUserData) return 0x78000004; /* ZE_RESULT_ERROR_INVALID_NULL_POINTER */
    for (int i = 0; i < 4; i++)
        if (!tracers[i].user) { tracers[i].user = desc->pUserData; *out = &tracers[i]; return 0; }
    return 0x70000002;
}
int zelTracerDestroy(void *t) { memset(t, 0, sizeof(tracer_t)); return 0; }
int zelTracerSetEnabled(void *t, uint8_t on) { ((tracer_t *)t)->enabled = on; return 0; }
int zelTracerModuleCreateRegisterCallback(void *t, uint32_t type, cb_t cb) {
    if (type == 1) ((tracer_t *)t)->module_create = cb;
    return 0;
}
int zelTracerModuleDestroyRegisterCallback(void *t, uint32_t type, cb_t cb) {
    if (type == 1) ((tracer_t *)t)->module_destroy = cb;
    return 0;
}
int zelTracerKernelCreateRegisterCallback(void *t, uint32_t type, cb_t cb) {
    if (type == 1) ((tracer_t *)t)->kernel_create = cb;
    return 0;
}
#endif

#define EPILOGUES(field, params)                                                              \
    for (int i = 0; layer_on && i < 4; i++)                                                   \
        if (tracers[i].enabled && tracers[i].field) tracers[i].field(params, 0, tracers[i].user, NULL)

int zeContextCreate(void *driver, const void *desc, void **ctx) { *ctx = (void *)0xC0; return 0; }

int zeModuleCreate(void *ctx, void *dev, const module_desc_t *desc, void **module, void **log) {
    *module = (void *)(next_handle += 0x10);
    module_format[(next_handle >> 4) & 255] = desc->format;
    module_create_params_t p = {&ctx, &dev, &desc, &module, &log};
    EPILOGUES(module_create, &p);
    return 0;
}

int zeModuleDestroy(void *module) {
    module_destroy_params_t p = {&module};
    EPILOGUES(module_destroy, &p);
    return 0;
}

int zeKernelCreate(void *module, const kernel_desc_t *desc, void **kernel) {
    *kernel = (void *)(next_handle += 0x10);
    kernel_create_params_t p = {&module, &desc, &kernel};
    EPILOGUES(kernel_create, &p);
    return 0;
}

int zeKernelGetProperties(void *kernel, kernel_properties_t *k) {
    if (props_result) return props_result;
    if (silent) return 0; /* the null driver: success, nothing filled */
    k->numKernelArgs = props[0]; k->requiredGroupSizeX = props[1]; k->requiredGroupSizeY = props[2];
    k->requiredGroupSizeZ = props[3]; k->requiredNumSubGroups = props[4]; k->requiredSubgroupSize = props[5];
    k->maxSubgroupSize = props[6]; k->maxNumSubgroups = props[7]; k->localMemSize = props[8];
    k->privateMemSize = props[9]; k->spillMemSize = props[10];
    for (register_file_size_t *e = k->pNext; e; e = (register_file_size_t *)e->pNext)
        if (e->stype == 0x00030012u) e->registerFileSize = grf;
    return 0;
}
