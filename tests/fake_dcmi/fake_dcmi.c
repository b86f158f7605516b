/*
 * A fake libdcmi.so for the tests.
 *
 * It exports the DCMI functions the plugin's binding uses, compiled against the
 * binding's own declarations (dcmi_cdef.h is written from backends/dcmi/build_ffi.py),
 * so the prototypes and struct layouts are the ones the cffi binding uses, and the
 * static asserts below hold them to the sizes of the DCMI header.
 *
 * The node it pretends to be is a scenario file, named by FAKE_DCMI_SCENARIO and
 * written by tests/fake_dcmi/scenario_file.py from a backends.fake FakeScenario.
 * The file is re-read whenever it changes. It reproduces the driver's habits:
 * -8005 before dcmi_init, card ids as given (slot numbers), the MCU one past the
 * last NPU (-8255 for its logic id), -8001 for a short list, -8255 for
 * memory_info_v3 on 910B/A3, -8255 for the PCIe and IP queries on SoC boards (310B),
 * -8023 for the IP of a RoCE port without one, subscription only where the scenario
 * allows it, and injected errors, latency and hangs. A hang waits with the library's
 * lock released, so it stalls its own call only. A chip's storm floods its subscribers
 * with events at the scenario's rate, through the same event thread.
 *
 * What DCMI calls change (vNPUs made and destroyed, chips resetting) lives in the
 * driver-state file beside the scenario (<scenario>.driver-state, the format of
 * backends/fake/driver_state.py), so it outlives the process as a real driver's does:
 * a reset takes the chip's reset_ms, its boot status going 0, 1, 2, 3 then 16, and
 * every call about it but the driver's own tables answers -8012 meanwhile; vNPUs are
 * made within the chip's room and templates, and listed beside the scenario's own.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "dcmi_cdef.h"

_Static_assert(sizeof(struct dcmi_chip_info_v2) == 132, "dcmi_chip_info_v2 is 132 bytes");
_Static_assert(sizeof(struct dcmi_soc_total_resource) == 360, "dcmi_soc_total_resource is 360 bytes");
_Static_assert(sizeof(struct dcmi_hbm_info) == 32, "dcmi_hbm_info is 32 bytes");
_Static_assert(sizeof(struct dcmi_get_memory_info_stru) == 112, "dcmi_get_memory_info_stru is 112 bytes");
_Static_assert(sizeof(struct dcmi_event_filter) == 48, "dcmi_event_filter is 48 bytes");
_Static_assert(sizeof(struct dcmi_event) == 360, "dcmi_event is 360 bytes");
_Static_assert(sizeof(struct dcmi_pcie_info_all) == 64, "dcmi_pcie_info_all is 64 bytes");
_Static_assert(sizeof(struct dcmi_ip_addr) == 20, "dcmi_ip_addr is 20 bytes");
_Static_assert(sizeof(struct dcmi_vdev_query_stru) == 264, "dcmi_vdev_query_stru is 264 bytes");
_Static_assert(sizeof(struct dcmi_ecc_info) == 36, "dcmi_ecc_info is 36 bytes (9 fields)");
_Static_assert(sizeof(struct dcmi_spod_info) == 48, "dcmi_spod_info is 48 bytes");
_Static_assert(sizeof(struct dcmi_multi_utilization_info) == 48, "dcmi_multi_utilization_info is 48 bytes");
_Static_assert(sizeof(struct dcmi_proc_mem_info) == 16, "dcmi_proc_mem_info is 16 bytes");
_Static_assert(sizeof(struct dcmi_create_vdev_res_stru) == 104, "dcmi_create_vdev_res_stru is 104 bytes");
_Static_assert(sizeof(struct dcmi_create_vdev_out) == 52, "dcmi_create_vdev_out is 52 bytes");

enum {
    OK = 0, INVALID_PARAMETER = -8001, INNER_ERR = -8005, NOT_READY = -8012, RESOURCE_OCCUPIED = -8020,
    CONFIG_INFO_NOT_EXIST = -8023, NOT_SUPPORT = -8255
};
enum { MAX_CHIPS = 256, MAX_FAULTS = 256, MAX_EVENTS = 64, MAX_VDEVS = 32, TEXT = 32, VDEV_NAME = 16 };
enum { MAX_STORM_STEPS = 16, STORM_BATCH = 1000 /* a storm's events per look at most, as the Python fake */ };
enum { POLL_US = 10000, HUAWEI_PCI_VENDOR = 0x19e5 };
enum { MAX_TEMPLATES = 16, MEDIA = 5, MAX_USAGE = 64, MAX_ECC = 4, ECC_FIELDS = 9, FREQ_TYPES = 13 };
enum { MAX_MADE = 2048, MAX_GONE = 1024, ALL_VDEVS = 0xFFFF, AUTO_ID = -1 /* 0xFFFFFFFF */ };

/* The operations a scenario can fail or hang: the names of backends.fake.scenario.Operation.
   OP_OTHER stands for calls no operation names (other dcmi_get_device_info commands): never failed or hung. */
enum op {
    OP_INIT, OP_DRIVER_VERSION, OP_CARD_LIST, OP_DEVICE_COUNT, OP_LOGIC_ID, OP_PHY_ID, OP_CHIP_INFO,
    OP_TOTAL_AICORE, OP_HEALTH, OP_ERROR_CODES, OP_HBM_INFO, OP_MEMORY_INFO, OP_PCIE_ADDRESS, OP_DEVICE_IP,
    OP_VDEV_INFO, OP_SUBSCRIBE_FAULTS, OP_TEMPERATURE, OP_POWER, OP_BOARD_POWER, OP_VOLTAGE, OP_FREQUENCY,
    OP_UTILIZATION, OP_MULTI_UTILIZATION, OP_MULTI_UTILIZATION_PERIOD, OP_ECC_INFO, OP_NETWORK_HEALTH,
    OP_DIE_ID, OP_PROCESSES, OP_RESET, OP_BOOT_STATUS, OP_BROTHER_CARD, OP_OUTBAND_CHANNEL_STATE,
    OP_SUPER_POD_INFO, OP_VDEV_ACTIVITY, OP_CREATE_VDEV, OP_DESTROY_VDEV, OP_AFFINITY_CPU, OP_COUNT,
    OP_OTHER = OP_COUNT
};
static const char *const OP_NAMES[OP_COUNT] = {
    "init", "driver_version", "card_list", "device_count", "logic_id", "phy_id", "chip_info",
    "total_aicore", "health", "error_codes", "hbm_info", "memory_info", "pcie_address", "device_ip",
    "vdev_info", "subscribe_faults", "temperature", "power", "board_power", "voltage", "frequency",
    "utilization", "multi_utilization", "multi_utilization_period", "ecc_info", "network_health",
    "die_id", "processes", "reset", "boot_status", "brother_card", "outband_channel_state",
    "super_pod_info", "vdev_activity", "create_vdev", "destroy_vdev", "affinity_cpu",
};

/* What a resetting chip still answers (backends.fake.scenario.ANSWERED_WHILE_RESETTING). */
static int answered_while_resetting(enum op op) {
    return op == OP_LOGIC_ID || op == OP_PHY_ID || op == OP_PCIE_ADDRESS ||
           op == OP_BOOT_STATUS || op == OP_BROTHER_CARD || op == OP_OUTBAND_CHANNEL_STATE;
}

/* A fault event of the scenario, delivered once whether or not its code is among the chip's faults. */
struct event { int serial; unsigned int code; unsigned char severity, assertion; };

/* A storm: count events at rate a second, event i being steps[i % nsteps] numbered serial + i. */
struct storm { int serial, nsteps; double rate; long long count; struct event steps[MAX_STORM_STEPS]; };

/* A static vNPU: what VDEV_MNG / GET_VDEV_RESOURCE answers. */
struct vdev {
    unsigned int id, vfg, status, used;
    char name[VDEV_NAME];
    float aic;
    unsigned long long memory_mb;
};

/* A template the driver accepts on a chip, and what one vNPU of it takes. */
struct template {
    char name[TEXT];
    float aic;
    unsigned int aicpu;
    unsigned long long memory_mb;
    int has_media;
    unsigned int media[MEDIA]; /* VPC, JPEGD, JPEGE, VENC, VDEC */
};

/* What a container does with one vNPU: in use (destroy answers -8020), its activity. */
struct usage { unsigned int id, in_use, aicore_util; unsigned long long used_mb; };

struct ecc { int kind, enable_flag; unsigned int counts[ECC_FIELDS - 1]; };
struct proc { int pid; unsigned long bytes; };

struct chip {
    int card, device, logic, phy;
    unsigned int health, aicore_cnt;
    char type[TEXT], name[TEXT], ver[TEXT], npu[TEXT];
    int has_aic;
    float aic;
    unsigned long long memory_mb;
    unsigned char severity;
    int nfaults;
    unsigned int faults[MAX_FAULTS];
    int nevents;
    struct event events[MAX_EVENTS];
    int has_storm;
    struct storm storm;
    int nvdevs;
    struct vdev vdevs[MAX_VDEVS];
    int has_pcie;
    int pcie_domain;
    unsigned int pcie_bus, pcie_device, pcie_function;
    int ip_family; /* 4 or 6; 0: the RoCE port has no address */
    unsigned char ip[16];
    /* telemetry: a has_* of 0 means the driver answers -8255 */
    int temperature, power, board_power;
    unsigned int voltage;
    int has_freq[FREQ_TYPES];
    unsigned int freq[FREQ_TYPES];
    int has_util[15];
    unsigned int util[15];
    int has_multi;
    unsigned int multi[4]; /* aic, aiv, aicore, npu */
    int has_hbm;
    unsigned long long hbm_used_mb;
    unsigned int hbm_freq, hbm_bw;
    int hbm_temp;
    int has_ddr;
    unsigned long long ddr_used_mb;
    unsigned int ddr_freq, ddr_util;
    int necc;
    struct ecc ecc[MAX_ECC];
    int has_net;
    unsigned int net;
    int has_die[2];
    unsigned int die[2][5]; /* NDIE, VDIE */
    char affinity[TEXT];    /* the CPU-affinity cpulist; empty: -8255 */
    int nprocs;
    struct proc procs[32];
    /* hot reset */
    long long reset_ms;
    int clears, reset_mode; /* reset_mode 0: the chip; 1: its whole card; 2: refused (-8255) */
    int a3, has_brother, brother, has_outband, outband;
    int has_spod;
    unsigned int spod[6];
    /* vNPUs: has_room 0 means the driver makes none (-8255) */
    int has_room, has_media;
    float room_aic;
    unsigned int room_aicpu, max_vdevs, first_id, last_id, media[MEDIA];
    unsigned long long room_memory_mb;
    int ntemplates;
    struct template templates[MAX_TEMPLATES];
    int nusage;
    struct usage usage[MAX_USAGE];
    int errors[OP_COUNT + 1]; /* injected return code per operation; 0 = none */
    int hang[OP_COUNT + 1];
};

struct scenario {
    int api; /* 2: a 950 node, whose driver answers dcmiv2_init and -8255 to dcmi_init */
    char driver_version[TEXT];
    double latency_ms;
    int subscribe;
    char vdev_dir[1024];
    int errors[OP_COUNT + 1];
    int hang[OP_COUNT + 1];
    int nchips;
    struct chip chips[MAX_CHIPS];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* In force; being read. Only the chips a scenario has are ever touched, so that the fake costs a
   plugin's process the memory of its node's chips, not of the 256 it could hold. */
static struct scenario now, parsed;
static int loaded;
static int initialised; /* 0, or the API dcmi_init (1) or dcmiv2_init (2) brought up */
static __thread int in_v2; /* this thread is inside a dcmiv2_* call (which runs the v1 code of its chip) */
static char loaded_path[4096];
static struct stat loaded_stat;

/* ---- reading the scenario file ------------------------------------------------------- */

static int op_named(const char *name) {
    for (int op = 0; op < OP_COUNT; op++)
        if (strcmp(OP_NAMES[op], name) == 0) return op;
    return -1;
}

static void copy_text(char *to, const char *from) {
    snprintf(to, TEXT, "%s", from);
}

/* "health:-8012,init:-8005" */
static int parse_errors(char *value, int errors[OP_COUNT + 1]) {
    char *save = NULL;
    for (char *item = strtok_r(value, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(item, ':');
        if (!colon) return -1;
        *colon = '\0';
        int op = op_named(item);
        if (op < 0) return -1;
        errors[op] = (int)strtol(colon + 1, NULL, 10);
    }
    return 0;
}

/* "health,init" */
static int parse_hang(char *value, int hang[OP_COUNT + 1]) {
    char *save = NULL;
    for (char *item = strtok_r(value, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        int op = op_named(item);
        if (op < 0) return -1;
        hang[op] = 1;
    }
    return 0;
}

/* "80E01801,80C98006" */
static int parse_faults(char *value, struct chip *chip) {
    char *save = NULL;
    for (char *item = strtok_r(value, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        if (chip->nfaults == MAX_FAULTS) return -1;
        chip->faults[chip->nfaults++] = (unsigned int)strtoul(item, NULL, 16);
    }
    return 0;
}

/* "7:80E01801:3:1,8:80C98006:0:2": serial, code (hex), severity, assertion */
static int parse_events(char *value, struct chip *chip) {
    char *save = NULL;
    for (char *item = strtok_r(value, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        if (chip->nevents == MAX_EVENTS) return -1;
        struct event *e = &chip->events[chip->nevents++];
        if (sscanf(item, "%d:%x:%hhu:%hhu", &e->serial, &e->code, &e->severity, &e->assertion) != 4) return -1;
    }
    return 0;
}

/* "1:10000.0:100000:81078603/2/1+81078603/2/0": serial, rate, count, then steps of code (hex)/severity/assertion */
static int parse_storm(char *value, struct chip *chip) {
    struct storm *storm = &chip->storm;
    int used = 0;
    if (sscanf(value, "%d:%lf:%lld:%n", &storm->serial, &storm->rate, &storm->count, &used) != 3 || !used)
        return -1;
    if (storm->rate <= 0 || storm->count < 1) return -1;
    char *save = NULL;
    for (char *item = strtok_r(value + used, "+", &save); item; item = strtok_r(NULL, "+", &save)) {
        if (storm->nsteps == MAX_STORM_STEPS) return -1;
        struct event *step = &storm->steps[storm->nsteps++];
        if (sscanf(item, "%x/%hhu/%hhu", &step->code, &step->severity, &step->assertion) != 3) return -1;
    }
    chip->has_storm = storm->nsteps > 0;
    return chip->has_storm ? 0 : -1;
}

/* "100:vir02:2.0:6144:0:0:0,...": id, template, aicore, memory (MB), vfg id, status, in use */
static int parse_vdevs(char *value, struct chip *chip) {
    char *save = NULL;
    for (char *item = strtok_r(value, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        if (chip->nvdevs == MAX_VDEVS) return -1;
        struct vdev *v = &chip->vdevs[chip->nvdevs++];
        if (sscanf(item, "%u:%15[^:]:%f:%llu:%u:%u:%u", &v->id, v->name, &v->aic, &v->memory_mb, &v->vfg,
                   &v->status, &v->used) != 7)
            return -1;
    }
    return 0;
}

/* "0000:3b:00.0" */
static int parse_pcie(const char *value, struct chip *chip) {
    if (sscanf(value, "%x:%x:%x.%x", (unsigned int *)&chip->pcie_domain, &chip->pcie_bus, &chip->pcie_device,
               &chip->pcie_function) != 4)
        return -1;
    chip->has_pcie = 1;
    return 0;
}

/* "192.0.2.10" or "2001:db8::10" */
static int parse_ip(const char *value, struct chip *chip) {
    if (inet_pton(AF_INET, value, chip->ip) == 1) chip->ip_family = 4;
    else if (inet_pton(AF_INET6, value, chip->ip) == 1) chip->ip_family = 6;
    else return -1;
    return 0;
}

/* "1:2133,7:1000": a value per DCMI type (frequency or utilization input type) */
static int parse_typed(char *value, int *has, unsigned int *values, int size) {
    char *save = NULL;
    for (char *item = strtok_r(value, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        int type;
        unsigned int figure;
        if (sscanf(item, "%d:%u", &type, &figure) != 2 || type < 0 || type >= size) return -1;
        has[type] = 1;
        values[type] = figure;
    }
    return 0;
}

/* "2:1:0:0:0:0:0:0:0:0,...": memory kind, then the 9 fields of struct dcmi_ecc_info */
static int parse_ecc(char *value, struct chip *chip) {
    char *save = NULL;
    for (char *item = strtok_r(value, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        if (chip->necc == MAX_ECC) return -1;
        struct ecc *e = &chip->ecc[chip->necc++];
        unsigned int *c = e->counts;
        if (sscanf(item, "%d:%d:%u:%u:%u:%u:%u:%u:%u:%u", &e->kind, &e->enable_flag, &c[0], &c[1], &c[2], &c[3],
                   &c[4], &c[5], &c[6], &c[7]) != 10)
            return -1;
    }
    return 0;
}

/* "4242:536870912,...": pid, bytes */
static int parse_procs(char *value, struct chip *chip) {
    char *save = NULL;
    for (char *item = strtok_r(value, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        if (chip->nprocs == 32) return -1;
        struct proc *q = &chip->procs[chip->nprocs++];
        if (sscanf(item, "%d:%lu", &q->pid, &q->bytes) != 2) return -1;
    }
    return 0;
}

/* "vir02:2.0:2:6144:3:4:2:1:3,...": name, AI cores, AI CPUs, memory (MB)[, the 5 media engines] */
static int parse_templates(char *value, struct chip *chip) {
    char *save = NULL;
    for (char *item = strtok_r(value, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        if (chip->ntemplates == MAX_TEMPLATES) return -1;
        struct template *t = &chip->templates[chip->ntemplates++];
        unsigned int *m = t->media;
        int n = sscanf(item, "%31[^:]:%f:%u:%llu:%u:%u:%u:%u:%u", t->name, &t->aic, &t->aicpu, &t->memory_mb, &m[0],
                       &m[1], &m[2], &m[3], &m[4]);
        if (n != 4 && n != 9) return -1;
        t->has_media = n == 9;
    }
    return 0;
}

/* "100:1:30:512,...": vNPU id, in use, AI-core utilization, memory used (MB) */
static int parse_usage(char *value, struct chip *chip) {
    char *save = NULL;
    for (char *item = strtok_r(value, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        if (chip->nusage == MAX_USAGE) return -1;
        struct usage *u = &chip->usage[chip->nusage++];
        if (sscanf(item, "%u:%u:%u:%llu", &u->id, &u->in_use, &u->aicore_util, &u->used_mb) != 4) return -1;
    }
    return 0;
}

/* "1:2:3": exactly n numbers in base 10 or 16, joined by ':' */
static int parse_words(const char *value, unsigned int *words, int n, int base) {
    const char *at = value;
    for (int i = 0; i < n; i++) {
        char *end;
        errno = 0;
        unsigned long word = strtoul(at, &end, base);
        if (end == at || errno != 0 || word > 0xFFFFFFFFUL || *end != (i + 1 < n ? ':' : '\0')) return -1;
        words[i] = (unsigned int)word;
        at = end + 1;
    }
    return 0;
}

/* "aic:aicpu:memory_mb:max_vdevs:first_id:last_id" */
static int parse_room(const char *value, struct chip *chip) {
    if (sscanf(value, "%f:%u:%llu:%u:%u:%u", &chip->room_aic, &chip->room_aicpu, &chip->room_memory_mb,
               &chip->max_vdevs, &chip->first_id, &chip->last_id) != 6)
        return -1;
    chip->has_room = 1;
    return 0;
}

static int parse_node_field(const char *key, char *value, struct scenario *s) {
    if (strcmp(key, "driver_version") == 0) copy_text(s->driver_version, value);
    else if (strcmp(key, "vdev_dir") == 0) snprintf(s->vdev_dir, sizeof s->vdev_dir, "%s", value);
    else if (strcmp(key, "latency_ms") == 0) s->latency_ms = strtod(value, NULL);
    else if (strcmp(key, "subscribe") == 0) s->subscribe = atoi(value);
    else if (strcmp(key, "api") == 0) s->api = atoi(value);
    else if (strcmp(key, "errors") == 0) return parse_errors(value, s->errors);
    else if (strcmp(key, "hang") == 0) return parse_hang(value, s->hang);
    else return -1;
    return 0;
}

static int parse_chip_field(const char *key, char *value, struct chip *c) {
    if (strcmp(key, "card") == 0) c->card = atoi(value);
    else if (strcmp(key, "device") == 0) c->device = atoi(value);
    else if (strcmp(key, "logic") == 0) c->logic = atoi(value);
    else if (strcmp(key, "phy") == 0) c->phy = atoi(value);
    else if (strcmp(key, "health") == 0) c->health = (unsigned int)strtoul(value, NULL, 10);
    else if (strcmp(key, "type") == 0) copy_text(c->type, value);
    else if (strcmp(key, "name") == 0) copy_text(c->name, value);
    else if (strcmp(key, "ver") == 0) copy_text(c->ver, value);
    else if (strcmp(key, "npu") == 0) copy_text(c->npu, value);
    else if (strcmp(key, "aicore_cnt") == 0) c->aicore_cnt = (unsigned int)strtoul(value, NULL, 10);
    else if (strcmp(key, "aic") == 0) c->has_aic = 1, c->aic = strtof(value, NULL);
    else if (strcmp(key, "memory_mb") == 0) c->memory_mb = strtoull(value, NULL, 10);
    else if (strcmp(key, "severity") == 0) c->severity = (unsigned char)atoi(value);
    else if (strcmp(key, "faults") == 0) return parse_faults(value, c);
    else if (strcmp(key, "events") == 0) return parse_events(value, c);
    else if (strcmp(key, "storm") == 0) return parse_storm(value, c);
    else if (strcmp(key, "vdevs") == 0) return parse_vdevs(value, c);
    else if (strcmp(key, "pcie") == 0) return parse_pcie(value, c);
    else if (strcmp(key, "ip") == 0) return parse_ip(value, c);
    else if (strcmp(key, "temp") == 0) c->temperature = atoi(value);
    else if (strcmp(key, "power") == 0) c->power = atoi(value);
    else if (strcmp(key, "board_power") == 0) c->board_power = atoi(value);
    else if (strcmp(key, "voltage") == 0) c->voltage = (unsigned int)strtoul(value, NULL, 10);
    else if (strcmp(key, "freq") == 0) return parse_typed(value, c->has_freq, c->freq, FREQ_TYPES);
    else if (strcmp(key, "util") == 0) return parse_typed(value, c->has_util, c->util, 15);
    else if (strcmp(key, "multi") == 0) return c->has_multi = 1, parse_words(value, c->multi, 4, 10);
    else if (strcmp(key, "hbm") == 0) {
        c->has_hbm = 1;
        return sscanf(value, "%llu:%u:%d:%u", &c->hbm_used_mb, &c->hbm_freq, &c->hbm_temp, &c->hbm_bw) == 4 ? 0 : -1;
    } else if (strcmp(key, "ddr") == 0) {
        c->has_ddr = 1;
        return sscanf(value, "%llu:%u:%u", &c->ddr_used_mb, &c->ddr_freq, &c->ddr_util) == 3 ? 0 : -1;
    } else if (strcmp(key, "ecc") == 0) return parse_ecc(value, c);
    else if (strcmp(key, "net") == 0) c->has_net = 1, c->net = (unsigned int)strtoul(value, NULL, 10);
    else if (strcmp(key, "ndie") == 0) return c->has_die[NDIE] = 1, parse_words(value, c->die[NDIE], 5, 16);
    else if (strcmp(key, "vdie") == 0) return c->has_die[VDIE] = 1, parse_words(value, c->die[VDIE], 5, 16);
    else if (strcmp(key, "affinity") == 0) copy_text(c->affinity, value);
    else if (strcmp(key, "procs") == 0) return parse_procs(value, c);
    else if (strcmp(key, "reset_ms") == 0) c->reset_ms = strtoll(value, NULL, 10);
    else if (strcmp(key, "clears") == 0) c->clears = atoi(value);
    else if (strcmp(key, "reset_mode") == 0) c->reset_mode = atoi(value);
    else if (strcmp(key, "a3") == 0) c->a3 = atoi(value);
    else if (strcmp(key, "brother") == 0) c->has_brother = 1, c->brother = atoi(value);
    else if (strcmp(key, "outband") == 0) c->has_outband = 1, c->outband = atoi(value);
    else if (strcmp(key, "spod") == 0) return c->has_spod = 1, parse_words(value, c->spod, 6, 10);
    else if (strcmp(key, "room") == 0) return parse_room(value, c);
    else if (strcmp(key, "media") == 0) return c->has_media = 1, parse_words(value, c->media, MEDIA, 10);
    else if (strcmp(key, "templates") == 0) return parse_templates(value, c);
    else if (strcmp(key, "usage") == 0) return parse_usage(value, c);
    else if (strcmp(key, "errors") == 0) return parse_errors(value, c->errors);
    else if (strcmp(key, "hang") == 0) return parse_hang(value, c->hang);
    else return -1;
    return 0;
}

/* One line: "node key=value ..." or "chip key=value ...". Returns 0, or -1 when malformed. */
static int parse_line(char *line, struct scenario *s) {
    char *save = NULL;
    char *kind = strtok_r(line, " \t\r\n", &save);
    if (!kind || kind[0] == '#') return 0;
    struct chip *chip = NULL;
    if (strcmp(kind, "chip") == 0) {
        if (s->nchips == MAX_CHIPS) return -1;
        chip = &s->chips[s->nchips++];
        memset(chip, 0, sizeof *chip);
    } else if (strcmp(kind, "node") != 0) {
        return -1;
    }
    for (char *field = strtok_r(NULL, " \t\r\n", &save); field; field = strtok_r(NULL, " \t\r\n", &save)) {
        char *equals = strchr(field, '=');
        if (!equals) return -1;
        *equals = '\0';
        int bad = chip ? parse_chip_field(field, equals + 1, chip) : parse_node_field(field, equals + 1, s);
        if (bad) return -1;
    }
    return 0;
}

static int parse_file(const char *path, struct scenario *s) {
    FILE *file = fopen(path, "r");
    if (!file) {
        fprintf(stderr, "fake_dcmi: cannot read %s (%s); keeping the previous scenario\n", path, strerror(errno));
        return -1;
    }
    memset(s, 0, offsetof(struct scenario, chips)); /* each chip is cleared as its line is read */
    char line[8192];
    int number = 0, bad = 0;
    while (!bad && fgets(line, sizeof line, file)) {
        number++;
        bad = parse_line(line, s);
    }
    fclose(file);
    if (bad) fprintf(stderr, "fake_dcmi: %s line %d is malformed; keeping the previous scenario\n", path, number);
    return bad;
}

static int same_file(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

static void state_refresh(void);

/* With the lock held: re-read the scenario if its path or the file changed, and the driver's state. */
static void refresh(void) {
    const char *path = getenv("FAKE_DCMI_SCENARIO");
    struct stat st;
    if (!path || stat(path, &st) != 0) return;
    if (loaded && strcmp(path, loaded_path) == 0 && same_file(&st, &loaded_stat)) {
        state_refresh();
        return;
    }
    snprintf(loaded_path, sizeof loaded_path, "%s", path);
    loaded_stat = st;
    if (parse_file(path, &parsed) == 0) {
        memcpy(&now, &parsed, offsetof(struct scenario, chips));
        memcpy(now.chips, parsed.chips, (size_t)parsed.nchips * sizeof parsed.chips[0]);
        loaded = 1;
    }
    if (loaded) state_refresh();
}

/* ---- the driver's own state: vNPUs made or destroyed, resets (backends/fake/driver_state.py) ---- */

struct made { int phy; unsigned int id, vfg; char template[TEXT]; float aic; unsigned long long memory_mb; };
struct gone { int phy; unsigned int id; };
struct reset { int phy; long long since_ns; unsigned long long scenario[4]; int count; };
struct driver_state {
    int nmade, ngone, nresets;
    struct made made[MAX_MADE];
    struct gone gone[MAX_GONE];
    struct reset resets[MAX_CHIPS];
};

static struct driver_state state;
static struct stat state_stat;
static int state_seen; /* state_stat describes the file state was read from (0: none read yet) */

static void state_file(char *path, size_t size, const char *suffix) {
    snprintf(path, size, "%s.driver-state%s", loaded_path, suffix);
}

static int parse_state_line(char *line, struct driver_state *d) {
    char kind[16];
    if (sscanf(line, "%15s", kind) != 1 || kind[0] == '#') return 0;
    if (strcmp(kind, "vdev") == 0 && d->nmade < MAX_MADE) {
        struct made *m = &d->made[d->nmade];
        if (sscanf(line, "vdev phy=%d id=%u template=%31s aic=%f memory_mb=%llu vfg=%u", &m->phy, &m->id, m->template,
                   &m->aic, &m->memory_mb, &m->vfg) != 6)
            return -1;
        d->nmade++;
    } else if (strcmp(kind, "gone") == 0 && d->ngone < MAX_GONE) {
        struct gone *g = &d->gone[d->ngone];
        if (sscanf(line, "gone phy=%d id=%u", &g->phy, &g->id) != 2) return -1;
        d->ngone++;
    } else if (strcmp(kind, "reset") == 0 && d->nresets < MAX_CHIPS) {
        struct reset *r = &d->resets[d->nresets];
        unsigned long long *st = r->scenario;
        r->count = 1; /* a line without a count: one reset */
        if (sscanf(line, "reset phy=%d since_ns=%lld scenario=%llu:%llu:%llu:%llu count=%d", &r->phy, &r->since_ns,
                   &st[0], &st[1], &st[2], &st[3], &r->count) < 6)
            return -1;
        d->nresets++;
    } else {
        return -1;
    }
    return 0;
}

/* With the lock held: the state as the file has it (empty when there is none). */
static void state_load(struct driver_state *d) {
    char path[4200];
    state_file(path, sizeof path, "");
    memset(d, 0, sizeof *d);
    FILE *file = fopen(path, "r");
    if (!file) return;
    char line[512];
    int number = 0;
    while (fgets(line, sizeof line, file)) {
        number++;
        if (parse_state_line(line, d) != 0)
            fprintf(stderr, "fake_dcmi: %s line %d is unreadable; it is skipped\n", path, number);
    }
    fclose(file);
}

/* With the lock held: re-read the state if another process (or library) changed its file. */
static void state_refresh(void) {
    char path[4200];
    struct stat st;
    state_file(path, sizeof path, "");
    int exists = stat(path, &st) == 0;
    if (!exists) {
        if (state_seen) memset(&state, 0, sizeof state);
        state_seen = 0;
        return;
    }
    if (state_seen && same_file(&st, &state_stat)) return;
    state_load(&state);
    state_stat = st;
    state_seen = 1;
}

/* Start a change: other writers held off (flock), the state read afresh. Returns the lock's fd or -1. */
static int state_begin(void) {
    char path[4200];
    state_file(path, sizeof path, ".lock");
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    if (flock(fd, LOCK_EX) != 0) {
        close(fd);
        return -1;
    }
    state_load(&state);
    return fd;
}

static void state_end(int fd) {
    flock(fd, LOCK_UN);
    close(fd);
    state_seen = 0; /* read again next time: the file is the truth */
}

/* Write the state and end the change; returns OK or INNER_ERR. */
static int state_commit(int fd) {
    char path[4200], temporary[4300];
    state_file(path, sizeof path, "");
    snprintf(temporary, sizeof temporary, "%s.%d.tmp", path, (int)getpid());
    FILE *file = fopen(temporary, "w");
    int code = file ? OK : INNER_ERR;
    if (file) {
        fprintf(file, "# fake DCMI driver state: vNPUs made or destroyed, chips resetting\n");
        for (int i = 0; i < state.nmade; i++) {
            const struct made *m = &state.made[i];
            fprintf(file, "vdev phy=%d id=%u template=%s aic=%.9g memory_mb=%llu vfg=%u\n", m->phy, m->id, m->template,
                    (double)m->aic, m->memory_mb, m->vfg);
        }
        for (int i = 0; i < state.ngone; i++)
            fprintf(file, "gone phy=%d id=%u\n", state.gone[i].phy, state.gone[i].id);
        for (int i = 0; i < state.nresets; i++) {
            const struct reset *r = &state.resets[i];
            fprintf(file, "reset phy=%d since_ns=%lld scenario=%llu:%llu:%llu:%llu count=%d\n", r->phy, r->since_ns,
                    r->scenario[0], r->scenario[1], r->scenario[2], r->scenario[3], r->count);
        }
        if (fclose(file) != 0 || rename(temporary, path) != 0) code = INNER_ERR;
    }
    state_end(fd);
    return code;
}

static long long monotonic_ns(void) {
    struct timespec clock;
    clock_gettime(CLOCK_MONOTONIC, &clock);
    return (long long)clock.tv_sec * 1000000000LL + clock.tv_nsec;
}

/* The stamp of the scenario in force, as Python's os.stat gives it. */
static void scenario_stamp(unsigned long long stamp[4]) {
    stamp[0] = (unsigned long long)loaded_stat.st_ino;
    stamp[1] = (unsigned long long)loaded_stat.st_size;
    stamp[2] = (unsigned long long)loaded_stat.st_mtim.tv_sec * 1000000000ULL + (unsigned long long)loaded_stat.st_mtim.tv_nsec;
    stamp[3] = (unsigned long long)loaded_stat.st_ctim.tv_sec * 1000000000ULL + (unsigned long long)loaded_stat.st_ctim.tv_nsec;
}

static const struct reset *reset_of(const struct chip *chip) {
    for (int i = 0; i < state.nresets; i++)
        if (state.resets[i].phy == chip->phy) return &state.resets[i];
    return NULL;
}

/* How far into its reset the chip is, 0 to 1 (1: back, or never reset). */
static double reset_progress(const struct chip *chip) {
    const struct reset *r = reset_of(chip);
    if (!r || chip->reset_ms <= 0) return 1.0;
    double progress = (double)(monotonic_ns() - r->since_ns) / ((double)chip->reset_ms * 1e6);
    return progress < 1.0 ? progress : 1.0;
}

static int resetting(const struct chip *chip) {
    return reset_of(chip) && reset_progress(chip) < 1.0;
}

/* A reset cleared the chip's faults, and the scenario has not been written since. */
static int repaired(const struct chip *chip) {
    const struct reset *r = reset_of(chip);
    if (!r || !chip->clears || reset_progress(chip) < 1.0) return 0;
    unsigned long long now_stamp[4];
    scenario_stamp(now_stamp);
    return memcmp(now_stamp, r->scenario, sizeof now_stamp) == 0;
}

/* ---- one call: latency, hangs, then injected errors -------------------------------------- */

static struct chip *find(int card, int device) {
    for (int i = 0; i < now.nchips; i++)
        if (now.chips[i].card == card && now.chips[i].device == device) return &now.chips[i];
    return NULL;
}

static struct chip *find_logic(int logic) {
    for (int i = 0; i < now.nchips; i++)
        if (now.chips[i].logic == logic) return &now.chips[i];
    return NULL;
}

static void pause_unlocked(long microseconds) {
    struct timespec delay = {microseconds / 1000000, (microseconds % 1000000) * 1000};
    pthread_mutex_unlock(&lock);
    nanosleep(&delay, NULL);
    pthread_mutex_lock(&lock);
    refresh();
}

/* A chip a call is about: by (card, device), or by logic id when card < 0. */
struct target { int card, device, logic; };
static const struct target NO_CHIP = {-1, -1, -1};

static struct chip *first_on_card(int card) {
    for (int i = 0; i < now.nchips; i++)
        if (now.chips[i].card == card) return &now.chips[i];
    return NULL;
}

/* device -1 names a card (its first chip stands for it) */
static struct chip *chip_of(struct target t) {
    if (t.card >= 0) return t.device < 0 ? first_on_card(t.card) : find(t.card, t.device);
    return t.logic >= 0 ? find_logic(t.logic) : NULL;
}

/* Takes the lock; returns 0 with the lock held, or the code the call must return (lock released). */
static int enter(enum op op, struct target t) {
    pthread_mutex_lock(&lock);
    refresh();
    if (loaded && now.latency_ms > 0) pause_unlocked((long)(now.latency_ms * 1000));
    for (;;) {
        struct chip *chip = chip_of(t);
        if (!now.hang[op] && !(chip && chip->hang[op])) break;
        pause_unlocked(POLL_US);
    }
    int code = OK;
    if (!loaded) {
        fprintf(stderr, "fake_dcmi: no scenario: set FAKE_DCMI_SCENARIO to a readable scenario file\n");
        code = INNER_ERR;
    } else if (op != OP_INIT && initialised != (in_v2 ? 2 : 1)) {
        code = INNER_ERR; /* "DCMI is not initialised" (in the API of this call) */
    } else {
        struct chip *chip = chip_of(t);
        code = chip && chip->errors[op] ? chip->errors[op] : now.errors[op];
    }
    if (code != OK) pthread_mutex_unlock(&lock);
    return code;
}

static int leave(int code) {
    pthread_mutex_unlock(&lock);
    return code;
}

#define ENTER(op, target)                    \
    do {                                     \
        int entered = enter((op), (target)); \
        if (entered != OK) return entered;   \
    } while (0)

/* ---- the DCMI functions ------------------------------------------------------------- */

/* dcmi_init (api 1) or dcmiv2_init (2): the other API's answers -8255 first of all (the driver looks at the
   chip before anything else), then the scenario's injected errors apply. */
static int init_api(int api) {
    pthread_mutex_lock(&lock);
    refresh();
    int other = loaded && (now.api == 2) != (api == 2);
    pthread_mutex_unlock(&lock);
    if (other) return NOT_SUPPORT;
    ENTER(OP_INIT, NO_CHIP);
    initialised = api;
    return leave(OK);
}

int dcmi_init(void) {
    return init_api(1);
}

int dcmi_get_driver_version(char *driver_ver, unsigned int len) {
    ENTER(OP_DRIVER_VERSION, NO_CHIP);
    if (!driver_ver || len <= strlen(now.driver_version)) return leave(INVALID_PARAMETER);
    strcpy(driver_ver, now.driver_version);
    return leave(OK);
}

static int cards(int out[MAX_CHIPS]) {
    int count = 0;
    for (int i = 0; i < now.nchips; i++) {
        int seen = 0;
        for (int j = 0; j < count; j++) seen |= out[j] == now.chips[i].card;
        if (!seen) out[count++] = now.chips[i].card;
    }
    return count;
}

static int int_order(const void *a, const void *b) {
    return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

int dcmi_get_card_list(int *card_num, int *card_list, int list_len) {
    ENTER(OP_CARD_LIST, NO_CHIP);
    int found[MAX_CHIPS];
    int count = cards(found);
    if (!card_num || !card_list || list_len <= 0 || count > list_len) return leave(INVALID_PARAMETER);
    qsort(found, (size_t)count, sizeof found[0], int_order);
    memcpy(card_list, found, (size_t)count * sizeof found[0]);
    *card_num = count;
    return leave(OK);
}

static int devices_on(int card) {
    int count = 0;
    for (int i = 0; i < now.nchips; i++) count += now.chips[i].card == card;
    return count;
}

int dcmi_get_device_num_in_card(int card_id, int *device_num) {
    ENTER(OP_DEVICE_COUNT, NO_CHIP);
    int count = devices_on(card_id);
    if (!device_num || count == 0) return leave(INVALID_PARAMETER);
    *device_num = count;
    return leave(OK);
}

int dcmi_get_device_logic_id(int *device_logic_id, int card_id, int device_id) {
    ENTER(OP_LOGIC_ID, ((struct target){card_id, device_id, -1}));
    struct chip *chip = find(card_id, device_id);
    if (!device_logic_id || card_id < 0 || device_id < 0) return leave(INVALID_PARAMETER);
    if (chip) {
        *device_logic_id = chip->logic;
        return leave(OK);
    }
    int count = devices_on(card_id);
    /* One past the last NPU is the MCU: it has no logic id. */
    return leave(count > 0 && device_id == count ? NOT_SUPPORT : INVALID_PARAMETER);
}

int dcmi_get_device_phyid_from_logicid(unsigned int logicid, unsigned int *phyid) {
    ENTER(OP_PHY_ID, ((struct target){-1, -1, (int)logicid}));
    struct chip *chip = find_logic((int)logicid);
    if (!chip || !phyid) return leave(INVALID_PARAMETER);
    *phyid = (unsigned int)chip->phy;
    return leave(OK);
}

/* Calls about one chip: an unknown (card, device) is -8001, a chip in a reset -8012. */
#define ENTER_CHIP(op, card, device, chip)                                 \
    ENTER((op), ((struct target){(card), (device), -1}));                  \
    struct chip *chip = find((card), (device));                            \
    if (!chip) return leave(INVALID_PARAMETER);                            \
    if (!answered_while_resetting(op) && resetting(chip)) return leave(NOT_READY)

int dcmi_get_device_chip_info_v2(int card_id, int device_id, struct dcmi_chip_info_v2 *chip_info) {
    ENTER_CHIP(OP_CHIP_INFO, card_id, device_id, chip);
    if (!chip_info) return leave(INVALID_PARAMETER);
    memset(chip_info, 0, sizeof *chip_info);
    memcpy(chip_info->chip_type, chip->type, TEXT);
    memcpy(chip_info->chip_name, chip->name, TEXT);
    memcpy(chip_info->chip_ver, chip->ver, TEXT);
    memcpy(chip_info->npu_name, chip->npu, TEXT);
    chip_info->aicore_cnt = chip->aicore_cnt;
    return leave(OK);
}

static int gone(const struct chip *chip, unsigned int id) {
    for (int i = 0; i < state.ngone; i++)
        if (state.gone[i].phy == chip->phy && state.gone[i].id == id) return 1;
    return 0;
}

static const struct usage *usage_of(const struct chip *chip, unsigned int id) {
    for (int i = 0; i < chip->nusage; i++)
        if (chip->usage[i].id == id) return &chip->usage[i];
    return NULL;
}

enum { MAX_VISIBLE = MAX_VDEVS + 16 };

/* The chip's vNPUs: the scenario's not destroyed, then those made through DCMI (state as it is now). */
static int visible_vdevs(const struct chip *chip, struct vdev out[MAX_VISIBLE]) {
    int n = 0;
    for (int i = 0; i < chip->nvdevs; i++)
        if (!gone(chip, chip->vdevs[i].id)) out[n++] = chip->vdevs[i];
    int statics = n;
    for (int i = 0; i < state.nmade && n < MAX_VISIBLE; i++) {
        const struct made *m = &state.made[i];
        int shadowed = 0;
        for (int j = 0; j < statics; j++) shadowed |= out[j].id == m->id;
        if (m->phy != chip->phy || shadowed) continue;
        struct vdev *v = &out[n++];
        memset(v, 0, sizeof *v);
        v->id = m->id;
        v->vfg = m->vfg;
        snprintf(v->name, sizeof v->name, "%s", m->template);
        v->aic = m->aic;
        v->memory_mb = m->memory_mb;
    }
    for (int i = 0; i < n; i++) {
        const struct usage *u = usage_of(chip, out[i].id);
        if (u && u->in_use) out[i].used = 1;
    }
    return n;
}

static const struct vdev *visible_vdev(const struct chip *chip, unsigned int id, struct vdev all[MAX_VISIBLE]) {
    int n = visible_vdevs(chip, all);
    for (int i = 0; i < n; i++)
        if (all[i].id == id) return &all[i];
    return NULL;
}

/* VDEV_MNG / GET_TOTAL_RESOURCE: the chip's AI cores and memory, and the ids of its vNPUs. */
static int total_resource(const struct chip *chip, void *buf, unsigned int *size) {
    struct dcmi_soc_total_resource *total = buf;
    if (!total || !size || *size < sizeof *total) return INVALID_PARAMETER;
    memset(total, 0, sizeof *total);
    total->computing.aic = chip->aic;
    total->computing.memory_size = chip->memory_mb;
    struct vdev all[MAX_VISIBLE];
    int n = visible_vdevs(chip, all);
    if (n > MAX_VDEVS) n = MAX_VDEVS; /* vdev_id[32] */
    total->vdev_num = (unsigned int)n;
    for (int i = 0; i < n; i++) total->vdev_id[i] = all[i].id;
    *size = sizeof *total;
    return OK;
}

/* VDEV_MNG / GET_VDEV_RESOURCE: one vNPU, named by the vdev_id the caller set; an unknown one is -8001. */
static int vdev_resource(const struct chip *chip, void *buf, unsigned int *size) {
    struct dcmi_vdev_query_stru *query = buf;
    if (!query || !size || *size < sizeof *query) return INVALID_PARAMETER;
    struct vdev all[MAX_VISIBLE];
    const struct vdev *vdev = visible_vdev(chip, query->vdev_id, all);
    if (!vdev) return INVALID_PARAMETER;
    memset(&query->query_info, 0, sizeof query->query_info);
    memcpy(query->query_info.name, vdev->name, sizeof query->query_info.name);
    query->query_info.status = vdev->status;
    query->query_info.is_container_used = vdev->used;
    query->query_info.vfg_id = vdev->vfg;
    query->query_info.computing.aic = vdev->aic;
    query->query_info.computing.memory_size = vdev->memory_mb;
    *size = sizeof *query;
    return OK;
}

/* VDEV_MNG / GET_VDEV_ACTIVITY: the vNPU's AI-core utilization and memory (KB), as the scenario's usage says. */
static int vdev_activity(const struct chip *chip, void *buf, unsigned int *size) {
    struct dcmi_vdev_query_stru *query = buf;
    if (!query || !size || *size < sizeof *query) return INVALID_PARAMETER;
    struct vdev all[MAX_VISIBLE];
    const struct vdev *vdev = visible_vdev(chip, query->vdev_id, all);
    if (!vdev) return INVALID_PARAMETER;
    const struct usage *u = usage_of(chip, vdev->id);
    unsigned long long total = vdev->memory_mb * 1024, used = u ? u->used_mb * 1024 : 0;
    memset(&query->query_info, 0, sizeof query->query_info);
    memcpy(query->query_info.name, vdev->name, sizeof query->query_info.name);
    query->query_info.computing.vdev_aicore_utilization = u ? u->aicore_util : 0;
    query->query_info.computing.vdev_memory_total = total;
    query->query_info.computing.vdev_memory_free = total - (used < total ? used : total);
    *size = sizeof *query;
    return OK;
}

/* CHIP_INF / SPOD_INFO (A3) */
static int spod_info(const struct chip *chip, void *buf, unsigned int *size) {
    struct dcmi_spod_info *info = buf;
    if (!info || !size || *size < sizeof *info) return INVALID_PARAMETER;
    if (!chip->has_spod) return NOT_SUPPORT;
    memset(info, 0, sizeof *info);
    info->sdid = chip->spod[0];
    info->scale_type = chip->spod[1];
    info->super_pod_id = chip->spod[2];
    info->server_id = chip->spod[3];
    info->chassis_id = chip->spod[4];
    info->super_pod_type = chip->spod[5];
    *size = sizeof *info;
    return OK;
}

static enum op device_info_op(enum dcmi_main_cmd main_cmd, unsigned int sub_cmd) {
    if (main_cmd == DCMI_MAIN_CMD_CHIP_INF && sub_cmd == DCMI_CHIP_INF_SUB_CMD_SPOD_INFO) return OP_SUPER_POD_INFO;
    if (main_cmd != DCMI_MAIN_CMD_VDEV_MNG) return OP_OTHER;
    if (sub_cmd == DCMI_VMNG_SUB_CMD_GET_TOTAL_RESOURCE) return OP_TOTAL_AICORE;
    if (sub_cmd == DCMI_VMNG_SUB_CMD_GET_VDEV_RESOURCE) return OP_VDEV_INFO;
    if (sub_cmd == DCMI_VMNG_SUB_CMD_GET_VDEV_ACTIVITY) return OP_VDEV_ACTIVITY;
    return OP_OTHER;
}

int dcmi_get_device_info(int card_id, int device_id, enum dcmi_main_cmd main_cmd, unsigned int sub_cmd,
                         void *buf, unsigned int *size) {
    enum op op = device_info_op(main_cmd, sub_cmd);
    ENTER_CHIP(op, card_id, device_id, chip);
    if (op == OP_SUPER_POD_INFO) return leave(spod_info(chip, buf, size));
    if (op == OP_OTHER || !chip->has_aic) return leave(NOT_SUPPORT); /* has_aic: the driver has VDEV_MNG */
    if (op == OP_TOTAL_AICORE) return leave(total_resource(chip, buf, size));
    return leave(op == OP_VDEV_INFO ? vdev_resource(chip, buf, size) : vdev_activity(chip, buf, size));
}

int dcmi_get_device_health(int card_id, int device_id, unsigned int *health) {
    ENTER_CHIP(OP_HEALTH, card_id, device_id, chip);
    if (!health) return leave(INVALID_PARAMETER);
    *health = repaired(chip) ? 0 : chip->health;
    return leave(OK);
}

/* The fault codes the chip reports: none once a reset repaired it. */
static int reported_faults(const struct chip *chip) {
    return repaired(chip) ? 0 : chip->nfaults;
}

int dcmi_get_device_errorcode_v2(int card_id, int device_id, int *error_count, unsigned int *error_code_list,
                                 unsigned int list_len) {
    ENTER_CHIP(OP_ERROR_CODES, card_id, device_id, chip);
    int count = reported_faults(chip);
    if (!error_count || !error_code_list || list_len == 0 || (unsigned int)count > list_len)
        return leave(INVALID_PARAMETER);
    memcpy(error_code_list, chip->faults, (size_t)count * sizeof chip->faults[0]);
    *error_count = count;
    return leave(OK);
}

static unsigned long long in_use_mb(unsigned long long used, unsigned long long total) {
    return used < total ? used : total;
}

int dcmi_get_device_hbm_info(int card_id, int device_id, struct dcmi_hbm_info *hbm_info) {
    ENTER_CHIP(OP_HBM_INFO, card_id, device_id, chip);
    if (!hbm_info) return leave(INVALID_PARAMETER);
    if (!chip->has_hbm) return leave(NOT_SUPPORT); /* no HBM on this chip */
    memset(hbm_info, 0, sizeof *hbm_info);
    hbm_info->memory_size = chip->memory_mb;
    hbm_info->memory_usage = in_use_mb(chip->hbm_used_mb, chip->memory_mb);
    hbm_info->freq = chip->hbm_freq;
    hbm_info->temp = chip->hbm_temp;
    hbm_info->bandwith_util_rate = chip->hbm_bw;
    return leave(OK);
}

static int is_soc(const char *name) {
    return strncmp(name, "310B", 4) == 0;
}

int dcmi_get_device_memory_info_v3(int card_id, int device_id, struct dcmi_get_memory_info_stru *memory_info) {
    ENTER_CHIP(OP_MEMORY_INFO, card_id, device_id, chip);
    if (!chip->has_ddr) return leave(NOT_SUPPORT); /* 910B and A3 have no DDR: use dcmi_get_device_hbm_info */
    if (!memory_info) return leave(INVALID_PARAMETER);
    memset(memory_info, 0, sizeof *memory_info);
    unsigned long long used = in_use_mb(chip->ddr_used_mb, chip->memory_mb);
    memory_info->memory_size = chip->memory_mb;
    memory_info->memory_available = chip->memory_mb - used;
    memory_info->freq = chip->ddr_freq;
    memory_info->utiliza = chip->ddr_util;
    return leave(OK);
}

int dcmi_get_device_pcie_info_v2(int card_id, int device_id, struct dcmi_pcie_info_all *pcie_info) {
    ENTER_CHIP(OP_PCIE_ADDRESS, card_id, device_id, chip);
    if (!pcie_info) return leave(INVALID_PARAMETER);
    if (!chip->has_pcie) return leave(NOT_SUPPORT); /* SoC boards: the NPU is no PCIe device */
    memset(pcie_info, 0, sizeof *pcie_info);
    pcie_info->venderid = HUAWEI_PCI_VENDOR;
    pcie_info->domain = chip->pcie_domain;
    pcie_info->bdf_busid = chip->pcie_bus;
    pcie_info->bdf_deviceid = chip->pcie_device;
    pcie_info->bdf_funcid = chip->pcie_function;
    return leave(OK);
}

/* The one address of RoCE port 0, in the family ip->ip_type asks for (ANY: whichever it has). */
int dcmi_get_device_ip(int card_id, int device_id, enum dcmi_port_type input_type, int port_id,
                       struct dcmi_ip_addr *ip, struct dcmi_ip_addr *mask) {
    ENTER_CHIP(OP_DEVICE_IP, card_id, device_id, chip);
    if (!ip || !mask || input_type >= DCMI_INVALID_PORT) return leave(INVALID_PARAMETER);
    if (is_soc(chip->name)) return leave(NOT_SUPPORT);
    int wanted = ip->ip_type == DCMI_IPADDR_TYPE_V6 ? 6 : ip->ip_type == DCMI_IPADDR_TYPE_V4 ? 4 : chip->ip_family;
    if (input_type != DCMI_ROCE_PORT || port_id != 0 || chip->ip_family == 0 || chip->ip_family != wanted)
        return leave(CONFIG_INFO_NOT_EXIST);
    memset(ip, 0, sizeof *ip);
    memset(mask, 0, sizeof *mask);
    memcpy(ip->u_addr.ip6, chip->ip, wanted == 6 ? 16 : 4);
    ip->ip_type = mask->ip_type = wanted == 6 ? DCMI_IPADDR_TYPE_V6 : DCMI_IPADDR_TYPE_V4;
    return leave(OK);
}

/* ---- telemetry -------------------------------------------------------------------------- */

/* A chip's figure through an out parameter: -8001 for a NULL one. */
#define ANSWER(out, value)                           \
    do {                                             \
        if (!(out)) return leave(INVALID_PARAMETER); \
        *(out) = (value);                            \
        return leave(OK);                            \
    } while (0)

int dcmi_get_device_temperature(int card_id, int device_id, int *temperature) {
    ENTER_CHIP(OP_TEMPERATURE, card_id, device_id, chip);
    ANSWER(temperature, chip->temperature);
}

int dcmi_get_device_power_info(int card_id, int device_id, int *power) {
    ENTER_CHIP(OP_POWER, card_id, device_id, chip);
    ANSWER(power, chip->power);
}

/* The card's MCU: it answers while the card's chips reset. */
int dcmi_mcu_get_power_info(int card_id, int *power) {
    ENTER(OP_BOARD_POWER, ((struct target){card_id, -1, -1}));
    struct chip *chip = card_id >= 0 ? first_on_card(card_id) : NULL;
    if (!chip) return leave(INVALID_PARAMETER);
    ANSWER(power, chip->board_power);
}

int dcmi_get_device_voltage(int card_id, int device_id, unsigned int *voltage) {
    ENTER_CHIP(OP_VOLTAGE, card_id, device_id, chip);
    ANSWER(voltage, chip->voltage);
}

/* enum dcmi_freq_type and the utilization input types the header defines */
static int known_frequency(int type) {
    return type == 1 || type == 2 || type == 6 || type == 7 || type == 9 || type == 12;
}

static int known_utilization(int type) {
    return (type >= 1 && type <= 6) || type == 10 || (type >= 12 && type <= 14);
}

int dcmi_get_device_frequency(int card_id, int device_id, enum dcmi_freq_type input_type, unsigned int *frequency) {
    ENTER_CHIP(OP_FREQUENCY, card_id, device_id, chip);
    int type = (int)input_type;
    if (!known_frequency(type)) return leave(INVALID_PARAMETER);
    if (!chip->has_freq[type]) return leave(NOT_SUPPORT);
    ANSWER(frequency, chip->freq[type]);
}

int dcmi_get_device_utilization_rate(int card_id, int device_id, int input_type, unsigned int *utilization_rate) {
    ENTER_CHIP(OP_UTILIZATION, card_id, device_id, chip);
    if (!known_utilization(input_type)) return leave(INVALID_PARAMETER);
    if (!chip->has_util[input_type]) return leave(NOT_SUPPORT);
    ANSWER(utilization_rate, chip->util[input_type]);
}

static int multi_utilization(const struct chip *chip, struct dcmi_multi_utilization_info *util_info) {
    if (!util_info) return INVALID_PARAMETER;
    if (!chip->has_multi) return NOT_SUPPORT; /* 910B and A3 drivers only */
    memset(util_info, 0, sizeof *util_info);
    util_info->aic_util = chip->multi[0];
    util_info->aiv_util = chip->multi[1];
    util_info->aicore_util = chip->multi[2];
    util_info->npu_util = chip->multi[3];
    return OK;
}

int dcmi_get_device_multi_utilization_rate(int card_id, int device_id, struct dcmi_multi_utilization_info *util_info) {
    ENTER_CHIP(OP_MULTI_UTILIZATION, card_id, device_id, chip);
    return leave(multi_utilization(chip, util_info));
}

int dcmi_get_device_multi_utilization_rate_period(int card_id, int device_id,
                                                  struct dcmi_multi_utilization_info *util_info, int period) {
    ENTER_CHIP(OP_MULTI_UTILIZATION_PERIOD, card_id, device_id, chip);
    if (period < 1 || period > 4) return leave(INVALID_PARAMETER); /* seconds */
    return leave(multi_utilization(chip, util_info));
}

int dcmi_get_device_ecc_info(int card_id, int device_id, enum dcmi_device_type input_type,
                             struct dcmi_ecc_info *device_ecc_info) {
    ENTER_CHIP(OP_ECC_INFO, card_id, device_id, chip);
    int kind = (int)input_type;
    if (!device_ecc_info || kind < DCMI_DEVICE_TYPE_DDR || kind > DCMI_DEVICE_TYPE_NPU) return leave(INVALID_PARAMETER);
    for (int i = 0; i < chip->necc; i++) {
        const struct ecc *e = &chip->ecc[i];
        if (e->kind != kind) continue;
        memset(device_ecc_info, 0, sizeof *device_ecc_info);
        device_ecc_info->enable_flag = e->enable_flag;
        device_ecc_info->single_bit_error_cnt = e->counts[0];
        device_ecc_info->double_bit_error_cnt = e->counts[1];
        device_ecc_info->total_single_bit_error_cnt = e->counts[2];
        device_ecc_info->total_double_bit_error_cnt = e->counts[3];
        device_ecc_info->single_bit_isolated_pages_cnt = e->counts[4];
        device_ecc_info->double_bit_isolated_pages_cnt = e->counts[5];
        device_ecc_info->single_bit_next_isolated_pages_cnt = e->counts[6];
        device_ecc_info->double_bit_next_isolated_pages_cnt = e->counts[7];
        return leave(OK);
    }
    return leave(NOT_SUPPORT); /* no such memory on this chip */
}

/* Can block: a scenario makes it hang per chip (hang=network_health), as a real one does after a card drop. */
int dcmi_get_device_network_health(int card_id, int device_id, enum dcmi_rdfx_detect_result *result) {
    ENTER_CHIP(OP_NETWORK_HEALTH, card_id, device_id, chip);
    if (!chip->has_net) return leave(NOT_SUPPORT); /* no RoCE port */
    ANSWER(result, (enum dcmi_rdfx_detect_result)chip->net);
}

int dcmi_get_device_die_v2(int card_id, int device_id, enum dcmi_die_type input_type, struct dcmi_die_id *die_id) {
    ENTER_CHIP(OP_DIE_ID, card_id, device_id, chip);
    if (!die_id || (input_type != NDIE && input_type != VDIE)) return leave(INVALID_PARAMETER);
    if (!chip->has_die[input_type]) return leave(NOT_SUPPORT); /* the 950 answers DDIE only */
    memcpy(die_id->soc_die, chip->die[input_type], sizeof die_id->soc_die);
    return leave(OK);
}

/* The driver keeps 31 characters of the cpulist (the scenario's text is cut as it is read). */
int dcmi_get_affinity_cpu_info_by_device_id(int card_id, int device_id, char *affinity_cpu, int *length) {
    ENTER_CHIP(OP_AFFINITY_CPU, card_id, device_id, chip);
    if (!affinity_cpu || !length || *length < TEXT) return leave(INVALID_PARAMETER);
    if (!chip->affinity[0]) return leave(NOT_SUPPORT);
    strcpy(affinity_cpu, chip->affinity);
    *length = (int)strlen(chip->affinity);
    return leave(OK);
}

int dcmi_get_device_resource_info(int card_id, int device_id, struct dcmi_proc_mem_info *proc_info, int *proc_num) {
    ENTER_CHIP(OP_PROCESSES, card_id, device_id, chip);
    if (!proc_info || !proc_num) return leave(INVALID_PARAMETER);
    for (int i = 0; i < chip->nprocs; i++) {
        proc_info[i].proc_id = chip->procs[i].pid;
        proc_info[i].proc_mem_usage = chip->procs[i].bytes;
    }
    *proc_num = chip->nprocs;
    return leave(OK);
}

/* ---- hot reset ----------------------------------------------------------------------- */

static void add_reset(const struct chip *chip, long long since, const unsigned long long stamp[4]) {
    int at = state.nresets;
    for (int i = 0; i < state.nresets; i++)
        if (state.resets[i].phy == chip->phy) at = i;
    if (at == MAX_CHIPS) return;
    if (at == state.nresets) {
        state.nresets++;
        state.resets[at].count = 0;
    }
    state.resets[at].count++;
    state.resets[at].phy = chip->phy;
    state.resets[at].since_ns = since;
    memcpy(state.resets[at].scenario, stamp, sizeof state.resets[at].scenario);
}

int dcmi_set_device_reset(int card_id, int device_id, enum dcmi_reset_channel channel_type) {
    ENTER_CHIP(OP_RESET, card_id, device_id, chip);
    if (channel_type != INBAND_CHANNEL && channel_type != OUTBAND_CHANNEL) return leave(INVALID_PARAMETER);
    if (chip->reset_mode == 2) return leave(NOT_SUPPORT); /* Atlas 300I Duo: only device 0 resets (the card) */
    if (channel_type == OUTBAND_CHANNEL && !(chip->has_outband && chip->outband == 1)) return leave(NOT_SUPPORT);
    int fd = state_begin();
    if (fd < 0) return leave(INNER_ERR);
    unsigned long long stamp[4];
    scenario_stamp(stamp);
    long long since = monotonic_ns();
    for (int i = 0; i < now.nchips; i++) {
        const struct chip *other = &now.chips[i];
        if (other == chip || (chip->reset_mode == 1 && other->card == chip->card)) add_reset(other, since, stamp);
    }
    return leave(state_commit(fd));
}

int dcmi_get_device_boot_status(int card_id, int device_id, enum dcmi_boot_status *boot_status) {
    static const enum dcmi_boot_status booting[] = {DCMI_BOOT_STATUS_UNINIT, DCMI_BOOT_STATUS_BIOS,
                                                    DCMI_BOOT_STATUS_OS, DCMI_BOOT_STATUS_FINISH};
    ENTER_CHIP(OP_BOOT_STATUS, card_id, device_id, chip);
    double progress = reset_progress(chip);
    ANSWER(boot_status, progress >= 1.0 ? DCMI_SYSTEM_START_FINISH : booting[(int)(progress * 4)]);
}

/* A3 only: cards 0-3 pair with 4-7 (the driver's table); a scenario may name another. */
int dcmi_get_netdev_brother_device(int card_id, int device_id, int *brother_card_id) {
    ENTER_CHIP(OP_BROTHER_CARD, card_id, device_id, chip);
    if (!brother_card_id) return leave(INVALID_PARAMETER);
    if (!chip->a3) return leave(NOT_SUPPORT);
    if (chip->has_brother) ANSWER(brother_card_id, chip->brother);
    if (card_id < 0 || card_id >= 8 || device_id < 0 || device_id >= 2) return leave(INVALID_PARAMETER);
    ANSWER(brother_card_id, card_id >= 4 ? card_id - 4 : card_id + 4);
}

int dcmi_get_device_outband_channel_state(int card_id, int device_id, int *channel_state) {
    ENTER_CHIP(OP_OUTBAND_CHANNEL_STATE, card_id, device_id, chip);
    if (!chip->has_outband) return leave(NOT_SUPPORT);
    ANSWER(channel_state, chip->outband);
}

/* ---- vNPUs on demand --------------------------------------------------------------------- */

static const struct template *template_named(const struct chip *chip, const char *name) {
    for (int i = 0; i < chip->ntemplates; i++)
        if (strcmp(chip->templates[i].name, name) == 0) return &chip->templates[i];
    return NULL;
}

/* What an existing vNPU takes: its template's cost, else its own figures. */
static struct template cost_of(const struct chip *chip, const struct vdev *vdev) {
    const struct template *known = template_named(chip, vdev->name);
    if (known) return *known;
    struct template own = {.aic = vdev->aic, .memory_mb = vdev->memory_mb};
    return own;
}

static int fits(const struct chip *chip, const struct vdev *existing, int n, const struct template *cost) {
    if ((unsigned int)n >= chip->max_vdevs) return 0;
    double aic = cost->aic;
    unsigned long long aicpu = cost->aicpu, memory = cost->memory_mb, media[MEDIA] = {0};
    for (int k = 0; k < MEDIA; k++) media[k] = cost->has_media ? cost->media[k] : 0;
    for (int i = 0; i < n; i++) {
        struct template c = cost_of(chip, &existing[i]);
        aic += c.aic;
        aicpu += c.aicpu;
        memory += c.memory_mb;
        for (int k = 0; k < MEDIA; k++) media[k] += c.has_media ? c.media[k] : 0;
    }
    if (aic > (double)chip->room_aic + 1e-6 || aicpu > chip->room_aicpu || memory > chip->room_memory_mb) return 0;
    for (int k = 0; chip->has_media && k < MEDIA; k++)
        if (media[k] > chip->media[k]) return 0;
    return 1;
}

/* Whether a vNPU id is in use anywhere on the node (ids are node-wide). */
static int id_taken(unsigned int id) {
    for (int i = 0; i < state.nmade; i++)
        if (state.made[i].id == id) return 1;
    for (int c = 0; c < now.nchips; c++)
        for (int i = 0; i < now.chips[c].nvdevs; i++)
            if (now.chips[c].vdevs[i].id == id && !gone(&now.chips[c], id)) return 1;
    return 0;
}

/* Drop "destroyed" marks of static vNPUs the scenario no longer lists. */
static void prune_gone(void) {
    int kept = 0;
    for (int i = 0; i < state.ngone; i++) {
        const struct gone *g = &state.gone[i];
        int listed = 0;
        for (int c = 0; c < now.nchips; c++)
            for (int j = 0; now.chips[c].phy == g->phy && j < now.chips[c].nvdevs; j++) listed |= now.chips[c].vdevs[j].id == g->id;
        if (listed) state.gone[kept++] = *g;
    }
    state.ngone = kept;
}

/* The driver makes /dev/vdavinci<N>; the fake does so in the scenario's vdev_dir: a character device
   with /dev/null's numbers where it may make one (root), so a container runtime accepts it, else a file. */
static void device_node(unsigned int id, int present) {
    if (!now.vdev_dir[0]) return;
    char path[1100];
    snprintf(path, sizeof path, "%s/vdavinci%u", now.vdev_dir, id);
    if (present) {
        mkdir(now.vdev_dir, 0755);
        if (mknod(path, S_IFCHR | 0666, makedev(1, 3)) == 0 || errno == EEXIST) return;
        int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0) close(fd);
        else fprintf(stderr, "fake_dcmi: cannot make %s (%s)\n", path, strerror(errno));
    } else if (unlink(path) != 0 && errno != ENOENT) {
        fprintf(stderr, "fake_dcmi: cannot remove %s (%s)\n", path, strerror(errno));
    }
}

static int create_locked(const struct chip *chip, const struct template *cost, const char *name,
                         const struct dcmi_create_vdev_res_stru *vdev, struct dcmi_create_vdev_out *out) {
    struct vdev existing[MAX_VISIBLE];
    int n = visible_vdevs(chip, existing);
    unsigned int id = vdev->vdev_id;
    if (vdev->vdev_id == (unsigned int)AUTO_ID) {
        for (id = chip->first_id; id <= chip->last_id && id_taken(id); id++) continue;
        if (id > chip->last_id) return RESOURCE_OCCUPIED;
    } else if (id_taken(id)) {
        return RESOURCE_OCCUPIED;
    }
    if (!fits(chip, existing, n, cost) || state.nmade == MAX_MADE) return RESOURCE_OCCUPIED;
    unsigned int group = vdev->vfg_id;
    if (group == (unsigned int)AUTO_ID) {
        for (group = 0;; group++) {
            int used = 0;
            for (int i = 0; i < n; i++) used |= existing[i].vfg == group;
            if (!used) break;
        }
    }
    prune_gone();
    struct made *m = &state.made[state.nmade++];
    memset(m, 0, sizeof *m);
    m->phy = chip->phy;
    m->id = id;
    m->vfg = group;
    snprintf(m->template, sizeof m->template, "%s", name);
    m->aic = cost->aic;
    m->memory_mb = cost->memory_mb;
    memset(out, 0, sizeof *out);
    out->vdev_id = id;
    out->vfg_id = group;
    return OK;
}

int dcmi_create_vdevice(int card_id, int device_id, struct dcmi_create_vdev_res_stru *vdev,
                        struct dcmi_create_vdev_out *out) {
    ENTER_CHIP(OP_CREATE_VDEV, card_id, device_id, chip);
    if (!vdev || !out) return leave(INVALID_PARAMETER);
    if (!chip->has_room) return leave(NOT_SUPPORT);
    char name[TEMPLATE_NAME_LEN + 1] = "";
    memcpy(name, vdev->template_name, TEMPLATE_NAME_LEN);
    const struct template *cost = template_named(chip, name);
    if (!cost) return leave(INVALID_PARAMETER); /* the driver checks the name against its table */
    if (vdev->vdev_id != (unsigned int)AUTO_ID && (vdev->vdev_id < chip->first_id || vdev->vdev_id > chip->last_id))
        return leave(INVALID_PARAMETER);
    int fd = state_begin();
    if (fd < 0) return leave(INNER_ERR);
    int code = create_locked(chip, cost, name, vdev, out);
    if (code != OK) {
        state_end(fd);
        return leave(code);
    }
    code = state_commit(fd);
    if (code == OK) device_node(out->vdev_id, 1);
    return leave(code);
}

static void forget(const struct chip *chip, unsigned int id) {
    int kept = 0;
    for (int i = 0; i < state.nmade; i++)
        if (!(state.made[i].phy == chip->phy && state.made[i].id == id)) state.made[kept++] = state.made[i];
    state.nmade = kept;
    for (int i = 0; i < chip->nvdevs; i++)
        if (chip->vdevs[i].id == id && state.ngone < MAX_GONE) {
            state.gone[state.ngone].phy = chip->phy;
            state.gone[state.ngone++].id = id;
        }
}

/* One vNPU, or every one of the chip (ALL_VDEVS); -8001 for one not on it, -8020 if a container uses it. */
int dcmi_set_destroy_vdevice(int card_id, int device_id, unsigned int vdevid) {
    ENTER_CHIP(OP_DESTROY_VDEV, card_id, device_id, chip);
    if (!chip->has_room) return leave(NOT_SUPPORT);
    int fd = state_begin();
    if (fd < 0) return leave(INNER_ERR);
    struct vdev existing[MAX_VISIBLE];
    int n = visible_vdevs(chip, existing), doomed = 0, busy = 0;
    for (int i = 0; i < n; i++)
        if (vdevid == ALL_VDEVS || existing[i].id == vdevid) doomed++, busy |= (int)existing[i].used;
    if ((vdevid != ALL_VDEVS && !doomed) || busy) {
        state_end(fd);
        return leave(busy ? RESOURCE_OCCUPIED : INVALID_PARAMETER);
    }
    prune_gone();
    for (int i = 0; i < n; i++)
        if (vdevid == ALL_VDEVS || existing[i].id == vdevid) forget(chip, existing[i].id);
    int code = state_commit(fd);
    for (int i = 0; code == OK && i < n; i++)
        if (vdevid == ALL_VDEVS || existing[i].id == vdevid) device_node(existing[i].id, 0);
    return leave(code);
}

/* ---- fault events: a library thread, like the driver's --------------------------------- */

enum { MAX_SUBSCRIBERS = 8 };
static struct { dcmi_fault_event_callback callback; int card, device; } subscribers[MAX_SUBSCRIBERS];
static int nsubscribers;
static pthread_t watcher;
static int watching, stopping;
static struct { int logic, nfaults; unsigned int faults[MAX_FAULTS]; } seen[MAX_CHIPS];
static int nseen;
static struct { int logic, serial; } *delivered; /* the scenario's events already delivered */
static int ndelivered;
struct pending { int card, device; struct dcmi_event event; };
/* How far each chip's storm has got (the storm it plays, or played last). */
static struct { int logic, serial; double started; long long sent; } storms[MAX_CHIPS];
static int nstorms;

static int contains(const unsigned int *codes, int n, unsigned int code) {
    for (int i = 0; i < n; i++)
        if (codes[i] == code) return 1;
    return 0;
}

static int was_delivered(int logic, int serial) {
    for (int i = 0; i < ndelivered; i++)
        if (delivered[i].logic == logic && delivered[i].serial == serial) return 1;
    return 0;
}

/* What the chips report now; a chip in a reset keeps what was seen before it. */
static void remember_faults(void) {
    static struct { int logic, nfaults; unsigned int faults[MAX_FAULTS]; } before[MAX_CHIPS];
    int nbefore = nseen;
    memcpy(before, seen, (size_t)nbefore * sizeof seen[0]);
    nseen = now.nchips;
    for (int i = 0; i < now.nchips; i++) {
        const struct chip *chip = &now.chips[i];
        int kept = -1;
        for (int j = 0; j < nbefore && resetting(chip); j++)
            if (before[j].logic == chip->logic) kept = j;
        if (kept >= 0) {
            memcpy(&seen[i], &before[kept], sizeof seen[i]);
            continue;
        }
        seen[i].logic = chip->logic;
        seen[i].nfaults = reported_faults(chip);
        memcpy(seen[i].faults, chip->faults, sizeof seen[i].faults);
    }
}

static void add_event(struct pending **events, int *n, const struct chip *chip, unsigned int code,
                      unsigned char severity, unsigned char assertion, int serial) {
    *events = realloc(*events, (size_t)(*n + 1) * sizeof **events);
    struct pending *pending = &(*events)[(*n)++];
    memset(pending, 0, sizeof *pending);
    pending->card = chip->card;
    pending->device = chip->device;
    pending->event.type = DCMI_DMS_FAULT_EVENT;
    struct dcmi_dms_fault_event *fault = &pending->event.event_t.dms_event;
    fault->event_id = code;
    fault->deviceid = (unsigned short)chip->logic;
    fault->severity = severity;
    fault->assertion = assertion;
    fault->event_serial_num = serial;
    fault->alarm_raised_time = (unsigned long long)time(NULL);
    snprintf(fault->event_name, sizeof fault->event_name, "fake fault %08X", code);
}

static double monotonic_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The chip's entry in storms (serial -1 when new), or -1 when the table is full. */
static int storm_run(int logic) {
    for (int i = 0; i < nstorms; i++)
        if (storms[i].logic == logic) return i;
    if (nstorms == MAX_CHIPS) return -1;
    storms[nstorms].logic = logic;
    storms[nstorms].serial = -1;
    return nstorms++;
}

/* With the lock held: the events of the chip's storm that came due since the last look. */
static void add_storm_events(struct pending **events, int *n, const struct chip *chip) {
    const struct storm *storm = &chip->storm;
    int run = chip->has_storm ? storm_run(chip->logic) : -1;
    if (run < 0) return;
    double at = monotonic_seconds();
    if (storms[run].serial != storm->serial) { /* a storm not played yet: it begins now */
        storms[run].serial = storm->serial;
        storms[run].started = at;
        storms[run].sent = 0;
    }
    long long due = 1 + (long long)((at - storms[run].started) * storm->rate);
    if (due > storm->count) due = storm->count;
    /* The event thread calls the subscribers for each event in turn: it cannot get ahead of them. */
    if (due > storms[run].sent + STORM_BATCH) due = storms[run].sent + STORM_BATCH;
    for (long long i = storms[run].sent; i < due; i++) {
        const struct event *step = &storm->steps[i % storm->nsteps];
        add_event(events, n, chip, step->code, step->severity, step->assertion, (int)(storm->serial + i));
    }
    storms[run].sent = due;
}

/* With the lock held: the events between what was seen and the scenario now. */
static int collect_events(struct pending **events) {
    int n = 0;
    for (int i = 0; i < now.nchips; i++) {
        const struct chip *chip = &now.chips[i];
        const unsigned int *before = NULL;
        int nbefore = 0;
        for (int j = 0; j < nseen; j++)
            if (seen[j].logic == chip->logic) before = seen[j].faults, nbefore = seen[j].nfaults;
        int reported = resetting(chip) ? -1 : reported_faults(chip); /* -1: nothing changes during a reset */
        for (int k = 0; k < reported; k++)
            if (!contains(before, nbefore, chip->faults[k]))
                add_event(events, &n, chip, chip->faults[k], chip->severity, 1, 0);
        for (int k = 0; reported >= 0 && k < nbefore; k++)
            if (!contains(chip->faults, reported, before[k]))
                add_event(events, &n, chip, before[k], chip->severity, 0, 0);
        for (int k = 0; k < chip->nevents; k++) {
            const struct event *e = &chip->events[k];
            if (was_delivered(chip->logic, e->serial)) continue;
            delivered = realloc(delivered, (size_t)(ndelivered + 1) * sizeof *delivered);
            delivered[ndelivered].logic = chip->logic;
            delivered[ndelivered++].serial = e->serial;
            add_event(events, &n, chip, e->code, e->severity, e->assertion, e->serial);
        }
        add_storm_events(events, &n, chip);
    }
    remember_faults();
    return n;
}

/* Every subscriber whose card and device match (-1 = all), in the order they subscribed. */
static void deliver(struct pending *events, int n, int count) {
    for (int i = 0; i < n; i++)
        for (int s = 0; s < count; s++) {
            int all = subscribers[s].card < 0 && subscribers[s].device < 0;
            if (all || (subscribers[s].card == events[i].card && subscribers[s].device == events[i].device))
                subscribers[s].callback(&events[i].event);
        }
}

static void *watch(void *unused) {
    (void)unused;
    /* Named, so that a benchmark can tell the fake's own thread (it polls the scenario; a driver's
       event thread sleeps in the kernel) from the plugin's. */
    prctl(PR_SET_NAME, "fake-dcmi-event", 0, 0, 0);
    pthread_mutex_lock(&lock);
    while (!stopping) {
        pause_unlocked(POLL_US);
        struct pending *events = NULL;
        int n = collect_events(&events);
        int count = nsubscribers; /* subscribers are only ever added */
        pthread_mutex_unlock(&lock); /* a callback may call into the library */
        deliver(events, n, count);
        free(events);
        pthread_mutex_lock(&lock);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

int dcmi_subscribe_fault_event(int card_id, int device_id, struct dcmi_event_filter filter,
                               dcmi_fault_event_callback handler) {
    (void)filter; /* the plugin subscribes to everything */
    ENTER(OP_SUBSCRIBE_FAULTS, NO_CHIP);
    if (!handler) return leave(INVALID_PARAMETER);
    if (!now.subscribe) return leave(NOT_SUPPORT);
    if (nsubscribers == MAX_SUBSCRIBERS) return leave(INNER_ERR);
    if (!watching) {
        remember_faults();
        if (pthread_create(&watcher, NULL, watch, NULL) != 0) return leave(INNER_ERR);
        watching = 1;
    }
    subscribers[nsubscribers].callback = handler;
    subscribers[nsubscribers].card = card_id;
    subscribers[nsubscribers].device = device_id;
    nsubscribers++;
    return leave(OK);
}

/* ---- DCMI v2 (the 950): each call names its chip by logical id, and runs the v1 code of that chip ---- */

/* The (card, device) of the chip a v2 call names: OK, or the code the call returns. */
static int v2_address(int dev_id, int *card, int *device) {
    pthread_mutex_lock(&lock);
    refresh();
    struct chip *chip = find_logic(dev_id);
    int code = !loaded || initialised != 2 ? INNER_ERR : chip ? OK : INVALID_PARAMETER;
    if (chip) *card = chip->card, *device = chip->device;
    pthread_mutex_unlock(&lock);
    return code;
}

/* Run a v1 implementation as the v2 call it stands for (the v2 initialisation is what counts). */
#define AS_V2(call)          \
    do {                     \
        in_v2 = 1;           \
        int done_ = (call);  \
        in_v2 = 0;           \
        return done_;        \
    } while (0)

/* A v2 call about the chip of dev_id: the v1 one on its (card, device). */
#define ON_CHIP_V2(dev_id, call)                                          \
    do {                                                                  \
        int card = -1, device = -1;                                       \
        int found_ = v2_address((dev_id), &card, &device);                \
        if (found_ != OK) return found_;                                  \
        AS_V2(call);                                                      \
    } while (0)

int dcmiv2_init(void) {
    return init_api(2);
}

static int device_list(int *device_list, int *device_cnt, int list_len) {
    ENTER(OP_CARD_LIST, NO_CHIP);
    if (!device_list || !device_cnt || list_len <= 0 || now.nchips > list_len) return leave(INVALID_PARAMETER);
    for (int i = 0; i < now.nchips; i++) device_list[i] = now.chips[i].logic;
    qsort(device_list, (size_t)now.nchips, sizeof device_list[0], int_order);
    *device_cnt = now.nchips;
    return leave(OK);
}

int dcmiv2_get_device_list(int *list, int *count, int list_len) {
    AS_V2(device_list(list, count, list_len));
}

int dcmiv2_get_driver_version(char *driver_ver, unsigned int len) {
    AS_V2(dcmi_get_driver_version(driver_ver, len));
}

int dcmiv2_get_chip_phy_id_by_dev_id(int dev_id, unsigned int *phyid) {
    AS_V2(dcmi_get_device_phyid_from_logicid((unsigned int)dev_id, phyid));
}

int dcmiv2_get_device_chip_info(int dev_id, struct dcmi_chip_info_v2 *chip_info) {
    ON_CHIP_V2(dev_id, dcmi_get_device_chip_info_v2(card, device, chip_info));
}

int dcmiv2_get_device_info(int dev_id, enum dcmi_main_cmd main_cmd, unsigned int sub_cmd, void *buf,
                           unsigned int *size) {
    ON_CHIP_V2(dev_id, dcmi_get_device_info(card, device, main_cmd, sub_cmd, buf, size));
}

int dcmiv2_get_device_health(int dev_id, unsigned int *health) {
    ON_CHIP_V2(dev_id, dcmi_get_device_health(card, device, health));
}

int dcmiv2_get_device_error_code_list(int dev_id, int *error_count, unsigned int *error_code_list,
                                      unsigned int list_len) {
    ON_CHIP_V2(dev_id, dcmi_get_device_errorcode_v2(card, device, error_count, error_code_list, list_len));
}

int dcmiv2_get_device_hbm_info(int dev_id, struct dcmi_hbm_info *hbm_info) {
    ON_CHIP_V2(dev_id, dcmi_get_device_hbm_info(card, device, hbm_info));
}

int dcmiv2_get_device_pcie_info(int dev_id, struct dcmi_pcie_info_all *pcie_info) {
    ON_CHIP_V2(dev_id, dcmi_get_device_pcie_info_v2(card, device, pcie_info));
}

int dcmiv2_get_affinity_cpu_info_by_dev_id(int dev_id, char *affinity_cpu, int *len) {
    ON_CHIP_V2(dev_id, dcmi_get_affinity_cpu_info_by_device_id(card, device, affinity_cpu, len));
}

/* dev_id -1: every chip. */
int dcmiv2_subscribe_fault_event(int dev_id, struct dcmi_event_filter filter, dcmi_fault_event_callback handler) {
    if (dev_id == -1) AS_V2(dcmi_subscribe_fault_event(-1, -1, filter, handler));
    ON_CHIP_V2(dev_id, dcmi_subscribe_fault_event(card, device, filter, handler));
}

int dcmiv2_get_device_temperature(int dev_id, int *temperature) {
    ON_CHIP_V2(dev_id, dcmi_get_device_temperature(card, device, temperature));
}

int dcmiv2_get_device_power_info(int dev_id, int *power_info) {
    ON_CHIP_V2(dev_id, dcmi_get_device_power_info(card, device, power_info));
}

int dcmiv2_get_device_voltage(int dev_id, unsigned int *voltage) {
    ON_CHIP_V2(dev_id, dcmi_get_device_voltage(card, device, voltage));
}

int dcmiv2_get_device_frequency(int dev_id, enum dcmi_freq_type input_type, unsigned int *frequency) {
    ON_CHIP_V2(dev_id, dcmi_get_device_frequency(card, device, input_type, frequency));
}

int dcmiv2_get_device_utilization_rate(int dev_id, int input_type, unsigned int *utilization_rate) {
    ON_CHIP_V2(dev_id, dcmi_get_device_utilization_rate(card, device, input_type, utilization_rate));
}

int dcmiv2_get_device_multi_utilization_rate(int dev_id, struct dcmi_multi_utilization_info *util_info) {
    ON_CHIP_V2(dev_id, dcmi_get_device_multi_utilization_rate(card, device, util_info));
}

int dcmiv2_get_device_multi_utilization_rate_period(int dev_id, struct dcmi_multi_utilization_info *util_info,
                                                    int period) {
    ON_CHIP_V2(dev_id, dcmi_get_device_multi_utilization_rate_period(card, device, util_info, period));
}

int dcmiv2_get_device_ecc_info(int dev_id, enum dcmi_device_type input_type, struct dcmi_ecc_info *device_ecc_info) {
    ON_CHIP_V2(dev_id, dcmi_get_device_ecc_info(card, device, input_type, device_ecc_info));
}

int dcmiv2_get_device_network_health(int dev_id, enum dcmi_rdfx_detect_result *result) {
    ON_CHIP_V2(dev_id, dcmi_get_device_network_health(card, device, result));
}

int dcmiv2_get_device_die_id(int dev_id, enum dcmi_die_type input_type, struct dcmi_die_id *die_id) {
    ON_CHIP_V2(dev_id, dcmi_get_device_die_v2(card, device, input_type, die_id));
}

int dcmiv2_get_device_proc_mem_info(int dev_id, struct dcmi_proc_mem_info *proc_info, int *proc_num) {
    ON_CHIP_V2(dev_id, dcmi_get_device_resource_info(card, device, proc_info, proc_num));
}

int dcmiv2_reset_device(int dev_id, enum dcmi_reset_channel channel_type) {
    ON_CHIP_V2(dev_id, dcmi_set_device_reset(card, device, channel_type));
}

int dcmiv2_get_device_boot_status(int dev_id, enum dcmi_boot_status *boot_status) {
    ON_CHIP_V2(dev_id, dcmi_get_device_boot_status(card, device, boot_status));
}

/* dlclose: stop the event thread before its code is unmapped. */
__attribute__((destructor)) static void unload(void) {
    pthread_mutex_lock(&lock);
    stopping = 1;
    pthread_mutex_unlock(&lock);
    if (watching) pthread_join(watcher, NULL);
    free(delivered);
}
