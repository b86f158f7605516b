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
 * lock released, so it stalls its own call only.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>

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

enum { OK = 0, INVALID_PARAMETER = -8001, INNER_ERR = -8005, CONFIG_INFO_NOT_EXIST = -8023, NOT_SUPPORT = -8255 };
enum { MAX_CHIPS = 256, MAX_FAULTS = 256, MAX_EVENTS = 64, MAX_VDEVS = 32, TEXT = 32, VDEV_NAME = 16 };
enum { POLL_US = 10000, HUAWEI_PCI_VENDOR = 0x19e5 };

/* The operations a scenario can fail or hang: the names of backends.fake.scenario.Operation.
   OP_OTHER stands for calls no operation names (other dcmi_get_device_info commands): never failed or hung. */
enum op {
    OP_INIT, OP_DRIVER_VERSION, OP_CARD_LIST, OP_DEVICE_COUNT, OP_LOGIC_ID, OP_PHY_ID, OP_CHIP_INFO,
    OP_TOTAL_AICORE, OP_HEALTH, OP_ERROR_CODES, OP_HBM_INFO, OP_MEMORY_INFO, OP_PCIE_ADDRESS, OP_DEVICE_IP,
    OP_VDEV_INFO, OP_SUBSCRIBE_FAULTS, OP_COUNT, OP_OTHER = OP_COUNT
};
static const char *const OP_NAMES[OP_COUNT] = {
    "init", "driver_version", "card_list", "device_count", "logic_id", "phy_id", "chip_info",
    "total_aicore", "health", "error_codes", "hbm_info", "memory_info", "pcie_address", "device_ip",
    "vdev_info", "subscribe_faults",
};

/* A fault event of the scenario, delivered once whether or not its code is among the chip's faults. */
struct event { int serial; unsigned int code; unsigned char severity, assertion; };

/* A static vNPU: what VDEV_MNG / GET_VDEV_RESOURCE answers. */
struct vdev {
    unsigned int id, vfg, status, used;
    char name[VDEV_NAME];
    float aic;
    unsigned long long memory_mb;
};

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
    int nvdevs;
    struct vdev vdevs[MAX_VDEVS];
    int has_pcie;
    int pcie_domain;
    unsigned int pcie_bus, pcie_device, pcie_function;
    int ip_family; /* 4 or 6; 0: the RoCE port has no address */
    unsigned char ip[16];
    int errors[OP_COUNT + 1]; /* injected return code per operation; 0 = none */
    int hang[OP_COUNT + 1];
};

struct scenario {
    char driver_version[TEXT];
    double latency_ms;
    int subscribe;
    int errors[OP_COUNT + 1];
    int hang[OP_COUNT + 1];
    int nchips;
    struct chip chips[MAX_CHIPS];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct scenario now, parsed;          /* in force; being read */
static int loaded, initialised;
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

static int parse_node_field(const char *key, char *value, struct scenario *s) {
    if (strcmp(key, "driver_version") == 0) copy_text(s->driver_version, value);
    else if (strcmp(key, "latency_ms") == 0) s->latency_ms = strtod(value, NULL);
    else if (strcmp(key, "subscribe") == 0) s->subscribe = atoi(value);
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
    else if (strcmp(key, "vdevs") == 0) return parse_vdevs(value, c);
    else if (strcmp(key, "pcie") == 0) return parse_pcie(value, c);
    else if (strcmp(key, "ip") == 0) return parse_ip(value, c);
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
    memset(s, 0, sizeof *s);
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

/* With the lock held: re-read the scenario if its path or the file changed. */
static void refresh(void) {
    const char *path = getenv("FAKE_DCMI_SCENARIO");
    struct stat st;
    if (!path || stat(path, &st) != 0) return;
    if (loaded && strcmp(path, loaded_path) == 0 && same_file(&st, &loaded_stat)) return;
    snprintf(loaded_path, sizeof loaded_path, "%s", path);
    loaded_stat = st;
    if (parse_file(path, &parsed) == 0) {
        now = parsed;
        loaded = 1;
    }
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

static struct chip *chip_of(struct target t) {
    if (t.card >= 0) return find(t.card, t.device);
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
    } else if (op != OP_INIT && !initialised) {
        code = INNER_ERR; /* "DCMI is not initialised" */
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

int dcmi_init(void) {
    ENTER(OP_INIT, NO_CHIP);
    initialised = 1;
    return leave(OK);
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

/* Calls about one chip: an unknown (card, device) is -8001. */
#define ENTER_CHIP(op, card, device, chip)                \
    ENTER((op), ((struct target){(card), (device), -1})); \
    struct chip *chip = find((card), (device));           \
    if (!chip) return leave(INVALID_PARAMETER)

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

/* VDEV_MNG / GET_TOTAL_RESOURCE: the chip's AI cores and memory, and the ids of its vNPUs. */
static int total_resource(const struct chip *chip, void *buf, unsigned int *size) {
    struct dcmi_soc_total_resource *total = buf;
    if (!total || !size || *size < sizeof *total) return INVALID_PARAMETER;
    memset(total, 0, sizeof *total);
    total->computing.aic = chip->aic;
    total->computing.memory_size = chip->memory_mb;
    total->vdev_num = (unsigned int)chip->nvdevs;
    for (int i = 0; i < chip->nvdevs; i++) total->vdev_id[i] = chip->vdevs[i].id;
    *size = sizeof *total;
    return OK;
}

/* VDEV_MNG / GET_VDEV_RESOURCE: one vNPU, named by the vdev_id the caller set; an unknown one is -8001. */
static int vdev_resource(const struct chip *chip, void *buf, unsigned int *size) {
    struct dcmi_vdev_query_stru *query = buf;
    if (!query || !size || *size < sizeof *query) return INVALID_PARAMETER;
    for (int i = 0; i < chip->nvdevs; i++) {
        const struct vdev *vdev = &chip->vdevs[i];
        if (vdev->id != query->vdev_id) continue;
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
    return INVALID_PARAMETER;
}

static enum op device_info_op(enum dcmi_main_cmd main_cmd, unsigned int sub_cmd) {
    if (main_cmd != DCMI_MAIN_CMD_VDEV_MNG) return OP_OTHER;
    if (sub_cmd == DCMI_VMNG_SUB_CMD_GET_TOTAL_RESOURCE) return OP_TOTAL_AICORE;
    if (sub_cmd == DCMI_VMNG_SUB_CMD_GET_VDEV_RESOURCE) return OP_VDEV_INFO;
    return OP_OTHER;
}

int dcmi_get_device_info(int card_id, int device_id, enum dcmi_main_cmd main_cmd, unsigned int sub_cmd,
                         void *buf, unsigned int *size) {
    enum op op = device_info_op(main_cmd, sub_cmd);
    ENTER_CHIP(op, card_id, device_id, chip);
    if (op == OP_OTHER || !chip->has_aic) return leave(NOT_SUPPORT); /* has_aic: the driver has VDEV_MNG */
    return leave(op == OP_TOTAL_AICORE ? total_resource(chip, buf, size) : vdev_resource(chip, buf, size));
}

int dcmi_get_device_health(int card_id, int device_id, unsigned int *health) {
    ENTER_CHIP(OP_HEALTH, card_id, device_id, chip);
    if (!health) return leave(INVALID_PARAMETER);
    *health = chip->health;
    return leave(OK);
}

int dcmi_get_device_errorcode_v2(int card_id, int device_id, int *error_count, unsigned int *error_code_list,
                                 unsigned int list_len) {
    ENTER_CHIP(OP_ERROR_CODES, card_id, device_id, chip);
    if (!error_count || !error_code_list || list_len == 0 || (unsigned int)chip->nfaults > list_len)
        return leave(INVALID_PARAMETER);
    memcpy(error_code_list, chip->faults, (size_t)chip->nfaults * sizeof chip->faults[0]);
    *error_count = chip->nfaults;
    return leave(OK);
}

int dcmi_get_device_hbm_info(int card_id, int device_id, struct dcmi_hbm_info *hbm_info) {
    ENTER_CHIP(OP_HBM_INFO, card_id, device_id, chip);
    if (!hbm_info) return leave(INVALID_PARAMETER);
    memset(hbm_info, 0, sizeof *hbm_info);
    hbm_info->memory_size = chip->memory_mb;
    return leave(OK);
}

static int is_soc(const char *name) {
    return strncmp(name, "310B", 4) == 0;
}

static int is_910b_or_a3(const char *name) {
    return strncmp(name, "910B", 4) == 0 || strncmp(name, "Ascend910", 9) == 0 || strncmp(name, "A2G", 3) == 0;
}

int dcmi_get_device_memory_info_v3(int card_id, int device_id, struct dcmi_get_memory_info_stru *memory_info) {
    ENTER_CHIP(OP_MEMORY_INFO, card_id, device_id, chip);
    if (is_910b_or_a3(chip->name)) return leave(NOT_SUPPORT); /* HBM chips: use dcmi_get_device_hbm_info */
    if (!memory_info) return leave(INVALID_PARAMETER);
    memset(memory_info, 0, sizeof *memory_info);
    memory_info->memory_size = chip->memory_mb;
    memory_info->memory_available = chip->memory_mb;
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

static void remember_faults(void) {
    nseen = now.nchips;
    for (int i = 0; i < now.nchips; i++) {
        seen[i].logic = now.chips[i].logic;
        seen[i].nfaults = now.chips[i].nfaults;
        memcpy(seen[i].faults, now.chips[i].faults, sizeof seen[i].faults);
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

/* With the lock held: the events between what was seen and the scenario now. */
static int collect_events(struct pending **events) {
    int n = 0;
    for (int i = 0; i < now.nchips; i++) {
        const struct chip *chip = &now.chips[i];
        const unsigned int *before = NULL;
        int nbefore = 0;
        for (int j = 0; j < nseen; j++)
            if (seen[j].logic == chip->logic) before = seen[j].faults, nbefore = seen[j].nfaults;
        for (int k = 0; k < chip->nfaults; k++)
            if (!contains(before, nbefore, chip->faults[k]))
                add_event(events, &n, chip, chip->faults[k], chip->severity, 1, 0);
        for (int k = 0; k < nbefore; k++)
            if (!contains(chip->faults, chip->nfaults, before[k]))
                add_event(events, &n, chip, before[k], chip->severity, 0, 0);
        for (int k = 0; k < chip->nevents; k++) {
            const struct event *e = &chip->events[k];
            if (was_delivered(chip->logic, e->serial)) continue;
            delivered = realloc(delivered, (size_t)(ndelivered + 1) * sizeof *delivered);
            delivered[ndelivered].logic = chip->logic;
            delivered[ndelivered++].serial = e->serial;
            add_event(events, &n, chip, e->code, e->severity, e->assertion, e->serial);
        }
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

/* dlclose: stop the event thread before its code is unmapped. */
__attribute__((destructor)) static void unload(void) {
    pthread_mutex_lock(&lock);
    stopping = 1;
    pthread_mutex_unlock(&lock);
    if (watching) pthread_join(watcher, NULL);
    free(delivered);
}
