{{/* Names, labels and the computed pieces the manifests share. */}}

{{- define "ascend-device-plugin.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* "<release>-<chart>", or just the release name when it already holds the chart name. */}}
{{- define "ascend-device-plugin.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "ascend-device-plugin.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ascend-device-plugin.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "ascend-device-plugin.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "ascend-device-plugin.selectorLabels" . }}
app.kubernetes.io/version: {{ include "ascend-device-plugin.tag" . | quote }}
app.kubernetes.io/component: device-plugin
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "ascend-device-plugin.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ascend-device-plugin.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The run-time config ConfigMap's name; the plugin is told it through ASCEND_DP_CONFIG_CONFIGMAP. */}}
{{- define "ascend-device-plugin.configMapName" -}}
{{- printf "%s-config" (include "ascend-device-plugin.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "ascend-device-plugin.tag" -}}
{{- default .Chart.AppVersion .Values.image.tag }}
{{- end }}

{{/* "<registry>/<repository>:<tag>", or "...@<digest>" when a digest is given. */}}
{{- define "ascend-device-plugin.image" -}}
{{- $ref := .Values.image.repository }}
{{- with .Values.image.registry }}
{{- $ref = printf "%s/%s" (trimSuffix "/" .) $ref }}
{{- end }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $ref .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $ref (include "ascend-device-plugin.tag" .) }}
{{- end }}
{{- end }}

{{/*
The plugin's ConfigMap rules, by namespace, as a JSON map of rule lists: its config
ConfigMap in the release namespace (read, by name); the device-info ConfigMap while
it writes one (settings.deviceInfoNamespace, default kube-system: read and written;
its name is per node, so not by name); Huawei's kube-system/mindx-dl-fault-config
while it follows it (read, by name).
*/}}
{{- define "ascend-device-plugin.configMapRules" -}}
{{- $settings := .Values.settings }}
{{- $rules := dict }}
{{- $config := dict "apiGroups" (list "") "resources" (list "configmaps") "resourceNames" (list (include "ascend-device-plugin.configMapName" .)) "verbs" (list "get" "list" "watch") }}
{{- $_ := set $rules .Release.Namespace (list $config) }}
{{- if not (eq $settings.deviceInfoConfigmap false) }}
{{- $namespace := $settings.deviceInfoNamespace | default "kube-system" }}
{{- $deviceInfo := dict "apiGroups" (list "") "resources" (list "configmaps") "verbs" (list "get" "list" "watch" "create" "update") }}
{{- $_ = set $rules $namespace (append (get $rules $namespace | default list) $deviceInfo) }}
{{- end }}
{{- if not (eq $settings.faultConfigConfigmap false) }}
{{- $faultConfig := dict "apiGroups" (list "") "resources" (list "configmaps") "resourceNames" (list "mindx-dl-fault-config") "verbs" (list "get" "list" "watch") }}
{{- $_ = set $rules "kube-system" (append (get $rules "kube-system" | default list) $faultConfig) }}
{{- end }}
{{- $rules | toJson }}
{{- end }}

{{/*
"true" when the chart installs the policy that holds each node's plugin to its own
node's objects: rbac.create and rbac.ownNodeOnly, on a cluster that has
ValidatingAdmissionPolicy v1 and puts the node's name in a pod's token (1.30 and later).
*/}}
{{/*
The extended resources an older family's plugin may have left on the nodes of this
release, which the plugin removes from its node's status (backends' stale_resources):
a 950 node's huawei.com/Ascend910, in a release of family "950" only (a release of
any family, "", grants no status: its 950 nodes log the command instead). As a JSON
list; empty without rbac.removeStaleResources.
*/}}
{{- define "ascend-device-plugin.staleResources" -}}
{{- if and .Values.rbac.create .Values.rbac.removeStaleResources (eq .Values.family "950") }}
{{- list "huawei.com/Ascend910" | toJson }}
{{- else }}
{{- list | toJson }}
{{- end }}
{{- end }}

{{/*
CEL: a write through a Node's status changes nothing but remove some of the
resources listed (the context, a list) from capacity and allocatable.
*/}}
{{- define "ascend-device-plugin.statusRule" -}}
{{- $stale := toJson . -}}
request.subResource != 'status' || (
  object.status.all(k, k in ['capacity', 'allocatable'] || (k in oldObject.status && object.status[k] == oldObject.status[k]))
  && oldObject.status.all(k, k in object.status || k in ['capacity', 'allocatable'])
  && ['capacity', 'allocatable'].all(part,
    (part in object.status ? object.status[part] : {}).all(r, part in oldObject.status && r in oldObject.status[part] && oldObject.status[part][r] == object.status[part][r])
    && (part in oldObject.status ? oldObject.status[part] : {}).all(r, (part in object.status && r in object.status[part]) || r in {{ $stale }})))
{{- end }}

{{- define "ascend-device-plugin.ownNodePolicy" -}}
{{- if and .Values.rbac.create .Values.rbac.ownNodeOnly (semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version) }}true{{ end }}
{{- end }}

{{/*
Host directories mounted read-only at the same path: hostDirectories, plus the
host loader's directory and libraryDirs when hostLoader is enabled. As a JSON list.
*/}}
{{- define "ascend-device-plugin.hostDirectories" -}}
{{- $dirs := .Values.hostDirectories }}
{{- if .Values.hostLoader.enabled }}
{{- $dirs = concat $dirs (list (dir .Values.hostLoader.path)) .Values.hostLoader.libraryDirs }}
{{- end }}
{{- $dirs | uniq | toJson }}
{{- end }}

{{/* LD_LIBRARY_PATH of the container. */}}
{{- define "ascend-device-plugin.libraryPath" -}}
{{- $dirs := .Values.libraryPath }}
{{- if .Values.hostLoader.enabled }}
{{- $dirs = concat (list .Values.hostLoader.pythonLibraryDir) .Values.hostLoader.libraryDirs $dirs }}
{{- end }}
{{- $dirs | uniq | join ":" }}
{{- end }}

{{/* A volume name for a host path: "<prefix>-<index>-<path as a DNS label>". */}}
{{- define "ascend-device-plugin.volumeName" -}}
{{- $slug := regexReplaceAll "[^a-z0-9]+" (lower .path) "-" | trimAll "-" }}
{{- printf "%s-%d-%s" .prefix .index $slug | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Every host path the container can see (a mount path, for checking that a
configured file lies under one). As a JSON list.
*/}}
{{- define "ascend-device-plugin.visiblePaths" -}}
{{- $paths := list "/dev" .Values.driver.hostPath }}
{{- $paths = concat $paths .Values.hostFiles (include "ascend-device-plugin.hostDirectories" . | fromJsonArray) }}
{{- range .Values.extraVolumeMounts }}
{{- $paths = append $paths .mountPath }}
{{- end }}
{{- $paths | toJson }}
{{- end }}

{{/*
The host directory of the kubelet's PodResources socket, mounted at the same path (every mode).
*/}}
{{- define "ascend-device-plugin.podResourcesDir" -}}
{{- dir (.Values.settings.podResourcesSocket | default "/var/lib/kubelet/pod-resources/kubelet.sock") }}
{{- end }}

{{/*
serve: dra. The driver's name, the kubelet's plugin registry and the driver's own
directory: the plugin's defaults, unless the settings say otherwise. The
directories are mounted at the host's paths, since the kubelet dials the socket
path the driver gives it.
*/}}
{{- define "ascend-device-plugin.draDriver" -}}
{{- .Values.settings.draDriverName | default "npu.huawei.com" }}
{{- end }}

{{- define "ascend-device-plugin.draRegistryPath" -}}
{{- .Values.settings.draRegistryPath | default "/var/lib/kubelet/plugins_registry" }}
{{- end }}

{{- define "ascend-device-plugin.draPluginPath" -}}
{{- .Values.settings.draPluginPath | default (printf "/var/lib/kubelet/plugins/%s" (include "ascend-device-plugin.draDriver" .)) }}
{{- end }}

{{/*
The modes the release serves, as a JSON list: ["device-plugin"], ["dra"], or both with
serve: by-node-label (one DaemonSet each, on the nodes whose serveLabel says so).
*/}}
{{- define "ascend-device-plugin.modes" -}}
{{- if eq .Values.serve "by-node-label" }}
{{- list "device-plugin" "dra" | toJson }}
{{- else }}
{{- list .Values.serve | toJson }}
{{- end }}
{{- end }}

{{/* "true" when some node of the release runs the DRA driver. */}}
{{- define "ascend-device-plugin.servesDra" -}}
{{- if has "dra" (include "ascend-device-plugin.modes" . | fromJsonArray) }}true{{ end }}
{{- end }}

{{/*
The selector labels of one mode's DaemonSet (dict "root" "mode"). The DRA driver's
DaemonSet of serve: by-node-label is "<name>-dra": two DaemonSets must never select
each other's pods. Every other DaemonSet keeps the release's selector (immutable
once installed).
*/}}
{{- define "ascend-device-plugin.modeSelectorLabels" -}}
{{- $name := include "ascend-device-plugin.name" .root }}
{{- if and (eq .root.Values.serve "by-node-label") (eq .mode "dra") }}
{{- $name = printf "%s-dra" $name | trunc 63 | trimSuffix "-" }}
{{- end }}
app.kubernetes.io/name: {{ $name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end }}

{{/* The name of one mode's DaemonSet (dict "root" "mode"). */}}
{{- define "ascend-device-plugin.daemonSetName" -}}
{{- $fullname := include "ascend-device-plugin.fullname" .root }}
{{- if and (eq .root.Values.serve "by-node-label") (eq .mode "dra") }}
{{- printf "%s-dra" (trunc 59 $fullname | trimSuffix "-") }}
{{- else }}
{{- $fullname }}
{{- end }}
{{- end }}

{{/*
"true" when this release installs the DeviceClass entry (dict "root" "name" "families"):
dra.installClasses all, or family with the release's family among the entry's (or no
family set), and the entry not in dra.skipClasses.
*/}}
{{- define "ascend-device-plugin.installsClass" -}}
{{- $dra := .root.Values.dra }}
{{- $family := toString .root.Values.family }}
{{- $ours := or (eq $dra.installClasses "all") (and (eq $dra.installClasses "family") (or (not $family) (has $family .families))) }}
{{- if and $ours (not (has .name $dra.skipClasses)) }}true{{ end }}
{{- end }}
