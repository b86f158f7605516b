{{/*
The DaemonSet of one mode ("device-plugin" or "dra"): the pod, its settings, its
mounts and the nodes it runs on. With serve: by-node-label the device plugin's
DaemonSet keeps the release's name and the DRA driver's is "<name>-dra"; each
adds the serveLabel expression to every node selector term of the affinity.
*/}}
{{- define "ascend-device-plugin.daemonset" -}}
{{- $root := .root }}
{{- $mode := .mode }}
{{- $perNode := eq $root.Values.serve "by-node-label" }}
{{- $selector := include "ascend-device-plugin.modeSelectorLabels" . | fromYaml }}
{{- $podLabels := merge (dict "app.kubernetes.io/part-of" (include "ascend-device-plugin.name" $root)) $selector (include "ascend-device-plugin.labels" $root | fromYaml) }}
{{- with $root }}
{{- $s := .Values.settings }}
{{- $writesCdi := or (eq $mode "dra") (eq (toString $s.allocateMode) "cdi") }}
{{- /* What the other mode alone uses: Volcano on the device plugin's nodes, vNPUs made for claims on the driver's. */}}
{{- $skipped := list }}
{{- if eq $mode "dra" }}
{{- $skipped = list "volcano" "allocateMode" }}
{{- else if eq (toString $s.vnpu) "dynamic" }}
{{- $skipped = list "vnpu" }}
{{- end }}
{{- $affinity := deepCopy (.Values.affinity | default dict) }}
{{- if $perNode }}
{{- $expression := dict "key" .Values.serveLabel "operator" (ternary "In" "NotIn" (eq $mode "dra")) "values" (list "dra") }}
{{- $nodeAffinity := $affinity.nodeAffinity | default dict }}
{{- $required := $nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution | default dict }}
{{- $terms := list }}
{{- range ($required.nodeSelectorTerms | default (list dict)) }}
{{- $terms = append $terms (set (deepCopy .) "matchExpressions" (append (.matchExpressions | default list) $expression)) }}
{{- end }}
{{- $_ := set $required "nodeSelectorTerms" $terms }}
{{- $_ = set $nodeAffinity "requiredDuringSchedulingIgnoredDuringExecution" $required }}
{{- $_ = set $affinity "nodeAffinity" $nodeAffinity }}
{{- end }}
{{- $annotations := deepCopy (.Values.podAnnotations | default dict) }}
{{- if .Values.metrics.scrapeAnnotations }}
{{- $_ := set $annotations "prometheus.io/scrape" "true" }}
{{- $_ = set $annotations "prometheus.io/port" (toString (int .Values.httpPort)) }}
{{- $_ = set $annotations "prometheus.io/path" "/metrics" }}
{{- end }}
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: {{ include "ascend-device-plugin.daemonSetName" (dict "root" $root "mode" $mode) }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "ascend-device-plugin.labels" . | nindent 4 }}
spec:
  selector:
    matchLabels:
      {{- toYaml $selector | nindent 6 }}
  updateStrategy:
    type: RollingUpdate
    rollingUpdate:
      # Never a surge pod: it would wait for the old pod's instance lock and never become ready.
      maxSurge: 0
      maxUnavailable: {{ .Values.updateStrategy.maxUnavailable }}
  template:
    metadata:
      labels:
        {{- toYaml $podLabels | nindent 8 }}
        {{- with .Values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with $annotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: {{ include "ascend-device-plugin.serviceAccountName" . }}
      {{- with .Values.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      {{- with .Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      hostNetwork: {{ .Values.hostNetwork }}
      {{- if .Values.hostNetwork }}
      dnsPolicy: ClusterFirstWithHostNet
      {{- end }}
      terminationGracePeriodSeconds: {{ .Values.terminationGracePeriodSeconds }}
      {{- with .Values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: device-plugin
          image: {{ include "ascend-device-plugin.image" . | quote }}
          imagePullPolicy: {{ .Values.image.pullPolicy }}
          {{- if .Values.hostLoader.enabled }}
          # Under the host's loader (hostLoader).
          command:
            - {{ .Values.hostLoader.path | quote }}
            - {{ .Values.hostLoader.python | quote }}
            - "-m"
            - ascend_plugin
            - run
          {{- end }}
          env:
            # The node this pod runs on, and the kubelet's address (Huawei's plugin says "host ip is invalid" without them).
            - name: NODE_NAME
              valueFrom:
                fieldRef:
                  fieldPath: spec.nodeName
            - name: HOST_IP
              valueFrom:
                fieldRef:
                  fieldPath: status.hostIP
            - name: POD_NAMESPACE
              valueFrom:
                fieldRef:
                  fieldPath: metadata.namespace
            - name: ASCEND_DP_CONFIG_CONFIGMAP
              value: {{ include "ascend-device-plugin.configMapName" . | quote }}
            - name: ASCEND_DP_CONFIG_CONFIGMAP_NAMESPACE
              value: {{ .Release.Namespace | quote }}
            - name: ASCEND_DP_SERVE
              value: {{ $mode | quote }}
            {{- if ne (int .Values.httpPort) 11251 }}
            - name: ASCEND_DP_HTTP_ADDRESS
              value: {{ printf "0.0.0.0:%d" (int .Values.httpPort) | quote }}
            {{- end }}
            - name: LD_LIBRARY_PATH
              value: {{ include "ascend-device-plugin.libraryPath" . | quote }}
            {{- range $key, $value := $s }}
            {{- if and (not (kindIs "invalid" $value)) (not (has $key $skipped)) }}
            - name: {{ printf "ASCEND_DP_%s" ($key | snakecase | upper) }}
              value: {{ ternary (join "," $value) (toString $value) (kindIs "slice" $value) | quote }}
            {{- end }}
            {{- end }}
            {{- with .Values.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          ports:
            - name: http
              containerPort: {{ .Values.httpPort }}
              protocol: TCP
          livenessProbe:
            httpGet:
              path: /healthz
              port: http
            {{- toYaml .Values.probes.liveness | nindent 12 }}
          readinessProbe:
            httpGet:
              path: /readyz
              port: http
            {{- toYaml .Values.probes.readiness | nindent 12 }}
          {{- with .Values.resources }}
          resources:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          securityContext:
            privileged: {{ .Values.securityContext.privileged }}
            readOnlyRootFilesystem: {{ .Values.securityContext.readOnlyRootFilesystem }}
            runAsUser: 0
            runAsGroup: 0
          volumeMounts:
            {{- if eq $mode "dra" }}
            # serve: dra: the kubelet's plugin registry and the driver's directory, at the host's paths.
            - name: dra-registry
              mountPath: {{ include "ascend-device-plugin.draRegistryPath" . }}
            - name: dra-plugin
              mountPath: {{ include "ascend-device-plugin.draPluginPath" . }}
            {{- else }}
            - name: device-plugin
              mountPath: /var/lib/kubelet/device-plugins
            {{- end }}
            - name: dev
              mountPath: /dev
            # The host's /dev/shm, never an emptyDir (a private one: "dm_send_msg fail:2").
            - name: dev-shm
              mountPath: /dev/shm
            - name: driver
              mountPath: {{ .Values.driver.hostPath }}
              readOnly: true
            - name: tmp
              mountPath: /tmp
            {{- if $writesCdi }}
            # cdi mode and serve: dra: the plugin writes CDI specs where the runtime reads them.
            - name: cdi
              mountPath: {{ $s.cdiSpecDir | default "/var/run/cdi" }}
            {{- end }}
            # The kubelet's PodResources socket: which container holds which chip (the telemetry's
            # container labels, the chips pods hold; Volcano mode's kubelet IDs; with serve: dra, the
            # chips device-plugin pods still hold). The directory, not the socket: the kubelet
            # re-creates the socket when it restarts.
            - name: pod-resources
              mountPath: {{ include "ascend-device-plugin.podResourcesDir" . }}
              readOnly: true
            {{- range $index, $path := .Values.hostFiles }}
            - name: {{ include "ascend-device-plugin.volumeName" (dict "prefix" "file" "index" $index "path" $path) }}
              mountPath: {{ $path }}
              readOnly: true
            {{- end }}
            {{- range $index, $path := include "ascend-device-plugin.hostDirectories" . | fromJsonArray }}
            - name: {{ include "ascend-device-plugin.volumeName" (dict "prefix" "dir" "index" $index "path" $path) }}
              mountPath: {{ $path }}
              readOnly: true
            {{- end }}
            {{- with .Values.extraVolumeMounts }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
      volumes:
        {{- if eq $mode "dra" }}
        - name: dra-registry
          hostPath:
            path: {{ include "ascend-device-plugin.draRegistryPath" . }}
            type: Directory
        - name: dra-plugin
          hostPath:
            path: {{ include "ascend-device-plugin.draPluginPath" . }}
            type: DirectoryOrCreate
        {{- else }}
        - name: device-plugin
          hostPath:
            path: {{ .Values.kubeletDevicePluginPath }}
            type: Directory
        {{- end }}
        - name: dev
          hostPath:
            path: /dev
            type: Directory
        - name: dev-shm
          hostPath:
            path: /dev/shm
            type: Directory
        - name: driver
          hostPath:
            path: {{ .Values.driver.hostPath }}
            type: Directory
        - name: tmp
          emptyDir:
            sizeLimit: 64Mi
        {{- if $writesCdi }}
        - name: cdi
          hostPath:
            path: /var/run/cdi
            type: DirectoryOrCreate
        {{- end }}
        - name: pod-resources
          hostPath:
            path: {{ include "ascend-device-plugin.podResourcesDir" . }}
            type: Directory
        {{- /* Files, not directories or sockets (MountVolume fails otherwise). */}}
        {{- range $index, $path := .Values.hostFiles }}
        - name: {{ include "ascend-device-plugin.volumeName" (dict "prefix" "file" "index" $index "path" $path) }}
          hostPath:
            path: {{ $path }}
            type: File
        {{- end }}
        {{- range $index, $path := include "ascend-device-plugin.hostDirectories" . | fromJsonArray }}
        - name: {{ include "ascend-device-plugin.volumeName" (dict "prefix" "dir" "index" $index "path" $path) }}
          hostPath:
            path: {{ $path }}
            type: Directory
        {{- end }}
        {{- with .Values.extraVolumes }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
{{- end }}
{{- end }}
