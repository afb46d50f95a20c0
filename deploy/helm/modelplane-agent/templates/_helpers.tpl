{{/*
The labels every object carries: exactly those of deploy/agent, so the chart and
the kustomization make the same objects. No per-release labels (instance,
managed-by, helm.sh/chart): a Deployment's selector is immutable, and one
carrying them could not be taken over from a kustomize install nor back. There
is one agent per cluster, so its names are fixed, not derived from the release.
*/}}
{{- define "modelplane-agent.labels" -}}
app.kubernetes.io/name: modelplane-agent
app.kubernetes.io/part-of: modelplane
{{- end }}

{{- define "modelplane-agent.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default (printf "v%s" .Chart.AppVersion) }}
{{- end }}
