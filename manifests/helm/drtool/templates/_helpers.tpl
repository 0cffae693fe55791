{{/* Labels every object carries. */}}
{{- define "drtool.labels" -}}
app.kubernetes.io/part-of: drtool
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* The image: repository@digest when a digest is given, else repository:tag (default appVersion). */}}
{{- define "drtool.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}
{{- end }}

{{/* Pod-level hardening shared by every drtool pod: non-root uid 65532 (the image's user), RuntimeDefault seccomp. */}}
{{- define "drtool.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile: {type: RuntimeDefault}
{{- end }}

{{/* Container-level hardening: read-only root filesystem, no privilege escalation, no capabilities. */}}
{{- define "drtool.containerSecurityContext" -}}
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
capabilities: {drop: ["ALL"]}
{{- end }}

{{/* Egress to cluster DNS, first rule of every policy. */}}
{{- define "drtool.dnsEgress" -}}
- to:
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: kube-system
      podSelector:
        matchLabels:
          k8s-app: kube-dns
  ports:
    - {protocol: UDP, port: 53}
    - {protocol: TCP, port: 53}
{{- end }}

{{/* Egress to the store. */}}
{{- define "drtool.storeEgress" -}}
- to:
    {{- range .Values.networkPolicy.store.cidrs }}
    - ipBlock: {cidr: {{ . }}}
    {{- end }}
  ports:
    - {protocol: TCP, port: {{ .Values.networkPolicy.store.port }}}
{{- end }}

{{/* Egress to the Pushgateway. */}}
{{- define "drtool.pushgatewayEgress" -}}
{{- if .Values.pushgateway }}
{{- with .Values.networkPolicy.pushgateway }}
- to:
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: {{ .namespace }}
      podSelector:
        matchLabels:
          {{- toYaml .podLabels | nindent 10 }}
  ports:
    - {protocol: TCP, port: {{ .port }}}
{{- end }}
{{- end }}
{{- end }}

{{/* What a backup set's pods need: "etcd" (the etcd certificate, no token) or "api" (the read-only token). */}}
{{- define "drtool.setKind" -}}
{{- $api := without .plugins "etcd" -}}
{{- if and (has "etcd" .plugins) (gt (len $api) 0) -}}
{{- fail (printf "backup set %s mixes etcd with %s: keep etcd in a set of its own, so its certificate stays out of the API pods" .name (join ", " $api)) -}}
{{- end -}}
{{- if has "etcd" .plugins }}etcd{{ else }}api{{ end -}}
{{- end }}

{{/* The built-in kinds drtool reads (backup) and writes (restore), each by name: `*` would also grant every
subresource (nodes/proxy, pods/exec, pods/attach, pods/portforward, serviceaccounts/token, ...). The
argument: the verbs to grant. The same rules as manifests/base/rbac-*.yaml (tests/test_manifests.py). */}}
{{- define "drtool.builtinRules" -}}
{{- $verbs := . | toJson -}}
- apiGroups: [""]
  resources:
    - configmaps
    - endpoints
    - limitranges
    - namespaces
    - nodes
    - persistentvolumeclaims
    - persistentvolumes
    - pods
    - podtemplates
    - replicationcontrollers
    - resourcequotas
    - secrets
    - serviceaccounts
    - services
  verbs: {{ $verbs }}
- apiGroups: ["admissionregistration.k8s.io"]
  resources:
    - mutatingadmissionpolicies
    - mutatingadmissionpolicybindings
    - mutatingwebhookconfigurations
    - validatingadmissionpolicies
    - validatingadmissionpolicybindings
    - validatingwebhookconfigurations
  verbs: {{ $verbs }}
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  verbs: {{ $verbs }}
- apiGroups: ["apiregistration.k8s.io"]
  resources: ["apiservices"]
  verbs: {{ $verbs }}
- apiGroups: ["apps"]
  resources: ["daemonsets", "deployments", "replicasets", "statefulsets"]
  verbs: {{ $verbs }}
- apiGroups: ["autoscaling"]
  resources: ["horizontalpodautoscalers"]
  verbs: {{ $verbs }}
- apiGroups: ["batch"]
  resources: ["cronjobs", "jobs"]
  verbs: {{ $verbs }}
- apiGroups: ["certificates.k8s.io"]
  resources: ["clustertrustbundles"]
  verbs: {{ $verbs }}
- apiGroups: ["discovery.k8s.io"]
  resources: ["endpointslices"]
  verbs: {{ $verbs }}
- apiGroups: ["flowcontrol.apiserver.k8s.io"]
  resources: ["flowschemas", "prioritylevelconfigurations"]
  verbs: {{ $verbs }}
- apiGroups: ["networking.k8s.io"]
  resources: ["ingressclasses", "ingresses", "networkpolicies", "servicecidrs"]
  verbs: {{ $verbs }}
- apiGroups: ["node.k8s.io"]
  resources: ["runtimeclasses"]
  verbs: {{ $verbs }}
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: {{ $verbs }}
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["clusterrolebindings", "clusterroles", "rolebindings", "roles"]
  verbs: {{ $verbs }}
- apiGroups: ["resource.k8s.io"]
  resources: ["deviceclasses", "devicetaintrules", "resourceclaims", "resourceclaimtemplates"]
  verbs: {{ $verbs }}
- apiGroups: ["scheduling.k8s.io"]
  resources: ["priorityclasses"]
  verbs: {{ $verbs }}
- apiGroups: ["storage.k8s.io"]
  resources: ["csidrivers", "storageclasses", "volumeattributesclasses"]
  verbs: {{ $verbs }}
- apiGroups: ["storagemigration.k8s.io"]
  resources: ["storageversionmigrations"]
  verbs: {{ $verbs }}
{{- end }}
