{{/*
The labels every object carries: the same two as the kustomize manifests, so the default
render equals `kubectl kustomize deploy/` and a switch from kustomize to Helm keeps the
DaemonSet's selector (which is immutable).
*/}}
{{- define "podcidr-speaker.selectorLabels" -}}
app.kubernetes.io/name: podcidr-speaker
app.kubernetes.io/component: speaker
{{- end }}

{{- define "podcidr-speaker.labels" -}}
{{ include "podcidr-speaker.selectorLabels" . }}
{{- end }}

{{/* The ServiceAccount every binding names. */}}
{{- define "podcidr-speaker.subjects" -}}
subjects:
  - kind: ServiceAccount
    name: podcidr-speaker
    namespace: {{ .Release.Namespace }}
{{- end }}

{{/*
The image: always tagged (the schema refuses `latest` and empty); the listen variant is
the "-listen" image, whose binary carries cap_net_bind_service (deploy/README.md), pinned
by its own digest (image.listenDigest).
*/}}
{{- define "podcidr-speaker.image" -}}
{{- $tag := .Values.image.tag -}}
{{- $digest := .Values.image.digest -}}
{{- if .Values.listen.enabled }}{{ $tag = printf "%s-listen" $tag }}{{ $digest = .Values.image.listenDigest }}{{ end -}}
{{- $ref := printf "%s:%s" .Values.image.repository $tag -}}
{{- if $digest }}{{ $ref = printf "%s@%s" $ref $digest }}{{ end -}}
{{- $ref -}}
{{- end }}

{{/* Where the bgp-config is read: namespace, name and the --bgp-config-map value. */}}
{{- define "podcidr-speaker.bgpConfigNamespace" -}}
{{- if eq .Values.bgpConfig.source "cilium" }}kube-system
{{- else if eq .Values.bgpConfig.source "metallb" }}metallb-system
{{- else }}{{ .Release.Namespace }}
{{- end }}
{{- end }}

{{- define "podcidr-speaker.bgpConfigName" -}}
{{- if eq .Values.bgpConfig.source "cilium" }}bgp-config
{{- else if eq .Values.bgpConfig.source "metallb" }}config
{{- else }}podcidr-speaker-bgp-config
{{- end }}
{{- end }}

{{- define "podcidr-speaker.bgpConfigMapFlag" -}}
{{- if eq .Values.bgpConfig.source "metallb" -}}
metallb-system/config:config
{{- else -}}
{{ include "podcidr-speaker.bgpConfigNamespace" . }}/{{ include "podcidr-speaker.bgpConfigName" . }}
{{- end }}
{{- end }}

{{/*
The allocator's labels: the same name, its own component, so its Deployment's selector
never matches a speaker (and the reverse).
*/}}
{{- define "podcidr-speaker.allocatorLabels" -}}
app.kubernetes.io/name: podcidr-speaker
app.kubernetes.io/component: allocator
{{- end }}

{{- define "podcidr-speaker.allocatorSubjects" -}}
subjects:
  - kind: ServiceAccount
    name: podcidr-speaker-allocator
    namespace: {{ .Release.Namespace }}
{{- end }}

{{/*
The allocator's image: the speaker's repository, tag and digest, never the "-listen"
variant: its file capability would make the kernel refuse to exec it with every
capability dropped.
*/}}
{{- define "podcidr-speaker.allocatorImage" -}}
{{- $ref := printf "%s:%s" .Values.image.repository .Values.image.tag -}}
{{- if .Values.image.digest }}{{ $ref = printf "%s@%s" $ref .Values.image.digest }}{{ end -}}
{{- $ref -}}
{{- end }}
