/* The C declarations of libdcmi.so the binding uses (backends/dcmi/build_ffi.py reads them). */
/* -- Constants ------------------------------------------------------------ */
#define MAX_CARD_NUM 64                 /* list_len for dcmi_get_card_list */
#define MAX_LENTH 256                   /* (sic) version string buffers */
#define DCMI_ERROR_CODE_MAX_COUNT 128   /* list_len for dcmi_get_device_errorcode_v2 */
#define DCMI_MAX_PROC_NUM 32            /* entries of the proc_info array of dcmi_get_device_resource_info */
#define TEMPLATE_NAME_LEN 32            /* dcmi_create_vdev_res_stru.template_name */
#define TOPO_INFO_MAX_LENTH 32          /* (sic) the CPU-affinity cpulist: 31 characters and the NUL */

/* input_type of dcmi_get_device_utilization_rate */
#define DCMI_UTILIZATION_RATE_DDR 1
#define DCMI_UTILIZATION_RATE_AICORE 2
#define DCMI_UTILIZATION_RATE_AICPU 3
#define DCMI_UTILIZATION_RATE_CTRLCPU 4
#define DCMI_UTILIZATION_RATE_DDR_BANDWIDTH 5
#define DCMI_UTILIZATION_RATE_HBM 6
#define DCMI_UTILIZATION_RATE_HBM_BANDWIDTH 10
#define DCMI_UTILIZATION_RATE_VECTORCORE 12
#define DCMI_UTILIZATION_RATE_NPU 13
#define DCMI_UTILIZATION_RATE_AICUBE 14

/* -- Chip, board and ids -------------------------------------------------- */
struct dcmi_chip_info {
    unsigned char chip_type[32];
    unsigned char chip_name[32];
    unsigned char chip_ver[32];
    unsigned int aicore_cnt;
};

struct dcmi_chip_info_v2 {
    unsigned char chip_type[32];
    unsigned char chip_name[32];
    unsigned char chip_ver[32];
    unsigned int aicore_cnt;
    unsigned char npu_name[32];
};

struct dcmi_board_info {
    unsigned int board_id;
    unsigned int pcb_id;
    unsigned int bom_id;
    unsigned int slot_id;
};

struct dcmi_die_id {
    unsigned int soc_die[5];
};

struct dcmi_pcie_info_all {
    unsigned int venderid;
    unsigned int subvenderid;
    unsigned int deviceid;
    unsigned int subdeviceid;
    int domain;
    unsigned int bdf_busid;
    unsigned int bdf_deviceid;
    unsigned int bdf_funcid;
    unsigned char reserve[32];
};

/* -- Memory ----------------------------------------------------------------- */
struct dcmi_hbm_info {
    unsigned long long memory_size;     /* MB */
    unsigned int freq;
    unsigned long long memory_usage;    /* MB */
    int temp;
    unsigned int bandwith_util_rate;    /* (sic) */
};

struct dcmi_get_memory_info_stru {
    unsigned long long memory_size;       /* MB */
    unsigned long long memory_available;  /* MB: free + hugepages_free * hugepagesize */
    unsigned int freq;                    /* MHz */
    unsigned long hugepagesize;           /* KB; 8 bytes on LP64 */
    unsigned long hugepages_total;
    unsigned long hugepages_free;
    unsigned int utiliza;                 /* percent */
    unsigned char reserve[60];            /* the header says 96 bytes in all; LP64 makes it 112 */
};

struct dcmi_multi_utilization_info {
    unsigned int aic_util;
    unsigned int aiv_util;
    unsigned int aicore_util;
    unsigned int npu_util;
    unsigned int reserved[8];
};

struct dcmi_proc_mem_info {
    int proc_id;                          /* the host's PID */
    unsigned long proc_mem_usage;         /* bytes */
};

/* The 9-field layout of newer drivers (36 bytes); older ones fill the first 7
   (28 bytes), so a zeroed 36-byte buffer is right for both. */
struct dcmi_ecc_info {
    int enable_flag;
    unsigned int single_bit_error_cnt;
    unsigned int double_bit_error_cnt;
    unsigned int total_single_bit_error_cnt;
    unsigned int total_double_bit_error_cnt;
    unsigned int single_bit_isolated_pages_cnt;
    unsigned int double_bit_isolated_pages_cnt;
    unsigned int single_bit_next_isolated_pages_cnt;
    unsigned int double_bit_next_isolated_pages_cnt;
};

enum dcmi_device_type {
    DCMI_DEVICE_TYPE_DDR, DCMI_DEVICE_TYPE_SRAM, DCMI_DEVICE_TYPE_HBM, DCMI_DEVICE_TYPE_NPU,
    DCMI_HBM_RECORDED_SINGLE_ADDR, DCMI_HBM_RECORDED_MULTI_ADDR, DCMI_DEVICE_TYPE_NONE = 0xff
};

enum dcmi_freq_type {
    DCMI_FREQ_DDR = 1, DCMI_FREQ_CTRLCPU = 2, DCMI_FREQ_HBM = 6, DCMI_FREQ_AICORE_CURRENT_ = 7,
    DCMI_FREQ_AICORE_MAX = 9, DCMI_FREQ_VECTORCORE_CURRENT = 12
};

enum dcmi_die_type { NDIE, VDIE, DDIE, INVALID_DIE };

/* -- Network ---------------------------------------------------------------- */
enum dcmi_ip_addr_type { DCMI_IPADDR_TYPE_V4 = 0, DCMI_IPADDR_TYPE_V6 = 1, DCMI_IPADDR_TYPE_ANY = 2 };

struct dcmi_ip_addr {
    union {
        unsigned char ip6[16];
        unsigned char ip4[4];
    } u_addr;
    enum dcmi_ip_addr_type ip_type;       /* IN: the family asked for (V4 or V6); OUT: the family given */
};

enum dcmi_port_type { DCMI_VNIC_PORT = 0, DCMI_ROCE_PORT = 1, DCMI_INVALID_PORT };

enum dcmi_rdfx_detect_result {
    DCMI_RDFX_DETECT_OK = 0, DCMI_RDFX_DETECT_SOCK_FAIL = 1, DCMI_RDFX_DETECT_RECV_TIMEOUT = 2,
    DCMI_RDFX_DETECT_UNREACH = 3, DCMI_RDFX_DETECT_TIME_EXCEEDED = 4, DCMI_RDFX_DETECT_FAULT = 5,
    DCMI_RDFX_DETECT_INIT = 6, DCMI_RDFX_DETECT_THREAD_ERR = 7, DCMI_RDFX_DETECT_IP_SET = 8,
    DCMI_RDFX_DETECT_MAX = 0xFF
};

/* -- Hot reset ----------------------------------------------------------------- */
enum dcmi_reset_channel { OUTBAND_CHANNEL = 0, INBAND_CHANNEL };

enum dcmi_boot_status {
    DCMI_BOOT_STATUS_UNINIT = 0, DCMI_BOOT_STATUS_BIOS, DCMI_BOOT_STATUS_OS, DCMI_BOOT_STATUS_FINISH,
    DCMI_SYSTEM_START_FINISH = 16         /* what the end of a reset is waited for */
};

/* -- dcmi_get_device_info commands ------------------------------------------- */
enum dcmi_main_cmd {
    DCMI_MAIN_CMD_DVPP = 0, DCMI_MAIN_CMD_ISP, DCMI_MAIN_CMD_TS_GROUP_NUM, DCMI_MAIN_CMD_CAN,
    DCMI_MAIN_CMD_UART, DCMI_MAIN_CMD_UPGRADE = 5, DCMI_MAIN_CMD_UFS, DCMI_MAIN_CMD_OS_POWER,
    DCMI_MAIN_CMD_LP, DCMI_MAIN_CMD_MEMORY, DCMI_MAIN_CMD_RECOVERY, DCMI_MAIN_CMD_TS,
    DCMI_MAIN_CMD_CHIP_INF, DCMI_MAIN_CMD_QOS, DCMI_MAIN_CMD_SOC_INFO, DCMI_MAIN_CMD_SILS,
    DCMI_MAIN_CMD_HCCS, DCMI_MAIN_CMD_HOST_AICPU, DCMI_MAIN_CMD_TEMP = 50, DCMI_MAIN_CMD_SVM,
    DCMI_MAIN_CMD_VDEV_MNG, DCMI_MAIN_CMD_SEC, DCMI_MAIN_CMD_PCIE = 55, DCMI_MAIN_CMD_SIO = 56,
    DCMI_MAIN_CMD_EX_COMPUTING = 0x8000, DCMI_MAIN_CMD_DEVICE_SHARE = 0x8001,
    DCMI_MAIN_CMD_EX_CERT = 0x8003, DCMI_MAIN_CMD_MAX
};

typedef enum {
    DCMI_CHIP_INF_SUB_CMD_CHIP_ID = 0,
    DCMI_CHIP_INF_SUB_CMD_SPOD_INFO = 1,
    DCMI_CHIP_INF_SUB_CMD_SPOD_NODE_STATUS = 2,
    DCMI_CHIP_INF_SUB_CMD_MAX = 0xFF
} DCMI_CHIP_INFO_SUB_CMD;

/* CHIP_INF / SPOD_INFO (A3). Newer headers name scale_type super_pod_size and
   server_id server_index; the layout is the same. 0xffffffff: none. */
struct dcmi_spod_info {
    unsigned int sdid;
    unsigned int scale_type;
    unsigned int super_pod_id;
    unsigned int server_id;
    unsigned int chassis_id;
    unsigned int super_pod_type;
    unsigned int reserve[6];
};

typedef enum {
    DCMI_VMNG_SUB_CMD_GET_VDEV_RESOURCE = 0,
    DCMI_VMNG_SUB_CMD_GET_TOTAL_RESOURCE = 1,
    DCMI_VMNG_SUB_CMD_GET_FREE_RESOURCE = 2,
    DCMI_VMNG_SUB_CMD_SET_SRIOV_SWITCH = 3,
    DCMI_VMNG_SUB_CMD_GET_VDEV_ACTIVITY = 5,
    DCMI_VMNG_SUB_CMD_MAX
} DCMI_VDEV_MNG_SUB_CMD;

/* -- Virtual NPU resources (VDEV_MNG) ------------------------------------------ */
struct dcmi_base_resource {
    unsigned long long token;
    unsigned long long token_max;
    unsigned long long task_timeout;
    unsigned int vfg_id;
    unsigned char vip_mode;
    unsigned char reserved[31];
};

struct dcmi_computing_resource {
    float aic;                            /* AI cube cores, as a float */
    float aiv;                            /* AI vector cores, as a float */
    unsigned short dsa;
    unsigned short rtsq;
    unsigned short acsq;
    unsigned short cdqm;
    unsigned short c_core;
    unsigned short ffts;
    unsigned short sdma;
    unsigned short pcie_dma;
    unsigned long long memory_size;       /* MB */
    unsigned int event_id;
    unsigned int notify_id;
    unsigned int stream_id;
    unsigned int model_id;
    unsigned short topic_schedule_aicpu;
    unsigned short host_ctrl_cpu;
    unsigned short host_aicpu;
    unsigned short device_aicpu;
    unsigned short topic_ctrl_cpu_slot;
    unsigned int vdev_aicore_utilization;
    unsigned long long vdev_memory_total;
    unsigned long long vdev_memory_free;
    unsigned char reserved[12];
};

struct dcmi_media_resource {
    float jpegd;
    float jpege;
    float vpc;
    float vdec;
    float pngd;
    float venc;
    unsigned char reserved[32];
};

struct dcmi_create_vdev_res_stru {
    unsigned int vdev_id;
    unsigned int vfg_id;
    char template_name[32];
    unsigned char reserved[64];
};

struct dcmi_create_vdev_out {
    unsigned int vdev_id;
    unsigned int pcie_bus;
    unsigned int pcie_device;
    unsigned int pcie_func;
    unsigned int vfg_id;
    unsigned char reserved[32];
};

struct dcmi_vdev_query_info {
    char name[16];
    unsigned int status;
    unsigned int is_container_used;
    unsigned int vfid;
    unsigned int vfg_id;
    unsigned long long container_id;
    struct dcmi_base_resource base;
    struct dcmi_computing_resource computing;
    struct dcmi_media_resource media;
};

struct dcmi_vdev_query_stru {
    unsigned int vdev_id;
    struct dcmi_vdev_query_info query_info;
};

struct dcmi_soc_free_resource {
    unsigned int vfg_num;
    unsigned int vfg_bitmap;
    struct dcmi_base_resource base;
    struct dcmi_computing_resource computing;
    struct dcmi_media_resource media;
};

struct dcmi_soc_total_resource {
    unsigned int vdev_num;
    unsigned int vdev_id[32];
    unsigned int vfg_num;
    unsigned int vfg_bitmap;
    struct dcmi_base_resource base;
    struct dcmi_computing_resource computing;
    struct dcmi_media_resource media;
};

/* -- Fault events ------------------------------------------------------------ */
struct dcmi_event_filter {
    unsigned long long filter_flag;       /* 0: no filtering */
    unsigned int event_id;
    unsigned char severity;
    unsigned char node_type;
    unsigned char resv[32];
};

/* Newer drivers carve the last 32 bytes into os_id, node_type_ex, ...; the
   size and every field before them are the same, and the plugin reads none. */
struct dcmi_dms_fault_event {
    unsigned int event_id;                /* the fault code, e.g. 0x80E01801 */
    unsigned short deviceid;              /* the chip's logic id */
    unsigned char node_type;
    unsigned char node_id;
    unsigned char sub_node_type;
    unsigned char sub_node_id;
    unsigned char severity;               /* 0 warning, 1 minor, 2 major, 3 critical */
    unsigned char assertion;              /* 0 recovered, 1 raised, 2 one-off */
    int event_serial_num;
    int notify_serial_num;
    unsigned long long alarm_raised_time; /* seconds since the epoch */
    char event_name[256];
    char additional_info[32];
    unsigned char resv[32];
};

enum dcmi_event_type { DCMI_DMS_FAULT_EVENT = 0, DCMI_EVENT_TYPE_MAX };

struct dcmi_event {
    enum dcmi_event_type type;
    union {
        struct dcmi_dms_fault_event dms_event;
    } event_t;
};

typedef void (*dcmi_fault_event_callback)(struct dcmi_event *event);

/* -- Functions (all return 0 or a negative DCMI error code) ---------------------- */
int dcmi_init(void);
int dcmi_get_driver_version(char *driver_ver, unsigned int len);
int dcmi_get_card_list(int *card_num, int *card_list, int list_len);
int dcmi_get_device_num_in_card(int card_id, int *device_num);
int dcmi_get_device_logic_id(int *device_logic_id, int card_id, int device_id);  /* OUT parameter first */
int dcmi_get_device_phyid_from_logicid(unsigned int logicid, unsigned int *phyid);
int dcmi_get_device_chip_info_v2(int card_id, int device_id, struct dcmi_chip_info_v2 *chip_info);
int dcmi_get_device_info(int card_id, int device_id, enum dcmi_main_cmd main_cmd, unsigned int sub_cmd,
                         void *buf, unsigned int *size);
int dcmi_get_device_health(int card_id, int device_id, unsigned int *health);
int dcmi_get_device_errorcode_v2(int card_id, int device_id, int *error_count,
                                 unsigned int *error_code_list, unsigned int list_len);
int dcmi_get_device_hbm_info(int card_id, int device_id, struct dcmi_hbm_info *hbm_info);
int dcmi_get_device_memory_info_v3(int card_id, int device_id, struct dcmi_get_memory_info_stru *memory_info);
int dcmi_get_device_pcie_info_v2(int card_id, int device_id, struct dcmi_pcie_info_all *pcie_info);
int dcmi_get_device_ip(int card_id, int device_id, enum dcmi_port_type input_type, int port_id,
                       struct dcmi_ip_addr *ip, struct dcmi_ip_addr *mask);
int dcmi_subscribe_fault_event(int card_id, int device_id, struct dcmi_event_filter filter,
                               dcmi_fault_event_callback handler);  /* filter BY VALUE */

/* telemetry */
int dcmi_get_device_temperature(int card_id, int device_id, int *temperature);        /* Celsius */
int dcmi_get_device_power_info(int card_id, int device_id, int *power);               /* 0.1 W */
int dcmi_mcu_get_power_info(int card_id, int *power);                                 /* 0.1 W, the card */
int dcmi_get_device_voltage(int card_id, int device_id, unsigned int *voltage);       /* 0.01 V */
int dcmi_get_device_frequency(int card_id, int device_id, enum dcmi_freq_type input_type,
                              unsigned int *frequency);                                /* MHz */
int dcmi_get_device_utilization_rate(int card_id, int device_id, int input_type,
                                     unsigned int *utilization_rate);                  /* percent */
int dcmi_get_device_multi_utilization_rate(int card_id, int device_id,
                                           struct dcmi_multi_utilization_info *util_info);
int dcmi_get_device_multi_utilization_rate_period(int card_id, int device_id,
                                                  struct dcmi_multi_utilization_info *util_info,
                                                  int period);                         /* seconds, 1-4 */
int dcmi_get_device_ecc_info(int card_id, int device_id, enum dcmi_device_type input_type,
                             struct dcmi_ecc_info *device_ecc_info);
int dcmi_get_device_network_health(int card_id, int device_id, enum dcmi_rdfx_detect_result *result);
int dcmi_get_device_die_v2(int card_id, int device_id, enum dcmi_die_type input_type,
                           struct dcmi_die_id *die_id);
int dcmi_get_device_resource_info(int card_id, int device_id, struct dcmi_proc_mem_info *proc_info,
                                  int *proc_num);                                      /* proc_info[32] */

/* hot reset */
int dcmi_set_device_reset(int card_id, int device_id, enum dcmi_reset_channel channel_type);
int dcmi_get_device_boot_status(int card_id, int device_id, enum dcmi_boot_status *boot_status);
int dcmi_get_netdev_brother_device(int card_id, int device_id, int *brother_card_id);
int dcmi_get_device_outband_channel_state(int card_id, int device_id, int *channel_state);  /* 1 ok, 0 not */

/* vNPUs */
int dcmi_create_vdevice(int card_id, int device_id, struct dcmi_create_vdev_res_stru *vdev,
                        struct dcmi_create_vdev_out *out);
int dcmi_set_destroy_vdevice(int card_id, int device_id, unsigned int vdevid);

/* NUMA: the chip's CPU affinity as a cpulist ("0-23"), at most 31 characters; *length = strlen.
   -8255 except on 910B, A3 A+X (mainboard 0x15) and Atlas 350 cards. */
int dcmi_get_affinity_cpu_info_by_device_id(int card_id, int device_id, char *affinity_cpu, int *length);

/* -- DCMI v2 (Ascend 950): dcmi_init answers -8255 there; every call takes one logical dev_id,
   0 .. count-1, as dcmiv2_get_device_list lists them. Physical ids only through
   dcmiv2_get_chip_phy_id_by_dev_id. Same structs as v1. ------------------------------------ */
int dcmiv2_init(void);
int dcmiv2_get_device_list(int *device_list, int *device_cnt, int list_len);   /* list first, count second */
int dcmiv2_get_driver_version(char *driver_ver, unsigned int len);
int dcmiv2_get_chip_phy_id_by_dev_id(int dev_id, unsigned int *phyid);
int dcmiv2_get_device_chip_info(int dev_id, struct dcmi_chip_info_v2 *chip_info);
int dcmiv2_get_device_info(int dev_id, enum dcmi_main_cmd main_cmd, unsigned int sub_cmd,
                           void *buf, unsigned int *size);
int dcmiv2_get_device_health(int dev_id, unsigned int *health);
int dcmiv2_get_device_error_code_list(int dev_id, int *error_count, unsigned int *error_code_list,
                                      unsigned int list_len);
int dcmiv2_get_device_hbm_info(int dev_id, struct dcmi_hbm_info *hbm_info);
int dcmiv2_get_device_pcie_info(int dev_id, struct dcmi_pcie_info_all *pcie_info);
int dcmiv2_get_affinity_cpu_info_by_dev_id(int dev_id, char *affinity_cpu, int *len);
int dcmiv2_subscribe_fault_event(int dev_id, struct dcmi_event_filter filter,   /* dev_id -1: every chip */
                                 dcmi_fault_event_callback handler);           /* filter BY VALUE */
int dcmiv2_get_device_temperature(int dev_id, int *temperature);
int dcmiv2_get_device_power_info(int dev_id, int *power_info);
int dcmiv2_get_device_voltage(int dev_id, unsigned int *voltage);
int dcmiv2_get_device_frequency(int dev_id, enum dcmi_freq_type input_type, unsigned int *frequency);
int dcmiv2_get_device_utilization_rate(int dev_id, int input_type, unsigned int *utilization_rate);
int dcmiv2_get_device_multi_utilization_rate(int dev_id, struct dcmi_multi_utilization_info *util_info);
/* MindCluster's; not in every driver */
int dcmiv2_get_device_multi_utilization_rate_period(int dev_id, struct dcmi_multi_utilization_info *util_info,
                                                    int period);
int dcmiv2_get_device_ecc_info(int dev_id, enum dcmi_device_type input_type,
                               struct dcmi_ecc_info *device_ecc_info);
int dcmiv2_get_device_network_health(int dev_id, enum dcmi_rdfx_detect_result *result);
int dcmiv2_get_device_die_id(int dev_id, enum dcmi_die_type input_type, struct dcmi_die_id *die_id); /* DDIE*/
int dcmiv2_get_device_proc_mem_info(int dev_id, struct dcmi_proc_mem_info *proc_info, int *proc_num);
int dcmiv2_reset_device(int dev_id, enum dcmi_reset_channel channel_type);    /* in-band only on 950 */
int dcmiv2_get_device_boot_status(int dev_id, enum dcmi_boot_status *boot_status);
