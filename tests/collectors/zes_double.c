/* A C double of the Level Zero Sysman calls xpuprof.collectors.sysman makes, with the structure
 * layouts of zes_api.h (loader v1.32). Two devices: device 0 has every domain (engine group ALL,
 * GPU frequency domain, a GPU and a global temperature sensor, a device and a system memory
 * module, a card power domain); device 1 has no power domain and only a COMPUTE_ALL engine group. */
#include <stdint.h>
#include <stddef.h>

typedef uint32_t ze_result_t;
typedef uint8_t ze_bool_t;
typedef void *handle_t;
#define OK 0u
#define UNSUPPORTED 0x78000003u
#define INVALID 0x78000004u

typedef struct { uint32_t stype; void *pNext; int32_t type; ze_bool_t onSubdevice; uint32_t subdeviceId; } engine_props_t;
typedef struct { uint32_t stype; void *pNext; int32_t type; ze_bool_t onSubdevice; uint32_t subdeviceId;
                 ze_bool_t canControl; ze_bool_t isThrottleEventSupported; double min; double max; } freq_props_t;
typedef struct { uint32_t stype; const void *pNext; double currentVoltage; double request; double tdp; double efficient;
                 double actual; uint32_t throttleReasons; } freq_state_t;
typedef struct { uint32_t stype; void *pNext; int32_t type; ze_bool_t onSubdevice; uint32_t subdeviceId;
                 double maxTemperature; ze_bool_t a, b, c; } temp_props_t;
typedef struct { uint32_t stype; void *pNext; int32_t type; ze_bool_t onSubdevice; uint32_t subdeviceId;
                 int32_t location; uint64_t physicalSize; int32_t busWidth; int32_t numChannels; } mem_props_t;
typedef struct { uint32_t stype; const void *pNext; int32_t health; uint64_t free; uint64_t size; } mem_state_t;
typedef struct { uint64_t energy; uint64_t timestamp; } energy_t;
typedef struct { uint64_t activeTime; uint64_t timestamp; } engine_stats_t;

/* Handles are addresses of these tags; the double checks every handle it is given. */
static char DRIVER, DEV[2], PWR0, ENG0_ALL, ENG0_COPY, ENG1_COMPUTE, FREQ0_GPU, FREQ0_MEM, TEMP0_GPU, TEMP0_GLOBAL,
    MEM0_DEV, MEM0_SYS;
static int initialized;
static uint64_t reads;       /* energy/engine reads so far: each advances the counters */
int zes_double_bad_stype;    /* set when a state struct arrives with a wrong stype */
int zes_double_fail_init;    /* make zesInit fail (no driver) */

static ze_result_t list(uint32_t *count, handle_t *out, handle_t *items, uint32_t n) {
    if (!initialized) return 0x78000001u;
    if (out == NULL || *count == 0) { *count = n; return OK; }
    uint32_t k = *count < n ? *count : n;
    for (uint32_t i = 0; i < k; i++) out[i] = items[i];
    *count = k;
    return OK;
}

ze_result_t zesInit(uint32_t flags) { (void)flags; if (zes_double_fail_init) return 0x78000001u; initialized = 1; return OK; }
ze_result_t zesDriverGet(uint32_t *c, handle_t *d) { handle_t h[] = {&DRIVER}; return list(c, d, h, 1); }
ze_result_t zesDeviceGet(handle_t drv, uint32_t *c, handle_t *d) {
    if (drv != &DRIVER) return INVALID;
    handle_t h[] = {&DEV[0], &DEV[1]}; return list(c, d, h, 2);
}
ze_result_t zesDeviceGetCardPowerDomain(handle_t dev, handle_t *p) {
    if (dev == &DEV[0]) { *p = &PWR0; return OK; }
    return UNSUPPORTED;
}
ze_result_t zesDeviceEnumPowerDomains(handle_t dev, uint32_t *c, handle_t *p) {
    handle_t h[] = {&PWR0}; return list(c, p, h, dev == &DEV[0] ? 1 : 0);
}
ze_result_t zesPowerGetEnergyCounter(handle_t p, energy_t *e) {
    if (p != &PWR0) return INVALID;
    reads++;
    e->energy = reads * 2000000ull;  /* 2 J per read */
    e->timestamp = reads * 10000ull;
    return OK;
}
ze_result_t zesDeviceEnumEngineGroups(handle_t dev, uint32_t *c, handle_t *p) {
    if (dev == &DEV[0]) { handle_t h[] = {&ENG0_COPY, &ENG0_ALL}; return list(c, p, h, 2); }
    handle_t h[] = {&ENG1_COMPUTE}; return list(c, p, h, 1);
}
ze_result_t zesEngineGetProperties(handle_t e, engine_props_t *p) {
    if (p->stype != 0x5) zes_double_bad_stype = 1;
    p->type = e == &ENG0_ALL ? 0 : e == &ENG0_COPY ? 3 : 1;
    p->onSubdevice = 0; p->subdeviceId = 0;
    return OK;
}
ze_result_t zesEngineGetActivity(handle_t e, engine_stats_t *s) {
    static uint64_t active[2];
    int i = e == &ENG0_ALL ? 0 : e == &ENG1_COMPUTE ? 1 : -1;
    if (i < 0) return INVALID;
    active[i] += (uint64_t)(i + 1) * 1000;
    s->activeTime = active[i]; s->timestamp = active[i] * 4;
    return OK;
}
ze_result_t zesDeviceEnumFrequencyDomains(handle_t dev, uint32_t *c, handle_t *p) {
    handle_t h[] = {&FREQ0_MEM, &FREQ0_GPU}; return list(c, p, h, dev == &DEV[0] ? 2 : 0);
}
ze_result_t zesFrequencyGetProperties(handle_t f, freq_props_t *p) {
    if (p->stype != 0x9) zes_double_bad_stype = 1;
    p->type = f == &FREQ0_GPU ? 0 : 1; p->min = 300; p->max = 2400;
    return OK;
}
ze_result_t zesFrequencyGetState(handle_t f, freq_state_t *s) {
    if (s->stype != 0x1b) zes_double_bad_stype = 1;
    if (f != &FREQ0_GPU) return INVALID;
    s->currentVoltage = 0.9; s->request = 2000; s->tdp = 2400; s->efficient = 1000; s->actual = 1950; s->throttleReasons = 0;
    return OK;
}
ze_result_t zesDeviceEnumTemperatureSensors(handle_t dev, uint32_t *c, handle_t *p) {
    handle_t h[] = {&TEMP0_GLOBAL, &TEMP0_GPU}; return list(c, p, h, dev == &DEV[0] ? 2 : 0);
}
ze_result_t zesTemperatureGetProperties(handle_t t, temp_props_t *p) {
    if (p->stype != 0x14) zes_double_bad_stype = 1;
    p->type = t == &TEMP0_GPU ? 1 : 0; p->maxTemperature = 105;
    return OK;
}
ze_result_t zesTemperatureGetState(handle_t t, double *v) {
    if (t == &TEMP0_GPU) { *v = 71.5; return OK; }
    if (t == &TEMP0_GLOBAL) { *v = 90.0; return OK; }  /* must not be read: a GPU sensor exists */
    return INVALID;
}
ze_result_t zesDeviceEnumMemoryModules(handle_t dev, uint32_t *c, handle_t *p) {
    handle_t h[] = {&MEM0_SYS, &MEM0_DEV}; return list(c, p, h, dev == &DEV[0] ? 2 : 0);
}
ze_result_t zesMemoryGetProperties(handle_t m, mem_props_t *p) {
    if (p->stype != 0xb) zes_double_bad_stype = 1;
    p->location = m == &MEM0_DEV ? 1 : 0; p->physicalSize = 16ull << 30;
    return OK;
}
ze_result_t zesMemoryGetState(handle_t m, mem_state_t *s) {
    if (s->stype != 0x1e) zes_double_bad_stype = 1;
    if (m != &MEM0_DEV) return INVALID;  /* the system module must not be counted */
    s->health = 1; s->size = 16ull << 30; s->free = 12ull << 30;
    return OK;
}
