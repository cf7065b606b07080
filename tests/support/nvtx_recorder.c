/* A minimal NVTX tool library for gasworks' tests: it implements the NVTX v3 injection entry
 * point, registers a few callbacks and writes every call, with the range nesting depth, to the
 * file named by GASWORKS_NVTX_RECORD. Written from the NVTX injection protocol's ABI facts
 * (export table 1 = callbacks, GetModuleFunctionTable, callback ids), no NVTX header needed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef void (*nvtx_fn)(void);
typedef const void *(*get_export_table_t)(uint32_t id);
typedef struct {
    size_t struct_size;
    int (*get_module_function_table)(int module, nvtx_fn ***out_table, unsigned int *out_size);
} callbacks_table;
typedef struct {
    uint16_t version, size;
    uint32_t category;
    int32_t color_type;
    uint32_t color;
    int32_t payload_type, reserved0;
    uint64_t payload;
    int32_t message_type;
    const char *message;
} event_attributes;

static FILE *out;
static int depth;

static const char *ascii(const event_attributes *a) {
    return (a && a->message_type == 1 && a->message) ? a->message : "<not ascii>";
}
static int push_a(const char *m) { fprintf(out, "push %d %s\n", depth, m); fflush(out); return depth++; }
static int push_ex(const event_attributes *a) {
    fprintf(out, "pushex %d %08x %s\n", depth, a->color_type == 1 ? a->color : 0u, ascii(a));
    fflush(out);
    return depth++;
}
static int pop(void) { --depth; fprintf(out, "pop %d\n", depth); fflush(out); return depth; }
static void mark_a(const char *m) { fprintf(out, "mark %d %s\n", depth, m); fflush(out); }
static void name_cu_stream_a(void *stream, const char *name) {
    fprintf(out, "stream %p %s\n", stream, name);
    fflush(out);
}
static void *domain_create_a(const char *name) {
    fprintf(out, "domain %s\n", name);
    fflush(out);
    return (void *)name; /* any non-null handle */
}
static int domain_push_ex(void *domain, const event_attributes *a) {
    (void)domain;
    fprintf(out, "dpush %d %s\n", depth, ascii(a));
    fflush(out);
    return depth++;
}
static int domain_pop(void *domain) { (void)domain; return pop(); }

static int set(nvtx_fn **table, unsigned int size, unsigned int id, nvtx_fn f) {
    if (id >= size || !table[id]) return 0;
    *table[id] = f;
    return 1;
}

int InitializeInjectionNvtx2(get_export_table_t get_export_table) {
    const char *path = getenv("GASWORKS_NVTX_RECORD");
    if (!path || !(out = fopen(path, "w"))) return 0;
    const callbacks_table *cb = (const callbacks_table *)get_export_table(1);
    if (!cb || cb->struct_size < sizeof(callbacks_table)) return 0;
    nvtx_fn **table;
    unsigned int size;
    /* module 1 = CORE: MarkA 2, RangePushEx 8, RangePushA 9, RangePop 11 */
    if (!cb->get_module_function_table(1, &table, &size)) return 0;
    fprintf(out, "init core %u\n", size);
    if (!(set(table, size, 2, (nvtx_fn)mark_a) && set(table, size, 8, (nvtx_fn)push_ex) &&
          set(table, size, 9, (nvtx_fn)push_a) && set(table, size, 11, (nvtx_fn)pop)))
        return 0;
    /* module 2 = CUDA: NameCuStreamA 5 */
    if (cb->get_module_function_table(2, &table, &size)) set(table, size, 5, (nvtx_fn)name_cu_stream_a);
    /* module 5 = CORE2: DomainRangePushEx 4, DomainRangePop 5, DomainCreateA 12 */
    if (cb->get_module_function_table(5, &table, &size)) {
        set(table, size, 4, (nvtx_fn)domain_push_ex);
        set(table, size, 5, (nvtx_fn)domain_pop);
        set(table, size, 12, (nvtx_fn)domain_create_a);
    }
    fflush(out);
    return 1;
}
