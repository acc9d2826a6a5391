/* A fake Level Zero loader for the availability tests. FAKE_ZE_MODE selects the machine:
 * "nodriver" (zeInit fails like a loader without a driver), "nogpu" (one driver, one CPU
 * device) or "gpu" (one driver, one GPU). Built with -DNO_ZESINIT it lacks zesInit, like the
 * Level Zero 1.8 loader PTI cannot use. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint32_t stype; void *pNext; uint32_t type, vendorId, deviceId, flags, subdeviceId, coreClockRate;
    uint64_t maxMemAllocSize; uint32_t maxHardwareContexts, maxCommandQueuePriority, numThreadsPerEU,
    physicalEUSimdWidth, numEUsPerSubslice, numSubslicesPerSlice, numSlices; uint64_t timerResolution;
    uint32_t timestampValidBits, kernelTimestampValidBits; uint8_t uuid[16]; char name[256];
} ze_device_properties_t;

typedef struct { uint32_t stype; void *pNext; uint32_t maxTotalGroupSize, gx, gy, gz, cx, cy, cz, slm, nsub, sub[8]; }
    ze_device_compute_properties_t;
typedef struct { uint32_t stype; void *pNext; uint32_t flags, clock, bus; uint64_t totalSize; char name[256]; }
    ze_device_memory_properties_t;
typedef struct { uint32_t stype; void *pNext; uint8_t uuid[16]; uint32_t driverVersion; } ze_driver_properties_t;

static const char *mode(void) { const char *m = getenv("FAKE_ZE_MODE"); return m ? m : "gpu"; }

int zeInit(uint32_t flags) { return strcmp(mode(), "nodriver") == 0 ? 0x78000001 : 0; }
#ifndef NO_ZESINIT
int zesInit(uint32_t flags) { return zeInit(flags); }
#endif
int zeDriverGet(uint32_t *count, void **drivers) {
    if (strcmp(mode(), "nodriver") == 0) { *count = 0; return 0x78000001; }
    if (drivers && *count) drivers[0] = (void *)0x10;
    *count = 1;
    return 0;
}
int zeDriverGetProperties(void *drv, ze_driver_properties_t *p) { p->driverVersion = 12345; return 0; }
int zeDeviceGet(void *drv, uint32_t *count, void **devices) {
    if (devices && *count) devices[0] = (void *)0x20;
    *count = 1;
    return 0;
}
int zeDeviceGetProperties(void *dev, ze_device_properties_t *p) {
    p->type = strcmp(mode(), "nogpu") == 0 ? 2 : 1;
    p->vendorId = 0x8086; p->deviceId = 0x0bd5; p->coreClockRate = 1600; p->maxMemAllocSize = 1ULL << 32;
    p->numEUsPerSubslice = 8; p->numSubslicesPerSlice = 4; p->numSlices = 2;
    for (int i = 0; i < 16; i++) p->uuid[i] = (uint8_t)(0xA0 + i);
    p->uuid[15] = 0;
    strcpy(p->name, "Fake Intel GPU");
    return 0;
}
int zeDeviceGetComputeProperties(void *dev, ze_device_compute_properties_t *c) {
    c->maxTotalGroupSize = 1024; c->slm = 65536; return 0;
}
int zeDeviceGetMemoryProperties(void *dev, uint32_t *count, ze_device_memory_properties_t *m) {
    if (m && *count) m[0].totalSize = 64ULL << 30;
    *count = 1;
    return 0;
}
