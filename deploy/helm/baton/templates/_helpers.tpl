{{/* The name of the chart's objects: the release name, with the chart's name unless it has it. */}}
{{- define "baton.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The labels that select the release's pods. */}}
{{- define "baton.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "baton.labels" -}}
{{ include "baton.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The Secret holding the store URL, and its key. */}}
{{- define "baton.storeSecret" -}}
{{- if .Values.store.existingSecret -}}{{ .Values.store.existingSecret }}{{- else if .Values.store.dsn -}}{{ include "baton.fullname" . }}-store{{- else -}}
{{- fail "store.dsn or store.existingSecret is required: the PostgreSQL URL every replica uses (postgres://USER:PASSWORD@HOST:5432/DB), or the name of a Secret holding it under store.existingSecretKey" -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the auth file, and its key. */}}
{{- define "baton.authSecret" -}}
{{- if .Values.auth.existingSecret -}}{{ .Values.auth.existingSecret }}{{- else if .Values.auth.tokens -}}{{ include "baton.fullname" . }}-auth{{- else -}}
{{- fail "auth.tokens or auth.existingSecret is required: the auth file's lines (\"name role sha256-of-token\"), or the name of a Secret holding them under auth.existingSecretKey; baton serve refuses a non-loopback address without one" -}}
{{- end -}}
{{- end -}}
