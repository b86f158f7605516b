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
Namespaces whose ConfigMaps the plugin reads or writes: the release namespace
(its config ConfigMap) and, while it writes the device-info ConfigMap, that
ConfigMap's namespace (kube-system unless settings.deviceInfoNamespace says
otherwise). As a JSON list, for fromJsonArray.
*/}}
{{- define "ascend-device-plugin.configMapNamespaces" -}}
{{- $namespaces := list .Release.Namespace }}
{{- if not (eq .Values.settings.deviceInfoConfigmap false) }}
{{- $namespaces = append $namespaces (default "kube-system" .Values.settings.deviceInfoNamespace) }}
{{- end }}
{{- $namespaces | uniq | toJson }}
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

{{/* "true" when the plugin writes CDI specs: cdi mode, and every claim with serve: dra. */}}
{{- define "ascend-device-plugin.writesCdi" -}}
{{- if or (eq (toString .Values.settings.allocateMode) "cdi") (eq .Values.serve "dra") }}true{{ end }}
{{- end }}
