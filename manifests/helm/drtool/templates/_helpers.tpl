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
