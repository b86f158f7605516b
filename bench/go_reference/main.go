// A minimal Ascend device plugin in Go: the cost reference of bench/idle.py.
//
// It is built the way Huawei's Go plugin is built, so that the idle cost of a
// Go plugin on the same node can be measured beside ours: the kubelet's
// v1beta1 API on grpc-go over a unix socket, Register with the kubelet, one
// ListAndWatch stream woken on a change, a health timer that polls every chip
// in turn through libdcmi (dlopen'ed, as Huawei's plugin opens it), fault
// events from dcmi_subscribe_fault_event, and Allocate answering device mode
// as ours does (/dev/davinciN of each device, then the shared nodes present on
// the host). It makes per poll the calls ours makes on a 910 family chip:
// dcmi_get_device_health, dcmi_get_device_errorcode_v2, and the vNPU list
// (dcmi_get_device_info, VDEV_MNG total resource).
//
// It is no product: no re-registration, no Kubernetes side, no fault levels, no driver mounts (the
// benchmark's host has none, and the benchmark checks that both plugins answer Allocate alike).
// bench/idle.py generates the API code from proto/deviceplugin.proto and the
// DCMI declarations from backends/dcmi/build_ffi.py into its scratch space and
// builds this file there, offline, in GOPATH mode over Debian's Go packages.
package main

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include "dcmi_cdef.h"

typedef int (*init_fn)(void);
typedef int (*card_list_fn)(int *, int *, int);
typedef int (*device_num_fn)(int, int *);
typedef int (*health_fn)(int, int, unsigned int *);
typedef int (*errorcode_fn)(int, int, int *, unsigned int *, int);
typedef int (*device_info_fn)(int, int, enum dcmi_main_cmd, unsigned int, void *, unsigned int *);
typedef int (*subscribe_fn)(int, int, struct dcmi_event_filter, dcmi_fault_event_callback);

static void *lib;
static init_fn dcmi_init_p;
static card_list_fn card_list_p;
static device_num_fn device_num_p;
static health_fn health_p;
static errorcode_fn errorcode_p;
static device_info_fn device_info_p;
static subscribe_fn subscribe_p;

static int open_dcmi(const char *path) {
	lib = dlopen(path, RTLD_NOW);
	if (!lib) return -1;
	dcmi_init_p = (init_fn)dlsym(lib, "dcmi_init");
	card_list_p = (card_list_fn)dlsym(lib, "dcmi_get_card_list");
	device_num_p = (device_num_fn)dlsym(lib, "dcmi_get_device_num_in_card");
	health_p = (health_fn)dlsym(lib, "dcmi_get_device_health");
	errorcode_p = (errorcode_fn)dlsym(lib, "dcmi_get_device_errorcode_v2");
	device_info_p = (device_info_fn)dlsym(lib, "dcmi_get_device_info");
	subscribe_p = (subscribe_fn)dlsym(lib, "dcmi_subscribe_fault_event");
	if (!dcmi_init_p || !card_list_p || !device_num_p || !health_p || !errorcode_p || !device_info_p) return -2;
	return dcmi_init_p();
}

static int card_list(int *count, int *cards, int len) { return card_list_p(count, cards, len); }
static int device_num(int card, int *count) { return device_num_p(card, count); }
static int health(int card, int device, unsigned int *value) { return health_p(card, device, value); }
static int errorcodes(int card, int device, int *count, unsigned int *codes, int len) {
	return errorcode_p(card, device, count, codes, len);
}
static int vnpu_count(int card, int device) {
	struct dcmi_soc_total_resource total;
	unsigned int size = sizeof total;
	int code = device_info_p(card, device, DCMI_MAIN_CMD_VDEV_MNG, DCMI_VMNG_SUB_CMD_GET_TOTAL_RESOURCE, &total, &size);
	return code != 0 ? code : (int)total.vdev_num;
}

extern void goFaultEvent(struct dcmi_event *event);
static void on_event(struct dcmi_event *event) { goFaultEvent(event); }
static int subscribe(void) {
	if (!subscribe_p) return -8255;
	struct dcmi_event_filter filter;
	memset(&filter, 0, sizeof filter);
	return subscribe_p(-1, -1, filter, on_event);
}
*/
import "C"

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"google.golang.org/grpc"

	pb "adpbench/v1beta1"
)

type chip struct {
	card, device, phy int
	healthy          bool
}

type plugin struct {
	pb.UnimplementedDevicePluginServer
	prefix  string
	shared  []string
	mu      sync.Mutex
	chips   []*chip
	changed chan struct{}
	check   chan struct{}
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pb.Empty) (*pb.DevicePluginOptions, error) {
	return &pb.DevicePluginOptions{GetPreferredAllocationAvailable: true}, nil
}

func (p *plugin) list() *pb.ListAndWatchResponse {
	p.mu.Lock()
	defer p.mu.Unlock()
	response := &pb.ListAndWatchResponse{}
	for _, c := range p.chips {
		health := "Healthy"
		if !c.healthy {
			health = "Unhealthy"
		}
		response.Devices = append(response.Devices, &pb.Device{ID: fmt.Sprintf("%s-%d", p.prefix, c.phy), Health: health})
	}
	return response
}

func (p *plugin) ListAndWatch(_ *pb.Empty, stream pb.DevicePlugin_ListAndWatchServer) error {
	for {
		if err := stream.Send(p.list()); err != nil {
			return err
		}
		select {
		case <-p.changed:
		case <-stream.Context().Done():
			return nil
		}
	}
}

func (p *plugin) GetPreferredAllocation(_ context.Context, request *pb.PreferredAllocationRequest) (*pb.PreferredAllocationResponse, error) {
	response := &pb.PreferredAllocationResponse{}
	for _, container := range request.ContainerRequests {
		ids := append([]string{}, container.MustIncludeDeviceIDs...)
		for _, id := range container.AvailableDeviceIDs {
			if int32(len(ids)) >= container.AllocationSize {
				break
			}
			ids = append(ids, id)
		}
		response.ContainerResponses = append(response.ContainerResponses, &pb.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return response, nil
}

func (p *plugin) Allocate(_ context.Context, request *pb.AllocateRequest) (*pb.AllocateResponse, error) {
	response := &pb.AllocateResponse{}
	for _, container := range request.ContainerRequests {
		answer := &pb.ContainerAllocateResponse{}
		for _, id := range container.DevicesIds {
			phy, err := strconv.Atoi(strings.TrimPrefix(id, p.prefix+"-"))
			if err != nil || !strings.HasPrefix(id, p.prefix+"-") {
				return nil, fmt.Errorf("unknown device %q", id)
			}
			node := fmt.Sprintf("/dev/davinci%d", phy)
			answer.Devices = append(answer.Devices, &pb.DeviceSpec{ContainerPath: node, HostPath: node, Permissions: "rw"})
		}
		for _, node := range p.shared {
			answer.Devices = append(answer.Devices, &pb.DeviceSpec{ContainerPath: node, HostPath: node, Permissions: "rw"})
		}
		response.ContainerResponses = append(response.ContainerResponses, answer)
	}
	return response, nil
}

func (p *plugin) PreStartContainer(context.Context, *pb.PreStartContainerRequest) (*pb.PreStartContainerResponse, error) {
	return &pb.PreStartContainerResponse{}, nil
}

// poll reads every chip in turn, as Huawei's health loop does, and wakes the stream on a change.
func (p *plugin) poll() {
	codes := make([]C.uint, 128)
	changed := false
	for _, c := range p.chips {
		var value C.uint
		var count C.int
		healthy := C.health(C.int(c.card), C.int(c.device), &value) == 0 && value == 0
		if C.errorcodes(C.int(c.card), C.int(c.device), &count, &codes[0], 128) != 0 || count > 0 {
			healthy = false
		}
		C.vnpu_count(C.int(c.card), C.int(c.device))
		p.mu.Lock()
		if c.healthy != healthy {
			c.healthy, changed = healthy, true
		}
		p.mu.Unlock()
	}
	if changed {
		select {
		case p.changed <- struct{}{}:
		default:
		}
	}
}

var events = make(chan struct{}, 1)

//export goFaultEvent
func goFaultEvent(*C.struct_dcmi_event) {
	select {
	case events <- struct{}{}:
	default:
	}
}

func discover(prefix string) []*chip {
	var count C.int
	cards := make([]C.int, 64)
	if code := C.card_list(&count, &cards[0], 64); code != 0 {
		log.Fatalf("dcmi_get_card_list: %d", code)
	}
	var chips []*chip
	for _, card := range cards[:count] {
		var devices C.int
		C.device_num(card, &devices)
		for device := 0; device < int(devices); device++ {
			chips = append(chips, &chip{card: int(card), device: device, phy: len(chips), healthy: true})
		}
	}
	return chips
}

func register(directory, endpoint, resource string) {
	connection, err := grpc.Dial("unix://"+filepath.Join(directory, "kubelet.sock"), grpc.WithInsecure(), grpc.WithBlock(),
		grpc.WithTimeout(10*time.Second))
	if err != nil {
		log.Fatalf("dial kubelet: %v", err)
	}
	defer connection.Close()
	_, err = pb.NewRegistrationClient(connection).Register(context.Background(), &pb.RegisterRequest{
		Version: "v1beta1", Endpoint: endpoint, ResourceName: resource,
		Options: &pb.DevicePluginOptions{GetPreferredAllocationAvailable: true},
	})
	if err != nil {
		log.Fatalf("Register: %v", err)
	}
}

func main() {
	directory := flag.String("device-plugin-path", "/var/lib/kubelet/device-plugins", "the kubelet's directory")
	library := flag.String("dcmi-library", "libdcmi.so", "the DCMI library")
	hostRoot := flag.String("host-root", "/", "where the host's /dev is")
	resource := flag.String("resource", "huawei.com/Ascend910", "the extended resource")
	interval := flag.Duration("health-interval", time.Second, "between health polls")
	flag.Parse()

	path := C.CString(*library)
	defer C.free(unsafe.Pointer(path))
	if code := C.open_dcmi(path); code != 0 {
		log.Fatalf("cannot open %s: %d", *library, code)
	}
	prefix := strings.TrimPrefix(*resource, "huawei.com/")
	p := &plugin{prefix: prefix, chips: discover(prefix), changed: make(chan struct{}, 1)}
	for _, node := range []string{"/dev/davinci_manager", "/dev/hisi_hdc", "/dev/devmm_svm", "/dev/dvpp_cmdlist"} {
		if _, err := os.Stat(filepath.Join(*hostRoot, node)); err == nil {
			p.shared = append(p.shared, node)
		}
	}
	p.poll()
	if code := C.subscribe(); code != 0 {
		log.Printf("no fault events (%d): polling only", code)
	}

	endpoint := strings.ReplaceAll(prefix, "/", "_") + "-go.sock"
	socket := filepath.Join(*directory, endpoint)
	os.Remove(socket)
	listener, err := net.Listen("unix", socket)
	if err != nil {
		log.Fatalf("listen %s: %v", socket, err)
	}
	server := grpc.NewServer()
	pb.RegisterDevicePluginServer(server, p)
	go server.Serve(listener)
	register(*directory, endpoint, *resource)

	ticker := time.NewTicker(*interval)
	for {
		select {
		case <-ticker.C:
		case <-events:
		}
		p.poll()
	}
}
