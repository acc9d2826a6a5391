/* Test double of PTI's metrics-scope ABI (pti_metrics_scope.h / pti_metrics.h subset).
 * A test scripts the kernels a "run" produced (scope_double_script); the double then hands out one
 * collection buffer and calculates records laid out exactly like PTI's: an array of
 * pti_metrics_scope_record_t followed by the value arrays and kernel names they point to. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef union { uint32_t ui32; uint64_t ui64; float fp32; double fp64; uint8_t b8; } pti_value_t;
typedef struct { uint64_t kernel_id; void* queue; const char* kernel_name; pti_value_t* values; } scope_record_t;
typedef struct { size_t struct_size, count; uint32_t* types; const char** names; const char** units; } metadata_t;
typedef struct { size_t struct_size; void* device; size_t num_scopes, buffer_size; uint64_t t0, t1; const char* group; } cbprops_t;
typedef struct { void* handle; uint8_t d, b, dev, f; const char* model; uint8_t uuid[16]; } devprops_t;

/* The device's metric catalog: name, unit, value type (0 u32, 1 u64, 2 f32, 3 f64), group. */
static const struct { const char* name; const char* unit; uint32_t type; const char* group; } kMetrics[] = {
  {"GpuTime", "ns", 1, "ComputeBasic"}, {"GpuCoreClocks", "cycles", 1, "ComputeBasic"},
  {"XVE_ACTIVE", "percent", 2, "ComputeBasic"}, {"XVE_STALL", "percent", 2, "ComputeBasic"},
  {"Counter5", "", 0, "TestOa"},
};
enum { kNumMetrics = sizeof(kMetrics) / sizeof(kMetrics[0]), kMaxSel = 8, kMaxRec = 4096 };

static int g_sel[kMaxSel], g_nsel, g_enabled, g_started, g_ran, g_nrec;
static uint64_t g_ids[kMaxRec];
static double g_vals[kMaxRec][kMaxSel];
static size_t g_bufsize;
static uint8_t g_collection[64];
static const char* g_names[kMaxSel]; static const char* g_units[kMaxSel]; static uint32_t g_types[kMaxSel];
static char g_kernel_name[] = "scripted_kernel";

void scope_double_script(int n, const uint64_t* ids, const double* values /* n x nsel, row major */) {
  g_nrec = n > kMaxRec ? kMaxRec : n;
  for (int i = 0; i < g_nrec; ++i) {
    g_ids[i] = ids[i];
    for (int k = 0; k < g_nsel; ++k) g_vals[i][k] = values[i * g_nsel + k];
  }
  g_ran = 1;
}
size_t scope_double_buffer_size(void) { return g_bufsize; }
int scope_double_started(void) { return g_started; }

uint32_t ptiMetricsGetDevices(devprops_t* out, uint32_t* n) {
  if (!n) return 3;
  if (out && *n >= 1) { memset(out, 0, sizeof(*out)); out->handle = (void*)0x1000; out->model = "Intel(R) Arc(TM) B580 Graphics"; }
  *n = 1; return 0;
}
uint32_t ptiMetricsScopeEnable(void** h) { if (!h) return 3; *h = (void*)0x5c09e; g_enabled = 1; g_nsel = 0; g_ran = 0; g_nrec = 0; return 0; }
uint32_t ptiMetricsScopeConfigure(void* h, uint32_t mode, void** devs, size_t ndev, const char** names, size_t n) {
  (void)devs; (void)ndev;
  if (!g_enabled || !h) return 100;
  if (mode == 2) return 2;
  if (mode != 1 || n == 0 || n > kMaxSel) return 3;
  const char* group = NULL;
  for (size_t i = 0; i < n; ++i) {
    int found = -1;
    for (int k = 0; k < kNumMetrics; ++k) if (strcmp(names[i], kMetrics[k].name) == 0) found = k;
    if (found < 0) return 151;
    if (group && strcmp(group, kMetrics[found].group) != 0) return 152;
    group = kMetrics[found].group;
    g_sel[i] = found; g_names[i] = kMetrics[found].name; g_units[i] = kMetrics[found].unit; g_types[i] = kMetrics[found].type;
  }
  g_nsel = (int)n; return 0;
}
uint32_t ptiMetricsScopeQueryCollectionBufferSize(void* h, size_t scopes, size_t* size) {
  if (!h || !size || !g_nsel) return 105;
  *size = scopes * 256 < 2048 ? 2048 : scopes * 256; return 0;
}
uint32_t ptiMetricsScopeSetCollectionBufferSize(void* h, size_t size) { if (!h || !g_nsel) return 105; g_bufsize = size; return 0; }
uint32_t ptiMetricsScopeStartCollection(void* h) { if (!h || !g_nsel) return 105; g_started = 1; return 0; }
uint32_t ptiMetricsScopeStopCollection(void* h) { if (!h || !g_started) return 100; g_started = 0; return 0; }
uint32_t ptiMetricsScopeGetMetricsMetadata(void* h, metadata_t* md) {
  if (!h || !md || md->struct_size != sizeof(metadata_t) || !g_nsel) return 3;
  md->count = (size_t)g_nsel; md->types = g_types; md->names = g_names; md->units = g_units; return 0;
}
uint32_t ptiMetricsScopeGetCollectionBuffersCount(void* h, size_t* n) { if (!h || !n) return 3; *n = g_ran ? 1 : 0; return 0; }
uint32_t ptiMetricsScopeGetCollectionBuffer(void* h, size_t i, void** buf, size_t* size) {
  if (!h || i != 0 || !g_ran) return 3;
  *buf = g_collection; *size = sizeof g_collection; return 0;
}
uint32_t ptiMetricsScopeGetCollectionBufferProperties(void* h, void* buf, cbprops_t* p) {
  if (!h || buf != g_collection || !p) return 3;
  p->device = (void*)0x1000; p->num_scopes = (size_t)g_nrec; p->buffer_size = g_bufsize; p->group = kMetrics[g_sel[0]].group; return 0;
}
static size_t needed_bytes(void) {
  return (size_t)g_nrec * (sizeof(scope_record_t) + (size_t)g_nsel * sizeof(pti_value_t)) + sizeof g_kernel_name;
}
uint32_t ptiMetricsScopeQueryMetricsBufferSize(void* h, void* buf, size_t* need, size_t* nrec) {
  if (!h || buf != g_collection) return 156;
  *need = needed_bytes(); *nrec = (size_t)g_nrec; return 0;
}
uint32_t ptiMetricsScopeCalculateMetrics(void* h, void* buf, void* out, size_t size, size_t* nrec) {
  if (!h || buf != g_collection) return 156;
  if (size < needed_bytes()) return 155;
  scope_record_t* recs = (scope_record_t*)out;
  pti_value_t* vals = (pti_value_t*)(recs + g_nrec);
  char* name = (char*)(vals + (size_t)g_nrec * g_nsel);
  memcpy(name, g_kernel_name, sizeof g_kernel_name);
  for (int i = 0; i < g_nrec; ++i) {
    recs[i].kernel_id = g_ids[i]; recs[i].queue = (void*)(uintptr_t)0xabc0; recs[i].kernel_name = name;
    recs[i].values = vals + (size_t)i * g_nsel;
    for (int k = 0; k < g_nsel; ++k) {
      pti_value_t* v = &recs[i].values[k]; memset(v, 0, sizeof *v);
      switch (g_types[k]) {
        case 0: v->ui32 = (uint32_t)g_vals[i][k]; break;
        case 1: v->ui64 = (uint64_t)g_vals[i][k]; break;
        case 2: v->fp32 = (float)g_vals[i][k]; break;
        default: v->fp64 = g_vals[i][k];
      }
    }
  }
  *nrec = (size_t)g_nrec; return 0;
}
uint32_t ptiMetricsScopeDisable(void* h) { if (!h) return 3; g_enabled = 0; g_started = 0; return 0; }
