{{/*
Checks of value combinations that values.schema.json cannot express. Each
failure names the values, says what goes wrong on the node, and what to set.
Included once, from daemonset.yaml.
*/}}

{{/* "true" when .path is .base or lies under it. */}}
{{- define "ascend-device-plugin.isUnder" -}}
{{- $base := printf "%s/" (trimSuffix "/" .base) }}
{{- if or (eq .path .base) (hasPrefix $base .path) }}true{{ end }}
{{- end }}

{{- define "ascend-device-plugin.validate" -}}
{{- $v := .Values }}
{{- $s := $v.settings }}

{{- /* The host loader needs a path; the schema only knows types. */}}
{{- if and $v.hostLoader.enabled (not $v.hostLoader.path) }}
{{- fail "hostLoader.enabled is true but hostLoader.path is empty: set it to the host's dynamic loader, e.g. /usr/lib64/ld-linux-aarch64.so.1 (values-310b.yaml has it)" }}
{{- end }}

{{- /* The kubelet's rules for extended resource names (ascend_plugin/naming.py). */}}
{{- with $s.resourceName }}
{{- $domain := regexReplaceAll "/.*$" . "" }}
{{- $short := regexReplaceAll "^[^/]*/" . "" }}
{{- $problem := "" }}
{{- if hasPrefix "requests." . }}
{{- $problem = "must not start with 'requests.'" }}
{{- else if not (contains "/" .) }}
{{- $problem = "must be '<domain>/<name>', e.g. 'huawei.com/Ascend310'" }}
{{- else if or (eq $domain "kubernetes.io") (hasSuffix ".kubernetes.io" $domain) }}
{{- $problem = "must not be in the kubernetes.io domain" }}
{{- else if or (gt (len $domain) 253) (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$" $domain)) }}
{{- $problem = printf "domain '%s' is not a DNS subdomain" $domain }}
{{- else if or (gt (len $short) 63) (not (regexMatch "^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$" $short)) }}
{{- $problem = printf "name '%s' must be 1-63 characters of [A-Za-z0-9_.-], alphanumeric at both ends" $short }}
{{- end }}
{{- if $problem }}
{{- fail (printf "settings.resourceName '%s' is not an extended resource name the kubelet accepts: %s" . $problem) }}
{{- end }}
{{- end }}

{{- if and (not (kindIs "invalid" $s.aiCoreMin)) (not (kindIs "invalid" $s.aiCoreMax)) }}
{{- if gt (float64 $s.aiCoreMin) (float64 $s.aiCoreMax) }}
{{- fail (printf "settings.aiCoreMin (%v) is above settings.aiCoreMax (%v)" $s.aiCoreMin $s.aiCoreMax) }}
{{- end }}
{{- end }}

{{- if and (eq (toString $s.backend) "fake") (not $s.fakeScenario) }}
{{- fail "settings.backend is \"fake\" but settings.fakeScenario is empty: the fake backend needs a scenario file" }}
{{- end }}

{{- /* The host's glibc on LD_LIBRARY_PATH under the image's loader. */}}
{{- if not $v.hostLoader.enabled }}
{{- range $v.libraryPath }}
{{- if and (has . $v.hostDirectories) (regexMatch "^/(usr/)?lib(64)?(/[a-z0-9_]+-linux-gnu)?/?$" .) }}
{{- fail (printf "libraryPath contains %s, a host directory (hostDirectories) that holds the host's C library: the image's Python would load the host's glibc with the image's loader and die with SIGBUS, exit 135 (see docs/operations.md#the-librarys-glibc). Remove it from libraryPath (libdcmi.so is found through settings.dcmiLibrary), or set hostLoader.enabled=true to run everything on the host's glibc" .) }}
{{- end }}
{{- end }}
{{- end }}

{{- /* A host directory must not hide the image's own Python. */}}
{{- range include "ascend-device-plugin.hostDirectories" $ | fromJsonArray }}
{{- $hostDir := . }}
{{- range list $v.hostLoader.python $v.hostLoader.pythonLibraryDir }}
{{- if include "ascend-device-plugin.isUnder" (dict "path" . "base" $hostDir) }}
{{- fail (printf "host directory %s would be mounted over the image's %s and hide the plugin's own Python: mount a narrower directory" $hostDir .) }}
{{- end }}
{{- end }}
{{- end }}

{{- /* What the plugin refuses at start, refused here in its own words, before a node crash-loops. */}}
{{- $servesDra := include "ascend-device-plugin.servesDra" . }}
{{- if and $servesDra (not (semverCompare ">=1.34.0-0" .Capabilities.KubeVersion.Version)) }}
{{- fail (printf "serve: %s needs Kubernetes 1.34 or later: the DRA driver publishes ResourceSlices and reads claims of resource.k8s.io/v1, which this cluster (%s) does not serve; keep serve: device-plugin" $v.serve .Capabilities.KubeVersion.Version) }}
{{- end }}
{{- if and (eq $v.serve "dra") $s.volcano }}
{{- fail "settings.volcano with serve: dra: invalid settings: serve 'dra' lets the scheduler allocate devices through ResourceSlices; volcano chooses chips through the device-plugin API: unset volcano, or serve 'device-plugin'" }}
{{- end }}
{{- if and (eq $v.serve "device-plugin") (eq (toString $s.vnpu) "dynamic") }}
{{- fail "settings.vnpu: dynamic with serve: device-plugin: invalid settings: vnpu 'dynamic' makes vNPUs when their DRA claims are prepared, so it needs serve 'dra' (--serve dra, ASCEND_DP_SERVE=dra, Helm serve: dra); with the device-plugin API use vnpu 'static' (vNPUs made with npu-smi)" }}
{{- end }}

{{- /* serve: dra gives claims CDI devices, whatever allocateMode would have said. */}}
{{- if and (eq $v.serve "dra") (not (kindIs "invalid" $s.allocateMode)) }}
{{- fail (printf "settings.allocateMode (%v) has no effect with serve: dra: every claim gets CDI devices from its own spec (settings.cdiKind, settings.cdiSpecDir). Unset settings.allocateMode" $s.allocateMode) }}
{{- end }}

{{- /* Every mount path once: the API server rejects duplicates, and /dev/shm must stay the host's. */}}
{{- $owned := list "/dev" "/dev/shm" "/tmp" "/var/lib/kubelet/device-plugins" $v.driver.hostPath }}
{{- if $servesDra }}
{{- $owned = concat $owned (list (include "ascend-device-plugin.draRegistryPath" $) (include "ascend-device-plugin.draPluginPath" $)) }}
{{- end }}
{{- $seen := $owned }}
{{- $requested := concat $v.hostFiles (include "ascend-device-plugin.hostDirectories" $ | fromJsonArray) }}
{{- range $v.extraVolumeMounts }}
{{- $requested = append $requested .mountPath }}
{{- end }}
{{- range $requested }}
{{- if eq (trimSuffix "/" .) "/dev/shm" }}
{{- fail "/dev/shm is mounted by the chart from the host and cannot be replaced: the driver's dmp_daemon keeps its message files in the host's /dev/shm, and a private /dev/shm (emptyDir) breaks DCMI with \"dm_send_msg fail:2\" (see docs/operations.md#the-hosts-shared-memory)" }}
{{- end }}
{{- if has . $seen }}
{{- fail (printf "%s is mounted twice (hostFiles, hostDirectories, hostLoader, extraVolumeMounts or a path the chart mounts itself: %s)" . (join ", " $owned)) }}
{{- end }}
{{- $seen = append $seen . }}
{{- end }}

{{- /* The library the plugin is told to open must be visible in the container. */}}
{{- with $s.dcmiLibrary }}
{{- $library := . }}
{{- $visible := false }}
{{- range include "ascend-device-plugin.visiblePaths" $ | fromJsonArray }}
{{- if include "ascend-device-plugin.isUnder" (dict "path" $library "base" .) }}
{{- $visible = true }}
{{- end }}
{{- end }}
{{- if not $visible }}
{{- fail (printf "settings.dcmiLibrary %s is not under any host path the chart mounts (driver.hostPath, hostFiles, hostDirectories, extraVolumeMounts): the plugin could not open it. Add its directory to hostDirectories" $library) }}
{{- end }}
{{- end }}
{{- end }}
